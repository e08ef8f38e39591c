"""Checkpoint storage through ``pyarrow.fs``: a local path or any URI Ray Train takes.

WHY: on a real cluster the checkpoints live on shared storage (an NFS mount, or an
object store such as ``s3://bucket/lyra``), and the scheduler must find a job's newest
checkpoint there after a restart, from the head node, with no Ray Train ``Result`` in
hand. ``pyarrow.fs`` is what Ray Train itself uses, so every URI a ``RunConfig``'s
``storage_path`` accepts works here too (``file://`` included, which the tests use).
"""

from __future__ import annotations

import json
import os
from typing import Any

STATE_FILE = "lyra_state.json"
LAST_REPORTED_FILE = "lyra_last_reported.json"
"""In a run directory: which checkpoint the job's loop reported last (warm workers)."""


def filesystem(path: str | os.PathLike[str]) -> tuple[Any, str]:
    """(pyarrow filesystem, path within it) for a local path or a URI."""
    import pyarrow.fs as pafs

    p = os.fspath(path)
    if "://" in p:
        fs, inner = pafs.FileSystem.from_uri(p)
        return fs, str(inner)
    return pafs.LocalFileSystem(), os.path.abspath(p)


def join(base: str | os.PathLike[str], name: str) -> str:
    """``base/name`` for a local path or a URI (``os.path.join`` mangles neither, but a
    URI's separator is always ``/``)."""
    b = os.fspath(base)
    return f"{b.rstrip('/')}/{name}" if "://" in b else os.path.join(b, name)


def read_step(path: str | os.PathLike[str], fs: Any = None) -> int | None:
    """The step a checkpoint directory of ours holds, or None (not ours, unreadable).

    ``fs``: the filesystem ``path`` is in (then ``path`` is within it); else ``path``
    is a local path or a URI."""
    if fs is None:
        fs, inner = filesystem(path)
    else:
        inner = os.fspath(path)
    try:
        with fs.open_input_stream(f"{inner.rstrip('/')}/{STATE_FILE}") as f:
            return int(json.loads(f.read())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def newest_checkpoint(run_dir: str | os.PathLike[str]) -> tuple[str, int] | None:
    """(the directory, its step) of the checkpoint with the most steps under a run
    directory, named as ``run_dir`` is (a path stays a path, a URI a URI)."""
    import pyarrow.fs as pafs

    fs, inner = filesystem(run_dir)
    try:
        infos = fs.get_file_info(pafs.FileSelector(inner, allow_not_found=True))
    except (OSError, ValueError):
        return None
    best: tuple[str, int] | None = None
    for info in infos:
        if info.type != pafs.FileType.Directory:
            continue
        step = read_step(info.path, fs)
        if step is not None and (best is None or step > best[1]):
            best = (join(run_dir, info.base_name), step)
    return best


def persist_dir(local_dir: str | os.PathLike[str], dest: str) -> str:
    """Copy a local checkpoint directory to ``dest`` (a path or a URI), our step marker
    (:data:`STATE_FILE`) last; returns ``dest``.

    WHY the marker last: :func:`newest_checkpoint` trusts a directory once its marker
    reads, so a copy cut short (a node lost mid-write) must not look complete. Ray
    Train's own upload copies in no particular order."""
    fs, inner = filesystem(dest)
    root = os.fspath(local_dir)
    files: list[str] = []
    for base, _dirs, names in os.walk(root):
        files += [os.path.relpath(os.path.join(base, n), root) for n in names]
    files.sort(key=lambda rel: rel == STATE_FILE)
    fs.create_dir(inner, recursive=True)
    for rel in files:
        target = f"{inner.rstrip('/')}/{rel.replace(os.sep, '/')}"
        parent = target.rsplit("/", 1)[0]
        if parent != inner.rstrip("/"):
            fs.create_dir(parent, recursive=True)
        with open(os.path.join(root, rel), "rb") as src, fs.open_output_stream(target) as out:
            while chunk := src.read(8 << 20):
                out.write(chunk)
    return dest


def write_last_reported(run_dir: str | os.PathLike[str], dest: str, writer: int = 0) -> None:
    """Record ``dest`` as the checkpoint a job's loop reported last (:data:`LAST_REPORTED_FILE`).

    WHY: Ray Train hands a new run of the same name the checkpoint reported last
    (``ray.train.get_checkpoint()``; its checkpoint manager keeps that in a snapshot file
    in the run directory), whatever its contents, so a loop that restores its own
    checkpoints finds them. Warm workers keep that rule across their generations,
    across a restarted gang too: the record lives beside the checkpoints. Written whole
    to a side file and moved into place (``writer``: the rank, so two ranks never share
    the side file)."""
    fs, inner = filesystem(run_dir)
    target = f"{inner.rstrip('/')}/{LAST_REPORTED_FILE}"
    side = f"{target}.{writer}.tmp"
    with fs.open_output_stream(side) as out:
        out.write(json.dumps({"path": dest}).encode())
    fs.move(side, target)


def last_reported(run_dir: str | os.PathLike[str]) -> str | None:
    """The checkpoint :func:`write_last_reported` recorded for ``run_dir``, named as it
    was written (a path or a URI); None if none, unreadable, or no longer there."""
    import pyarrow.fs as pafs

    fs, inner = filesystem(run_dir)
    try:
        with fs.open_input_stream(f"{inner.rstrip('/')}/{LAST_REPORTED_FILE}") as f:
            path = json.loads(f.read())["path"]
        if not isinstance(path, str):
            return None
        pfs, pinner = filesystem(path)
        if pfs.get_file_info(pinner).type != pafs.FileType.Directory:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path
