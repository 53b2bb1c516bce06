"""Sharded checkpoints: every rank writes its own part through torch.distributed.checkpoint (DCP).

A job trained with FSDP over several processes never holds its whole model in one place, so
its checkpoints are sharded: each rank saves the shards it owns, with the optimizer state, and
DCP records in `.metadata` which slice of which tensor sits in which file. Loading asks DCP for
the slices the loading ranks own, whatever their number, so a checkpoint written by 4
processes resumes on 2 or on 1 (resharding). Export reads every slice offline, in one process,
and writes plain safetensors that transformers and peft load.

Two layouts are read:

- ours (`save_sharded`): one DCP folder holding `{"model": ..., "optimizer": ...}`, and
  `sharded_checkpoint.json` beside the DCP files, written by rank 0 after every rank has
  finished; a folder without it is an interrupted save.
- the transformers Trainer's under FSDP with a sharded state dict: accelerate's
  `save_fsdp_model` writes `pytorch_model_fsdp_0/` holding `{"model": ...}` (a PEFT model's
  adapter only, already named as peft names it) and `save_fsdp_optimizer` writes `optimizer_0/`.

DCP's own reader unpickles `.metadata` with plain `pickle` and non-tensor entries with
`torch.load(weights_only=False)`, either of which runs code from a crafted checkpoint. Every
read here goes through a reader that allows only DCP's metadata classes and a planner that
unpickles non-tensor entries with `weights_only=True`; tensors DCP already reads that way.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import re
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import ModelLoadError

if TYPE_CHECKING:
    import torch
    from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
    from torch.distributed.checkpoint.metadata import Metadata

INFO_FILE = "sharded_checkpoint.json"
DCP_METADATA_FILE = ".metadata"
MODEL_WEIGHTS_FILE = "model.safetensors"
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
# accelerate's FSDP_MODEL_NAME with the index of the first (only) model the Trainer prepares.
TRAINER_MODEL_DIR = "pytorch_model_fsdp_0"
_TRAINER_MODEL_DIR_PATTERN = re.compile(r"pytorch_model_fsdp_\d+")
_FORMAT = "tunedeck-sharded-checkpoint"
_FORMAT_VERSION = 1
# The top-level keys of the state DCP saves; both layouts put the model under "model".
_MODEL_KEY = "model"
_OPTIMIZER_KEY = "optimizer"
# Modules that wrap a model without naming anything of it: torch.compile, FSDP1, activation
# checkpointing. DCP's get_model_state_dict drops them, other writers may not.
_WRAPPER_SEGMENTS = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})
# Single-process loads and saves are intended (export, a one-process resume); DCP warns each time.
_SINGLE_PROCESS_WARNING = "torch.distributed is disabled, unavailable or uninitialized"


@dataclass(frozen=True)
class ShardedCheckpointInfo:
    """What `sharded_checkpoint.json` records about a checkpoint written by `save_sharded`."""

    world_size: int
    model_keys: tuple[str, ...]
    has_optimizer: bool
    adapter: bool = False
    adapter_name: str | None = None
    # Saved name -> the name peft gives it in adapter_model.safetensors (adapters only).
    adapter_keys: dict[str, str] = field(default_factory=dict)
    # Name of a tied parameter -> the name of the one save_pretrained keeps (the first registered).
    tied: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    torch_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as written to `sharded_checkpoint.json`."""
        return {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "world_size": self.world_size,
            "model_keys": list(self.model_keys),
            "has_optimizer": self.has_optimizer,
            "adapter": self.adapter,
            "adapter_name": self.adapter_name,
            "adapter_keys": dict(self.adapter_keys),
            "tied": dict(self.tied),
            "extra": dict(self.extra),
            "torch_version": self.torch_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShardedCheckpointInfo:
        """The info from its JSON form; a ValueError for another format or a newer version."""
        if data.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} file")
        if int(data.get("format_version", 0)) > _FORMAT_VERSION:
            raise ValueError(f"format version {data.get('format_version')} is newer than this tunedeck reads")
        return cls(
            world_size=int(data["world_size"]),
            model_keys=tuple(data["model_keys"]),
            has_optimizer=bool(data["has_optimizer"]),
            adapter=bool(data.get("adapter", False)),
            adapter_name=data.get("adapter_name"),
            adapter_keys=dict(data.get("adapter_keys") or {}),
            tied=dict(data.get("tied") or {}),
            extra=dict(data.get("extra") or {}),
            torch_version=str(data.get("torch_version", "")),
        )


def read_checkpoint_info(folder: Path) -> ShardedCheckpointInfo:
    """The info `save_sharded` wrote in `folder`; a ModelLoadError when it is missing or unreadable."""
    path = Path(folder) / INFO_FILE
    if not (Path(folder) / DCP_METADATA_FILE).is_file():
        raise ModelLoadError(f"{folder}: not a sharded checkpoint (no {DCP_METADATA_FILE})")
    try:
        return ShardedCheckpointInfo.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ModelLoadError(f"{folder}: no {INFO_FILE}; the save did not finish") from None
    except (ValueError, KeyError, TypeError) as error:
        raise ModelLoadError(f"{path}: unreadable ({error})") from None


def save_sharded(
    folder: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
) -> ShardedCheckpointInfo:
    """Save the model (and optimizer) state into `folder`, each rank writing the shards it owns.

    Every rank of the process group calls it (one process without a group works too). The
    model may be sharded with FSDP2 (`fully_shard`), wrapped in DDP or plain. A PEFT model
    saves only its adapter (what peft saves, and the trainable parameters): the frozen base
    comes back from the base model. `extra` (JSON-ready) is kept in the info file, for the
    caller's own state (the step, say). Returns the info, identical on every rank, once the
    whole checkpoint, info file included, is on disk.
    """
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    folder = Path(folder)
    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1
    if optimizer is not None:
        model_state, optimizer_state = get_state_dict(model, optimizer)
    else:
        model_state, optimizer_state = get_model_state_dict(model), None
    base = _unwrap(model)
    adapter_name, adapter_keys = _adapter_keys(base, model_state)
    if adapter_name is not None:
        keep = set(adapter_keys) | _trainable_names(base)
        model_state = {key: value for key, value in model_state.items() if key in keep}
    info = ShardedCheckpointInfo(
        world_size=world_size,
        model_keys=tuple(sorted(model_state)),
        has_optimizer=optimizer is not None,
        adapter=adapter_name is not None,
        adapter_name=adapter_name,
        adapter_keys=adapter_keys,
        tied={alias: kept for alias, kept in _tied_aliases(base).items() if alias in model_state},
        extra=dict(extra or {}),
        torch_version=torch.__version__,
    )
    # Checked on every rank before anything is written, so that a bad `extra` fails them all alike.
    json.dumps(info.to_dict())
    folder.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        # A stale info file would vouch for a half-written new save. No rank writes data before
        # rank 0 has joined DCP's planning, which happens after this.
        (folder / INFO_FILE).unlink(missing_ok=True)
    state: dict[str, Any] = {_MODEL_KEY: model_state}
    if optimizer_state is not None:
        state[_OPTIMIZER_KEY] = optimizer_state
    with _single_process_quiet():
        dcp.save(state, checkpoint_id=folder, no_dist=not distributed)
    # dcp.save returns on every rank after rank 0 has written `.metadata`: the data is complete.
    failure: str | None = None
    if rank == 0:
        try:
            write_json_atomic(folder / INFO_FILE, info.to_dict())
        except OSError as error:
            failure = str(error)
            if not distributed:
                raise
    if distributed:
        # Rank 0's outcome reaches every rank, so none reports the checkpoint saved (and, say,
        # deletes an older one) before it is, and none waits for a rank 0 that failed.
        box: list[str | None] = [failure]
        dist.broadcast_object_list(box, src=0)
        if box[0] is not None:
            raise OSError(f"{folder / INFO_FILE}: rank 0 could not write it ({box[0]})")
    return info


def load_sharded(
    folder: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
) -> ShardedCheckpointInfo:
    """Restore the model (and optimizer) state `save_sharded` wrote in `folder`, exactly.

    Every rank calls it, on any number of processes: DCP reads, for each rank, the slices of
    the shards it now owns, whatever the number of ranks that wrote them (or a plain module's
    whole tensors). A PEFT model gets its adapter back and keeps its base weights. Call it
    before `backward()` or after `optimizer.step()`, as DCP's `set_state_dict` requires.
    Returns the checkpoint's info (its `extra` among it).
    """
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    folder = Path(folder)
    info = read_checkpoint_info(folder)
    if optimizer is not None and not info.has_optimizer:
        raise ModelLoadError(f"{folder}: the checkpoint holds no optimizer state")
    if optimizer is not None:
        # Also initialises an empty optimizer's state, which DCP needs as the template to fill.
        model_state, optimizer_state = get_state_dict(model, optimizer)
    else:
        model_state, optimizer_state = get_model_state_dict(model), None
    missing = [key for key in info.model_keys if key not in model_state]
    unexpected = [] if info.adapter else [key for key in model_state if key not in set(info.model_keys)]
    if missing or unexpected:
        raise ModelLoadError(
            f"{folder}: the checkpoint does not match the model "
            f"(not in the model: {missing[:5]}; not in the checkpoint: {unexpected[:5]})"
        )
    state: dict[str, Any] = {_MODEL_KEY: {key: model_state[key] for key in info.model_keys}}
    if optimizer_state is not None:
        state[_OPTIMIZER_KEY] = optimizer_state
    distributed = dist.is_available() and dist.is_initialized()
    with _single_process_quiet():
        dcp.load(
            state,
            storage_reader=_safe_reader_class()(folder),
            planner=_weights_only_planner_class()(),
            no_dist=not distributed,
        )
    # Every saved key was found above, so a non-strict load only lets an adapter's frozen base be.
    options = StateDictOptions(strict=not info.adapter)
    if optimizer is not None:
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state[_MODEL_KEY],
            optim_state_dict=state[_OPTIMIZER_KEY],
            options=options,
        )
    else:
        set_model_state_dict(model, state[_MODEL_KEY], options=options)
    return info


def find_sharded_model(checkpoint_dir: Path) -> Path | None:
    """The folder holding sharded model weights in `checkpoint_dir` (or `checkpoint_dir` itself); None if none.

    Recognises a finished `save_sharded` folder (itself or a direct subfolder) and the
    Trainer's `pytorch_model_fsdp_<n>/`, so export can tell when it must consolidate.
    """
    checkpoint_dir = Path(checkpoint_dir)
    if _is_ours(checkpoint_dir) or _is_trainer_model_dir(checkpoint_dir):
        return checkpoint_dir
    if not checkpoint_dir.is_dir():
        return None
    children = sorted(path for path in checkpoint_dir.iterdir() if path.is_dir())
    for child in children:
        if _is_ours(child):
            return child
    trainer_dir = checkpoint_dir / TRAINER_MODEL_DIR
    return trainer_dir if _is_trainer_model_dir(trainer_dir) else None


def consolidate_to_safetensors(folder: Path, out_dir: Path, *, adapter: bool | None = None) -> Path:
    """Gather a sharded checkpoint's model into one safetensors file in `out_dir`; returns its path.

    Runs in one process, with or without a process group, and reads the whole model into
    memory on the CPU. `folder` is a sharded model folder of either layout, or a checkpoint
    folder holding one (see `find_sharded_model`). A full model becomes `model.safetensors`
    named as `save_pretrained` names it; a PEFT adapter becomes `adapter_model.safetensors`
    named as peft names it, for `PeftModel.from_pretrained`. `adapter` (None: as the
    checkpoint says) is a check: asking for the other kind is an error, since turning an
    adapter into a full model needs a merge. Configs are not written: the caller copies the
    model's `config.json` or the adapter's `adapter_config.json` beside the weights.
    """
    from safetensors.torch import save_file

    source = find_sharded_model(Path(folder))
    if source is None:
        raise ModelLoadError(f"{folder}: no sharded model checkpoint found")
    info = read_checkpoint_info(source) if _is_ours(source) else None
    metadata = _safe_reader_class()(source).read_metadata()
    names = _model_tensor_names(metadata)
    if not names:
        raise ModelLoadError(f"{source}: the checkpoint holds no model tensors")
    state = _read_model_tensors(source, metadata, names)
    if info is not None:
        is_adapter = info.adapter
        tensors = _ours_for_export(source, info, state)
    else:
        # The Trainer saves an adapter as peft names it (base_model.model....lora_A.weight).
        tensors = _strip_wrapper_names(state)
        is_adapter = all(key.startswith("base_model.") for key in tensors)
        if is_adapter and any(".base_layer." in key for key in tensors):
            raise ModelLoadError(f"{source}: holds a whole PEFT model, not an adapter; it needs a merge")
    if adapter is not None and adapter != is_adapter:
        holds = "a PEFT adapter" if is_adapter else "a full model"
        raise ModelLoadError(f"{source}: holds {holds}, not what was asked")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / (ADAPTER_WEIGHTS_FILE if is_adapter else MODEL_WEIGHTS_FILE)
    ready = {key: value.detach().to("cpu").contiguous() for key, value in sorted(tensors.items())}
    # Written beside its place and renamed, so a reader never sees half the weights.
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    try:
        # transformers and peft both write (and check for) this format tag.
        save_file(ready, temp, metadata={"format": "pt"})
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def _is_ours(folder: Path) -> bool:
    return (folder / INFO_FILE).is_file() and (folder / DCP_METADATA_FILE).is_file()


def _is_trainer_model_dir(folder: Path) -> bool:
    return bool(_TRAINER_MODEL_DIR_PATTERN.fullmatch(folder.name)) and (folder / DCP_METADATA_FILE).is_file()


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module under DDP (`module`) and torch.compile (`_orig_mod`); FSDP2 shards in place, no wrapper."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    while True:
        inner = model.module if isinstance(model, DistributedDataParallel) else getattr(model, "_orig_mod", None)
        # `_orig_mod` is torch.compile's OptimizedModule's, the one module with that attribute.
        if not isinstance(inner, torch.nn.Module):
            return model
        model = inner


def _adapter_keys(base: torch.nn.Module, model_state: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """For a PEFT model: the active adapter and, for each saved name, the name peft saves it under.

    peft's own `get_peft_model_state_dict` picks the adapter's entries and renames them (it
    drops the adapter name, and more for some tuners); it returns the state dict's own tensors,
    so their identity maps its names back to ours. No tensor is gathered: only names are read.
    """
    if not hasattr(base, "peft_config"):
        return None, {}
    from peft import PeftModel, get_peft_model_state_dict

    if not isinstance(base, PeftModel):
        return None, {}
    adapter_name = str(base.active_adapter)
    named = get_peft_model_state_dict(base, state_dict=dict(model_state), adapter_name=adapter_name)
    ours_by_tensor = {id(value): key for key, value in model_state.items()}
    keys: dict[str, str] = {}
    for peft_key, value in named.items():
        ours = ours_by_tensor.get(id(value))
        if ours is None:
            raise RuntimeError(f"cannot tell which parameter peft saves as {peft_key}")
        keys[ours] = peft_key
    return adapter_name, keys


def _trainable_names(base: torch.nn.Module) -> set[str]:
    return {_canonical(name) for name, param in base.named_parameters() if param.requires_grad}


def _tied_aliases(base: torch.nn.Module) -> dict[str, str]:
    """Each tied parameter's other names -> its first name, the one `save_pretrained` keeps."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, param in base.named_parameters(remove_duplicate=False):
        kept = first.setdefault(id(param), _canonical(name))
        if kept != _canonical(name):
            aliases[_canonical(name)] = kept
    return aliases


def _canonical(name: str) -> str:
    return ".".join(part for part in name.split(".") if part not in _WRAPPER_SEGMENTS)


def _strip_wrapper_names(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Names as the model itself has them: wrapper segments dropped, DDP's `module.` too when every name has it."""
    renamed = {_canonical(key): value for key, value in state.items()}
    if renamed and all(key.startswith("module.") for key in renamed):
        renamed = {key.removeprefix("module."): value for key, value in renamed.items()}
    if len(renamed) != len(state):
        raise ModelLoadError("two tensors have the same name once wrapper prefixes are removed")
    return renamed


def _ours_for_export(
    source: Path, info: ShardedCheckpointInfo, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    if info.adapter:
        missing = [key for key in info.adapter_keys if key not in state]
        if missing:
            raise ModelLoadError(f"{source}: adapter tensors missing from the checkpoint: {missing[:5]}")
        return {peft_key: state[key] for key, peft_key in info.adapter_keys.items()}
    # A tied parameter is saved once by save_pretrained; from_pretrained ties the other name.
    dropped = {alias for alias, kept in info.tied.items() if kept in state}
    return {key: value for key, value in state.items() if key not in dropped}


def _model_tensor_names(metadata: Metadata) -> dict[str, str]:
    """DCP's flattened key -> the model's name, for every tensor under the state's "model" entry."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    names: dict[str, str] = {}
    mappings = metadata.planner_data if isinstance(metadata.planner_data, dict) else None
    for flat, entry in metadata.state_dict_metadata.items():
        # Non-tensor entries (`_extra_state`) have no place in safetensors.
        if not isinstance(entry, TensorStorageMetadata):
            continue
        path = mappings.get(flat) if mappings is not None else None
        if path is not None:
            if len(path) == 2 and path[0] == _MODEL_KEY:
                names[flat] = str(path[1])
        elif flat.startswith(f"{_MODEL_KEY}."):
            # Saved without flattening information: the prefix is all there is.
            names[flat] = flat.removeprefix(f"{_MODEL_KEY}.")
    return names


def _read_model_tensors(source: Path, metadata: Metadata, names: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """Read whole tensors (every shard of each) into CPU tensors of their saved dtype, in one process."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    template: dict[str, torch.Tensor] = {}
    for flat, name in names.items():
        entry = metadata.state_dict_metadata[flat]
        assert isinstance(entry, TensorStorageMetadata)
        template[name] = torch.empty(entry.size, dtype=entry.properties.dtype)
    state: dict[str, Any] = {_MODEL_KEY: template}
    with _single_process_quiet():
        # no_dist: one process reads everything, even inside a job that has a process group.
        dcp.load(
            state, storage_reader=_safe_reader_class()(source), planner=_weights_only_planner_class()(), no_dist=True
        )
    return dict(state[_MODEL_KEY])


@contextmanager
def _single_process_quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(_SINGLE_PROCESS_WARNING))
        yield


# What DCP's `.metadata` pickles, as (module, name): its own record classes, torch.Size, the
# layout and memory-format encodings, and the checkpoint's path.
_METADATA_GLOBALS = frozenset(
    {
        ("torch.distributed.checkpoint.metadata", "Metadata"),
        ("torch.distributed.checkpoint.metadata", "MetadataIndex"),
        ("torch.distributed.checkpoint.metadata", "StorageMeta"),
        ("torch.distributed.checkpoint.metadata", "TensorProperties"),
        ("torch.distributed.checkpoint.metadata", "TensorStorageMetadata"),
        ("torch.distributed.checkpoint.metadata", "BytesStorageMetadata"),
        ("torch.distributed.checkpoint.metadata", "ChunkStorageMetadata"),
        ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"),
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
        ("torch.serialization", "_get_layout"),
        ("torch", "Size"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "PureWindowsPath"),
        ("pathlib._local", "PosixPath"),
        ("pathlib._local", "WindowsPath"),
        ("collections", "OrderedDict"),
    }
)


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP metadata and refuses any other class or function (which could run code)."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if (module, name) in _METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"checkpoint metadata refers to {module}.{name}, which is not allowed")


# The reader and planner subclass torch classes, so they are built on first use: importing this
# module does not import torch (no tunedeck module does at import time).
@functools.cache
def _safe_reader_class() -> type[FileSystemReader]:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

    class SafeFileSystemReader(FileSystemReader):
        """FileSystemReader that unpickles metadata through an allow-list and reads data only inside the folder."""

        def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
            rank = kwargs.get("rank")
            name = DCP_METADATA_FILE if rank is None else f"__{rank}{DCP_METADATA_FILE}"
            path = Path(self.path) / name
            try:
                with open(path, "rb") as handle:
                    metadata = _MetadataUnpickler(handle).load()
            except FileNotFoundError:
                raise ModelLoadError(f"{self.path}: not a sharded checkpoint (no {name})") from None
            except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as error:
                raise ModelLoadError(f"{path}: unreadable checkpoint metadata ({error})") from None
            if not isinstance(metadata, Metadata):
                raise ModelLoadError(f"{path}: not checkpoint metadata")
            for storage in (metadata.storage_data or {}).values():
                relative = str(getattr(storage, "relative_path", ""))
                # Data files are named by DCP inside the folder; anything else points elsewhere.
                if not relative or Path(relative).name != relative or relative in {".", ".."}:
                    raise ModelLoadError(f"{path}: data file {relative!r} is outside the checkpoint")
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            assert metadata.storage_meta is not None
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeFileSystemReader


@functools.cache
def _weights_only_planner_class() -> type[DefaultLoadPlanner]:
    import torch
    from torch.distributed.checkpoint import DefaultLoadPlanner, ReadItem

    class WeightsOnlyLoadPlanner(DefaultLoadPlanner):
        """DefaultLoadPlanner that unpickles non-tensor entries (optimizer settings) with weights_only=True."""

        def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
            # The parent would torch.load(weights_only=False) the stored bytes. Check them here
            # and hand it a re-serialisation of the checked value: only plain data left in it.
            checked = torch.load(value, weights_only=True)
            clean = io.BytesIO()
            torch.save(checked, clean)
            clean.seek(0)
            super().load_bytes(read_item, clean)

    return WeightsOnlyLoadPlanner
