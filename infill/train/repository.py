"""A repository's Python files for fine-tuning (`infill-train finetune`): listed (git, or a walk
that honours .gitignore), filtered (vendored, generated, tiny or huge files out) and split into
files to train on and files held out (by a hash of the path, so the split is stable). The quality
benchmark measures a fine-tuned model on the same held-out files (`infill-bench --repo`)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from infill.errors import InputError
from infill.train.corpus import MAX_CHARS, MIN_CHARS, CorpusFile, ast_spans, looks_generated

VENDORED_DIRS = frozenset({
    "vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty", "external", "extern",
    "site-packages", "dist-packages", "node_modules", ".git", ".hg", ".venv", "venv", ".tox", ".nox",
    ".eggs", "build", "dist", "__pycache__",
})  # fmt: skip
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi", ".min.py")
HELDOUT_SHARE = 0.1


@dataclass
class RepoFiles:
    train: list[CorpusFile]
    heldout: list[CorpusFile]
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> relative paths


def git_files(root: Path) -> list[str] | None:
    """Files git tracks or would track under `root` (relative paths), or None outside a git work tree."""
    if shutil.which("git") is None:
        return None
    git = ["git", "-C", str(root)]
    try:
        inside = subprocess.run([*git, "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        command = [*git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        listed = subprocess.run(command, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted({p for p in listed.decode("utf-8", "replace").split("\0") if p})


class IgnoreRules:
    """The rules of the .gitignore files met on the way down (no git needed): glob patterns,
    `!` negation, a trailing `/` for directories only, a leading or inner `/` anchoring a pattern
    to its file's directory; the last matching rule wins."""

    def __init__(self) -> None:
        self.rules: list[tuple[str, str, bool, bool, bool]] = []  # base, pattern, negate, dirs, anchored

    def read(self, gitignore: Path, base: str) -> None:
        try:
            lines = gitignore.read_text("utf-8", errors="replace").splitlines()
        except OSError:
            return
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            line = line[1:] if negate else line
            dirs = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append((base, line.lstrip("/").removeprefix("**/"), negate, dirs, anchored))

    def ignored(self, relative: str, is_dir: bool) -> bool:
        result = False
        for base, pattern, negate, dirs, anchored in self.rules:
            if base and not relative.startswith(base + "/"):
                continue
            inner = relative[len(base) + 1 :] if base else relative
            if dirs and not is_dir:
                continue
            subject = inner if anchored else inner.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(subject, pattern):
                result = not negate
        return result


def walked_files(root: Path) -> list[str]:
    """Files under `root` (relative paths) that its .gitignore files do not exclude."""
    rules, found = IgnoreRules(), []
    for directory, dirs, files in os.walk(root):
        relative_dir = Path(directory).relative_to(root).as_posix()
        base = "" if relative_dir == "." else relative_dir
        if ".gitignore" in files:
            rules.read(Path(directory) / ".gitignore", base)
        prefix = f"{base}/" if base else ""
        dirs[:] = sorted(d for d in dirs if d not in VENDORED_DIRS and not rules.ignored(prefix + d, True))
        found += [prefix + f for f in sorted(files) if not rules.ignored(prefix + f, False)]
    return found


def drop_reason(relative: str) -> str | None:
    """Why a path is not the repository's own hand-written code, or None."""
    parts = relative.split("/")
    if any(p in VENDORED_DIRS or p.endswith((".egg-info", ".dist-info")) for p in parts[:-1]):
        return "vendored"
    if parts[-1].endswith(GENERATED_SUFFIXES):
        return "generated"
    return None


def is_heldout(relative: str, share: float) -> bool:
    """Whether a file is held out: a hash of its path, so the split never changes between runs."""
    value = int.from_bytes(hashlib.sha1(relative.encode()).digest()[:8], "big") / 2**64
    return value < share


def collect(root: Path, share: float = HELDOUT_SHARE, report=print) -> RepoFiles:
    """The repository's Python files, filtered and split; `report` is told what is skipped."""
    if not root.is_dir():
        raise InputError(f"{root} is not a directory")
    listed = git_files(root)
    paths = [p for p in (listed if listed is not None else walked_files(root)) if p.endswith(".py")]
    skipped: dict[str, list[str]] = {}
    kept: list[tuple[str, str]] = []
    for relative in paths:
        reason = drop_reason(relative)
        text = None
        if reason is None:
            try:
                text = (root / relative).read_bytes().decode("utf-8").replace("\r\n", "\n")
            except (OSError, UnicodeDecodeError) as error:
                reason = "unreadable"
                report(f"finetune: skipped {relative}: {type(error).__name__}: {error}")
        if reason is None and len(text) > MAX_CHARS:
            reason = "huge"
        elif reason is None and (len(text) < MIN_CHARS or looks_generated(text)):
            reason = "tiny" if len(text) < MIN_CHARS else "generated"
        if reason is not None:
            skipped.setdefault(reason, []).append(relative)
            continue
        kept.append((relative, text))
    if not kept:
        found = f"{len(paths)} Python files, none usable" if paths else "no Python files"
        raise InputError(f"{root}: {found} (need at least 2 of {MIN_CHARS} to {MAX_CHARS} characters)")
    if len(kept) < 2:
        raise InputError(f"{root}: one usable Python file; one is not enough to train on and hold out")
    flags = [is_heldout(relative, share) for relative, _ in kept]
    if not any(flags) or all(flags):  # a small repository: the file with the lowest hash is the odd one out
        first = min(range(len(kept)), key=lambda i: hashlib.sha1(kept[i][0].encode()).hexdigest())
        odd = not any(flags)
        flags = [(i == first) == odd for i in range(len(kept))]
    files = [CorpusFile(rel, str(root), "repository", "heldout" if h else "train", text, ast_spans(text))
             for (rel, text), h in zip(kept, flags)]  # fmt: skip
    return RepoFiles(
        train=[f for f in files if f.split == "train"],
        heldout=[f for f in files if f.split == "heldout"],
        skipped=skipped,
    )
