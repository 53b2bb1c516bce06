"""The choices an MLX export offers, shared by the API, the dashboard, the CLI and the engine.

An MLX export is a folder that `mlx_lm.load` opens on Apple silicon: either the merged model
(its weights in float16, bfloat16 or float32, or quantised by mlx-lm to 4 or 8 bits), or the
base model converted beside the adapter in mlx-lm's adapter format. Its stored name says which,
so different choices for the same model are different exports: `mlx-float16-final`,
`mlx-4bit-step-40`, `mlx-adapter-bfloat16-final`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MlxDtype = Literal["float16", "bfloat16", "float32"]
MlxContents = Literal["merged", "adapter"]

MLX_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")
MLX_QUANTIZE_BITS: tuple[int, ...] = (4, 8)
MLX_CONTENTS: tuple[str, ...] = ("merged", "adapter")
DEFAULT_MLX_DTYPE = "float16"
# mlx-lm's own default group for affine quantisation: one scale and one bias per 64 weights.
MLX_QUANTIZE_GROUP = 64
# What the `mlx-...` part of an export name may be (the regular expression of `variant_name`'s results).
MLX_VARIANT_PATTERN = r"mlx-(?:(?:adapter-)?(?:float16|bfloat16|float32)|[48]bit)"


@dataclass(frozen=True)
class MlxExportOptions:
    """How to build an MLX export: the merged model or base + adapter, its dtype, and optional quantisation."""

    contents: str = "merged"
    dtype: str = DEFAULT_MLX_DTYPE
    quantize_bits: int | None = None

    def problems(self) -> list[tuple[str, str, str]]:
        """What is wrong with these options: (field, what was expected, what was found) each; none when valid."""
        found: list[tuple[str, str, str]] = []
        if self.contents not in MLX_CONTENTS:
            found.append(("mlx_contents", " | ".join(MLX_CONTENTS), str(self.contents)))
        if self.dtype not in MLX_DTYPES:
            found.append(("dtype", " | ".join(MLX_DTYPES), str(self.dtype)))
        if self.quantize_bits is not None and self.quantize_bits not in MLX_QUANTIZE_BITS:
            found.append(("quantize_bits", "4 | 8 (or none)", str(self.quantize_bits)))
        if self.quantize_bits is not None and self.contents == "adapter":
            found.append(("quantize_bits", "none with the adapter layout (quantise a merged export)",
                          str(self.quantize_bits)))
        return found

    def variant_name(self) -> str:
        """The export's name before its `-final` / `-step-N` label, e.g. `mlx-float16` or `mlx-4bit`."""
        if self.quantize_bits is not None:
            return f"mlx-{self.quantize_bits}bit"
        if self.contents == "adapter":
            return f"mlx-adapter-{self.dtype}"
        return f"mlx-{self.dtype}"

    def to_dict(self) -> dict[str, object]:
        """JSON form (the export spec's `mlx` entry, and `export.json`)."""
        return {"contents": self.contents, "dtype": self.dtype, "quantize_bits": self.quantize_bits}

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> MlxExportOptions:
        """Options from their JSON form (defaults for missing keys)."""
        data = data or {}
        bits = data.get("quantize_bits")
        return cls(
            contents=str(data.get("contents") or "merged"),
            dtype=str(data.get("dtype") or DEFAULT_MLX_DTYPE),
            quantize_bits=int(bits) if isinstance(bits, (int, str)) and str(bits).strip() else None,
        )
