"""Peak dense bf16/fp16 tensor FLOPs per device, for estimates when nothing was measured on the machine.

The figures are the makers' published dense (not sparse) peaks; a training run reaches a
fraction of them (the plan's stated efficiency). Device names are matched by the first
key found in the name a device reports (e.g. "NVIDIA H100 80GB HBM3" is an H100), so a
longer key that contains a shorter one comes first (A100 before A10, L40S before L4).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.core.errors import ConfigError, Issue


@dataclass(frozen=True)
class DevicePeak:
    """One device type's peak dense FLOPs per second and where the figure comes from."""

    key: str
    tflops: float
    source: str

    @property
    def flops(self) -> float:
        """Peak FLOPs per second of one device."""
        return self.tflops * 1e12


PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("H200", 989.0, "NVIDIA H200 datasheet, BF16 Tensor Core dense (1979 with sparsity)"),
    DevicePeak("H100", 989.0, "NVIDIA H100 SXM datasheet, BF16 Tensor Core dense (1979 with sparsity)"),
    DevicePeak("A100", 312.0, "NVIDIA A100 datasheet, BF16 Tensor Core dense"),
    DevicePeak("L40S", 362.0, "NVIDIA L40S datasheet, BF16 Tensor Core dense (733 with sparsity)"),
    DevicePeak("A10", 125.0, "NVIDIA A10 datasheet, BF16 Tensor Core dense"),
    DevicePeak("L4", 121.0, "NVIDIA L4 datasheet, BF16 Tensor Core dense (242 with sparsity)"),
    DevicePeak("RTX 4090", 165.0, "NVIDIA Ada architecture whitepaper, RTX 4090 FP16 Tensor dense, FP32 accumulate"),
    DevicePeak("MI300X", 1307.0, "AMD Instinct MI300X datasheet, BF16 dense"),
    DevicePeak(
        "CPU",
        1.0,
        "an order of magnitude, not a datasheet: 16 cores × 2.0 GHz × 32 FP32 FLOPs a cycle (two AVX2 FMA units)",
    ),
)


DEVICE_TYPES: tuple[str, ...] = tuple(peak.key for peak in PEAKS)


def device_key(device_type: str) -> str:
    """The table's key for a device name (`"h100"` and `"NVIDIA H100 80GB HBM3"` are `"H100"`); unknown: as given."""
    name = device_type.strip().upper()
    return next((peak.key for peak in PEAKS if peak.key in name), device_type.strip())


def device_peak(device_type: str) -> DevicePeak:
    """The peak of `device_type` (a key or a reported device name); ConfigError naming the known types."""
    name = device_type.strip().upper()
    for peak in PEAKS:
        if peak.key in name:
            return peak
    known = ", ".join(peak.key for peak in PEAKS)
    raise ConfigError(
        [
            Issue(
                "no peak FLOPs are known for this device, so nothing can be estimated on it",
                field="machine.device_type",
                expected=f"a name containing one of {known}, or a preflight report measured on the machine",
                found=repr(device_type),
            )
        ],
        title="cannot plan the rental",
    )
