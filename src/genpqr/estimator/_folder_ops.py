"""File-system steps of genpqr's transactional writes (``genpqr.estimator._manifest``): swapping two
folders in one step, flushing a rename to disk, and naming the file a failed write concerns."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import sys
from pathlib import Path

from ..messages import Mention, Message

__all__ = ["remove_leftover_staging", "exchange", "fsync_dir", "writing", "write_each", "umask", "is_leftover", "check_place", "named_target"]

_LEFTOVERS = (".partial", ".old", ".tmp")


def is_leftover(name: str) -> bool:
    """True for the hidden names of genpqr's own unfinished writes (``.NAME.XXXX.partial``,
    ``.old``, ``.tmp``, left by a killed run): never listed in a manifest, ignored by the checks."""
    return name.startswith(".") and name.endswith(_LEFTOVERS)


def check_place(target, inputs=(), flag: str | None = None) -> None:
    """Refuse, with a ``ValueError`` naming ``flag`` (default: the parameter ``target``), an output
    folder ``target`` that holds an input of the run (a link to one too), lies inside an input
    folder, is a file or a symlink, or is the working folder or above it (replacing it as a whole
    would pull it from under the process)."""
    named = named_target(flag)
    target = Path(target)
    resolved = target.resolve()
    for item in (i for i in inputs if i is not None):
        given = Path(item).absolute()
        if any(p == resolved or resolved in p.parents for p in {given.parent.resolve() / given.name, given.resolve()}):
            raise ValueError(Message(named, f" {target} holds an input of this run ({item}); write the outputs "
                                            "elsewhere"))
        if given.is_dir() and given.resolve() in resolved.parents:
            raise ValueError(Message(named, f" {target} lies inside the input folder {item}; write the outputs "
                                            "elsewhere"))
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ValueError(Message(named, f" {target} is {'a symlink' if target.is_symlink() else 'a file'}; expected "
                                        "a new or empty folder, or an earlier genpqr output folder"))
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ValueError(Message(named, f" {target} is the working folder{' or above it' if resolved != cwd else ''}; "
                                        "genpqr replaces its output folder as a whole: give the outputs a folder of "
                                        "their own"))


def named_target(flag: str | None):
    """How messages name an output folder: ``flag`` when given, else the parameter ``target``
    (which a front end names its own way)."""
    return Mention("target") if flag is None else flag


def umask() -> int:
    """The process's file-mode creation mask, read without changing it where the system allows
    (Linux ``/proc``). Temporary files and folders are created owner-only; genpqr gives its
    outputs the modes a plain ``open``/``mkdir`` would (``0o666 & ~umask``, ``0o777 & ~umask``)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status") as fh:
            return int(next(line for line in fh if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def exchange(a, b) -> bool:
    """Swap the paths ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``): a reader
    sees one or the other at each path, never neither. False where the system or the file system
    cannot (the caller then renames twice)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EPERM, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
        return False
    raise OSError(err, os.strerror(err), str(b))


def fsync_dir(path) -> None:
    """Flush the entries of the folder ``path`` (its renames) to disk, where the system allows."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def writing(path, target=None, staging=None):
    """Raise an ``OSError`` of the block (a full disk, a lost mount) again as one naming ``path``
    -- or the file it names, a path inside ``staging`` shown as inside ``target`` -- and saying
    that ``target`` is unchanged. An error already named passes through."""
    try:
        yield
    except OSError as exc:
        if getattr(exc, "genpqr_named", False):
            raise
        shown = str(path)
        if staging is not None and exc.filename and str(exc.filename).startswith(str(staging)):
            shown = str(exc.filename).replace(str(staging), str(target), 1)
        unchanged = f"; {target} is unchanged" if target is not None else ""
        named = OSError(exc.errno, f"cannot write {shown}: {exc.strerror or exc}{unchanged}")
        named.genpqr_named = True
        raise named from exc


def write_each(staging, target, writers: dict) -> dict:
    """Call ``writers[name](staging / name)`` for each file in order, an ``OSError`` raised as one
    naming ``target / name`` (:func:`writing`); returns ``{name: target / name}``."""
    staging, target = Path(staging), Path(target)
    for name, write in writers.items():
        with writing(target / name, target):
            write(staging / name)
    return {name: target / name for name in writers}


def remove_leftover_staging(target) -> list:
    """Remove the staging folders ``.NAME.PID-XXXX.partial`` beside ``target`` that killed runs
    (SIGTERM, SIGKILL, a power cut) left behind: those whose process is gone (a folder of a run
    still going is kept), and those of older versions, which carry no process id. Called after
    each successful write into ``target``; returns the folders removed."""
    target = Path(target)
    removed = []
    for path in target.parent.glob(f".{glob.escape(target.name)}.*.partial"):
        middle = path.name[len(target.name) + 2:]
        pid = middle.split("-", 1)[0]
        if pid.isdigit() and "-" in middle and _alive(int(pid)):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this one counts as gone: its own staging was moved)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True
