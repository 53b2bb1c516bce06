"""Datasets named by a hub id (`hub:owner/name`), pinned to the commit their rows were read from.

A hub dataset is resolved to a commit and a local folder holding that commit's files, then
one split is read with `datasets.load_dataset` from that folder and written as JSONL, which
the ordinary pipeline (validation, format detection, scan, manifest) registers like any file.
The manifest's notes record the hub id, split, subset, the revision asked for and the commit
it resolved to, as a base model records its hub commit.

Hub access sits behind `DatasetHubResolver` so tests and air-gapped installs resolve ids to
local git clones (`LocalDatasetMirror`, or the `TUNEDECK_DATASET_MIRROR` folder); nothing
here reaches the network unless neither is given. No dataset code ever runs: a repository
with a loading script is refused.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tunedeck.core.dataset_vocabulary import HUB_ID_PATTERN, HUB_PART_PATTERN, HUB_REVISION_PATTERN
from tunedeck.core.errors import HubDatasetError
from tunedeck.core.settings import setting_variable

HUB_PREFIX = "hub:"
MIRROR_ENV = setting_variable("dataset_mirror")
"""A folder of git clones, `<folder>/<owner>/<name>`, that hub dataset ids resolve to instead of the hub."""

DATA_FILE_PATTERNS = (
    "*.jsonl", "*.json", "*.csv", "*.tsv", "*.txt", "*.parquet", "*.arrow",
    "*.jsonl.gz", "*.json.gz", "*.csv.gz", "*.txt.gz", "*.md", "*.yaml",
)
"""What is fetched from a hub dataset repository: data files and the README that may define its subsets."""


def is_hub_id(text: str) -> bool:
    """Whether a dataset argument names a hub dataset (`hub:owner/name`) rather than a file."""
    return text.startswith(HUB_PREFIX)


@dataclass(frozen=True)
class HubDatasetRef:
    """A hub dataset split as the user named it."""

    repo_id: str
    split: str
    subset: str | None = None
    revision: str | None = None

    @classmethod
    def parse(cls, text: str, split: str, subset: str | None = None, revision: str | None = None) -> HubDatasetRef:
        """Check `hub:owner/name`, the split, subset and revision; HubDatasetError naming the bad one."""
        repo_id = text.removeprefix(HUB_PREFIX)
        if not HUB_ID_PATTERN.match(repo_id) or ".." in repo_id:
            raise HubDatasetError(f"{text}: not a hub dataset id (expected hub:owner/name)")
        if not HUB_PART_PATTERN.match(split):
            raise HubDatasetError(f"--split {split!r}: not a split name (expected a name such as train)")
        if subset is not None and (not HUB_PART_PATTERN.match(subset) or ".." in subset):
            raise HubDatasetError(f"--subset {subset!r}: not a subset name (expected a name such as en)")
        if revision is not None and (not HUB_REVISION_PATTERN.match(revision) or ".." in revision):
            raise HubDatasetError(f"--revision {revision!r}: not a revision (expected a branch, tag or commit)")
        return cls(repo_id, split, subset, revision)

    @property
    def source(self) -> str:
        """The id as the user wrote it: `hub:owner/name`."""
        return HUB_PREFIX + self.repo_id


class DatasetHubResolver(Protocol):
    """Turns a hub dataset id and revision into a commit hash and a local folder holding that commit's files."""

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        """The commit `revision` (default: the main branch) points at, and a folder with its files."""
        ...


class LocalDatasetMirror:
    """Resolves `owner/name` to the git clone `<folder>/owner/name`, pinned to its checked-out commit."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        """The clone's HEAD commit; a revision must name that same commit, and the clone must be clean."""
        base = self.folder.resolve()
        repo = (base / repo_id).resolve()
        if not repo.is_relative_to(base) or not repo.is_dir():
            raise HubDatasetError(f"hub:{repo_id}: unknown dataset (no folder {repo_id} in the mirror {self.folder})")
        head = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
        # A plain folder inside some other clone would otherwise report that clone's commit.
        top = _git(repo, "rev-parse", "--show-toplevel")
        if head is None or top is None or Path(top).resolve() != repo:
            raise HubDatasetError(f"hub:{repo_id}: the mirror folder {repo} is not a git clone with a commit")
        if revision is not None:
            wanted = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{revision}^{{commit}}")
            if wanted is None:
                raise HubDatasetError(f"hub:{repo_id}: unknown revision {revision!r}")
            if wanted != head:
                raise HubDatasetError(
                    f"hub:{repo_id}: revision {revision!r} is {wanted[:12]}, but the mirror has {head[:12]} "
                    "checked out (check out that revision in the mirror)"
                )
        # Uncommitted edits would make the recorded commit name rows it did not hold.
        if _git(repo, "status", "--porcelain", "--untracked-files=all"):
            raise HubDatasetError(
                f"hub:{repo_id}: the mirror clone {repo} has uncommitted changes; commit or discard them"
            )
        return head, repo


class HuggingFaceDatasetResolver:
    """Resolves through the huggingface_hub client (network, or its cache when offline)."""

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        """Pin `revision` to a commit, refuse loading scripts, then fetch that commit's data files."""
        from huggingface_hub import HfApi, snapshot_download

        try:
            info = HfApi().dataset_info(repo_id, revision=revision)
            commit = info.sha
            if not commit:
                raise HubDatasetError(f"hub:{repo_id}: the hub returned no commit for revision {revision or 'main'}")
            scripts = [s.rfilename for s in info.siblings or [] if s.rfilename.endswith(".py")]
            if scripts:
                raise HubDatasetError(_script_refusal(repo_id, scripts))
            folder = snapshot_download(
                repo_id, repo_type="dataset", revision=commit, allow_patterns=list(DATA_FILE_PATTERNS)
            )
        except HubDatasetError:
            raise
        except Exception as error:  # the client raises many kinds; all mean "cannot resolve"
            raise HubDatasetError(
                f"hub:{repo_id}@{revision or 'main'}: cannot resolve on the hub: {_first_line(error)}"
            ) from error
        return commit, Path(folder)


def default_resolver(mirror: Path | None) -> DatasetHubResolver:
    """The local mirror `mirror` (the `TUNEDECK_DATASET_MIRROR` setting) when given, else the hub itself."""
    return LocalDatasetMirror(mirror) if mirror else HuggingFaceDatasetResolver()


@dataclass(frozen=True)
class HubSplit:
    """One split of a hub dataset written to a local JSONL file, with what pins it."""

    ref: HubDatasetRef
    commit: str
    path: Path
    rows: int

    def notes(self) -> dict[str, Any]:
        """The manifest notes recording where the rows came from."""
        return {
            "source": self.ref.source,
            "hub": {
                "id": self.ref.repo_id,
                "split": self.ref.split,
                "subset": self.ref.subset,
                "revision": self.ref.revision,
                "commit": self.commit,
            },
        }


def fetch_split(ref: HubDatasetRef, work_dir: Path, resolver: DatasetHubResolver | None = None) -> HubSplit:
    """Resolve `ref`, read its split with `datasets` (no remote code) and write the rows to `work_dir`/<split>.jsonl.

    `work_dir` should be private scratch space inside the registry's folder; the caller removes it.
    """
    commit, folder = (resolver or HuggingFaceDatasetResolver()).resolve(ref.repo_id, ref.revision)
    scripts = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.py") if ".git" not in p.parts)
    if scripts:
        raise HubDatasetError(_script_refusal(ref.repo_id, scripts))
    out = work_dir / f"{ref.split}.jsonl"
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for number, row in enumerate(_read_split(ref, folder, work_dir), start=1):
            try:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            except (TypeError, ValueError) as error:
                raise HubDatasetError(
                    f"{ref.source} split {ref.split} row {number}: a value is not text, a number or a list "
                    f"({_first_line(error)}); images, audio and binary columns are not supported"
                ) from None
            count += 1
    return HubSplit(ref, commit, out, count)


def _read_split(ref: HubDatasetRef, folder: Path, work_dir: Path) -> Iterator[dict[str, Any]]:
    import datasets

    datasets.disable_progress_bars()
    options: dict[str, Any] = {}
    if ref.subset is not None:
        names = _config_names(folder)
        if ref.subset in names:
            options["name"] = ref.subset
        elif (folder / ref.subset).is_dir():
            # A repository without declared subsets keeps each in its own folder.
            options["data_dir"] = ref.subset
        else:
            folders = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
            known = sorted({*names, *folders} - {"default"})
            raise HubDatasetError(
                f"{ref.source}: unknown subset {ref.subset!r} (expected one of: {', '.join(known) or 'none'})"
            )
    try:
        # trust_remote_code=False: a dataset's own code never runs, whatever the library version.
        loaded = datasets.load_dataset(
            str(folder),
            split=ref.split,
            cache_dir=str(work_dir / "cache"),
            trust_remote_code=False,
            **options,
        )
    except Exception as error:  # the library raises many kinds; all mean "cannot read this split"
        raise HubDatasetError(f"{ref.source}: cannot read split {ref.split!r}: {_first_line(error)}") from None
    yield from loaded


def _config_names(folder: Path) -> list[str]:
    import datasets

    try:
        return list(datasets.get_dataset_config_names(str(folder)))
    except Exception:  # a repository without data files: reading it reports that error
        return []


def _git(repo: Path, *args: str) -> str | None:
    """The stripped output of a git command in `repo`, or None when it fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _script_refusal(repo_id: str, scripts: list[str]) -> str:
    return (
        f"hub:{repo_id}: the repository has a loading script ({', '.join(scripts[:3])}); "
        "dataset code is never run (expected data files such as JSONL or Parquet)"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def scratch_dir(root: Path) -> Path:
    """A private scratch folder under the registry's `.staging`, for a split being fetched."""
    staging = root / ".staging"
    staging.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(tempfile.mkdtemp(prefix="hub.", dir=staging))
