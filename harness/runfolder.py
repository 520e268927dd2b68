"""The run folder (``--out``): the files the harness parent writes, at fixed names, never through a link.

A run folder holds ``solution.json`` (and ``baseline.json``), ``traces.jsonl`` and ``report.json``, all
written by the parent; workers build in scratch folders of their own elsewhere (harness/sandbox.py), so
nothing a candidate can write is in it. A name already present as a symlink (or anything that is not a
regular file) is replaced, not followed: files are written to a fresh temporary name and renamed over
it, and appends open with ``O_NOFOLLOW``. Reading back for ``--resume`` refuses a symlink.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .schema import SchemaError


def prepare(out_dir: Path) -> Path:
    """Create the run folder (and its parents); refuse a path that exists and is not a folder."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SchemaError(f"{out_dir}: the run folder exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def write_text(out_dir: Path, name: str, text: str) -> Path:
    """Write ``name`` in the run folder atomically; whatever was there under that name (a symlink
    included) is replaced, and nothing it pointed at is touched."""
    _check_name(name)
    out_dir = Path(out_dir)
    tmp = out_dir / f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _replace_entry(out_dir / name)
        os.replace(tmp, out_dir / name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return out_dir / name


def append_line(out_dir: Path, name: str, line: str) -> None:
    """Append one line and fsync: the trace file grows as each workload finishes."""
    _check_name(name)
    fd = os.open(Path(out_dir) / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line if line.endswith("\n") else line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_text(out_dir: Path, name: str) -> str | None:
    """A file of a run folder being resumed; None when absent. A symlink or a non-regular file there
    is refused: the parent reads only what it wrote."""
    _check_name(name)
    path = Path(out_dir) / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise SchemaError(f"{path}: not a regular file (a symlink?); refusing to follow it")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        return f.read()


def remove(out_dir: Path, name: str) -> None:
    """Remove ``name`` (the entry itself: a symlink is unlinked, never its target)."""
    _check_name(name)
    _replace_entry(Path(out_dir) / name)
    try:
        os.unlink(Path(out_dir) / name)
    except FileNotFoundError:
        pass


def _replace_entry(path: Path) -> None:
    """A folder squatting on a file's name cannot be renamed over: it is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise SchemaError(f"{path}: a folder where the harness writes a file")


def _check_name(name: str) -> None:
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
