"""Models by name, from the local Hugging Face cache: infill never downloads.

`--model` and the server's `modelPath` take a folder, or the name a model is published under,
ORG/NAME (or ORG/NAME@REVISION: a branch, tag or commit), found in the cache that
`huggingface-cli download` (huggingface_hub) fills:

    $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub
        models--ORG--NAME/
            refs/main              the commit the branch "main" named when it was downloaded
            snapshots/<commit>/    the repository's files at that commit (links into blobs/)
            blobs/                 the files' contents

A folder that exists wins over a name. A name picks refs/<REVISION or main>, else (no such ref)
the only or newest snapshot. Torch-free: the language server resolves names while it answers
`initialize`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from infill.errors import ModelError

NAME = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w.-]+(?:/[\w.-]+)*))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
REPO_PREFIX = "models--"


@dataclass(frozen=True)
class CacheRoot:
    path: Path
    source: str  # what chose it: "HF_HUB_CACHE", "HF_HOME", ... or "the default"

    def describe(self) -> str:
        missing = "" if self.path.is_dir() else ", which does not exist"
        return f"the Hugging Face cache {self.path} (from {self.source}{missing})"


@dataclass(frozen=True)
class CachedRepo:
    name: str  # ORG/NAME
    folder: Path  # <cache>/models--ORG--NAME

    def snapshot(self, revision: str | None = None) -> Path:
        """The snapshot folder of `revision` (a ref such as a branch or tag, or a commit); without
        one, refs/main, else the only or newest snapshot. ModelError when there is none."""
        snapshots = self.folder / "snapshots"
        ref = self.folder / "refs" / (revision or "main")
        if ref.is_file():
            commit = ref.read_text(encoding="utf-8").strip()
            if not COMMIT.fullmatch(commit):
                raise ModelError(f"{ref} holds {commit[:60]!r}, not a commit hash")
            if not (snapshots / commit).is_dir():
                raise ModelError(
                    f"{ref} names commit {commit}, but {snapshots} has no such folder "
                    "(an interrupted download? download the model again)"
                )
            return snapshots / commit
        if revision is not None:
            if (snapshots / revision).is_dir():  # a commit
                return snapshots / revision
            refs = ", ".join(self.refs()) or "none"
            commits = ", ".join(p.name for p in self.snapshots()) or "none"
            raise ModelError(
                f"the cached {self.name} has no revision {revision!r} (refs: {refs}; snapshots: {commits})"
            )
        found = self.snapshots()
        if not found:
            raise ModelError(f"{self.folder} holds no snapshot (an interrupted download? download it again)")
        return max(found, key=lambda p: p.stat().st_mtime)

    def snapshots(self) -> list[Path]:
        folder = self.folder / "snapshots"
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def refs(self) -> list[str]:
        folder = self.folder / "refs"
        if not folder.is_dir():
            return []
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def cache_root() -> CacheRoot:
    """Where huggingface_hub keeps downloaded repositories, by the same environment variables."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return CacheRoot(Path(os.environ[variable]).expanduser(), variable)
    if os.environ.get("HF_HOME"):
        return CacheRoot(Path(os.environ["HF_HOME"]).expanduser() / "hub", "HF_HOME")
    if os.environ.get("XDG_CACHE_HOME"):
        xdg = Path(os.environ["XDG_CACHE_HOME"]).expanduser()
        return CacheRoot(xdg / "huggingface" / "hub", "XDG_CACHE_HOME")
    return CacheRoot(Path("~/.cache/huggingface/hub").expanduser(), "the default")


def parse_name(text: str) -> tuple[str, str | None] | None:
    """ORG/NAME[@REVISION] -> (ORG/NAME, REVISION or None); None when `text` is not such a name."""
    match = NAME.fullmatch(text)
    if match is None:
        return None
    revision = match["revision"]
    if revision is not None and any(part in (".", "..") for part in revision.split("/")):
        return None  # never a path out of refs/ or snapshots/
    return match["repo"], revision


def cached_repos(root: CacheRoot | None = None) -> list[CachedRepo]:
    """Every model repository in the cache, by name."""
    root = root or cache_root()
    if not root.path.is_dir():
        return []
    folders = sorted(p for p in root.path.iterdir() if p.is_dir() and p.name.startswith(REPO_PREFIX))
    return [CachedRepo(repo_name(p), p) for p in folders]


def repo_name(folder: Path) -> str:
    """models--ORG--NAME -> ORG/NAME."""
    return folder.name.removeprefix(REPO_PREFIX).replace("--", "/")


def model_name(directory: Path) -> str:
    """The name a model folder goes by: ORG/NAME when it is a snapshot of the cache
    (models--ORG--NAME/snapshots/<commit>), else the folder's own name (what
    `huggingface-cli download ORG/NAME --local-dir NAME` calls it)."""
    directory = directory.absolute()
    snapshots, repo = directory.parent, directory.parent.parent
    if snapshots.name == "snapshots" and repo.name.startswith(REPO_PREFIX):
        return repo_name(repo)
    return directory.name


def resolve_model(spec: str | Path | None) -> Path | None:
    """The model folder `spec` names: None (the shipped model) stays None; an existing folder is
    itself; ORG/NAME[@REVISION] is its snapshot in the Hugging Face cache. ModelError otherwise,
    saying where it looked: nothing is ever downloaded."""
    if spec is None or str(spec) == "":
        return None
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    name = parse_name(str(spec))
    if name is None:
        raise ModelError(f"no model folder at {path}")
    repo, revision = name
    root = cache_root()
    folder = root.path / (REPO_PREFIX + repo.replace("/", "--"))
    if not folder.is_dir():
        raise ModelError(
            f"{spec} is not a folder, and {root.describe()} has no {folder.name}. infill never downloads: "
            f"fetch the model on a machine with network access (`huggingface-cli download {repo}`, into "
            "this cache or a folder you copy here), or pass the model's folder; `infill models` lists "
            "the models the cache holds"
        )
    return CachedRepo(repo, folder).snapshot(revision)
