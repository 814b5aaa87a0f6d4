"""The results folder of ``genpqr experiment``, updated in place with its manifest true at every instant.

A sweep is resumable -- rows are added to ``results.csv`` as tasks finish and a rerun skips the
finished ones -- so its folder cannot be built aside and swapped in as a whole, as the other
commands' outputs are (``genpqr.estimator._manifest.output_folder``). Instead every change goes
through ``update_folder``: each file is written to a temporary name and renamed, and the
manifest lists each changing file's current and next versions while the change is under way,
so a kill at any instant leaves a folder that ``genpqr.estimator._manifest.verify_folder`` accepts.
``open_results_folder`` checks a folder before a run, before any task starts.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from ..estimator._folder_ops import writing
from ..estimator._manifest import (MANIFEST, atomic_write_bytes, check_target, file_matches, read_manifest,
                                  store_manifest, verify_folder)

__all__ = ["KIND", "update_folder", "open_results_folder"]

KIND = "experiment"


def update_folder(folder, contents: dict, *, kind: str = KIND, command=None) -> dict:
    """Write ``contents`` ({name: bytes}) into ``folder`` keeping its manifest true: first the
    manifest lists each changed file's current and ``next`` versions (both accepted by
    ``genpqr.estimator._manifest.file_matches``), then each file is written atomically, then the
    manifest lists the new versions only. Returns the manifest. Empty ``contents`` settles a
    change a kill left under way (each entry: the version on disk). An ``OSError`` (a full
    disk) is raised as one naming the file."""
    folder = Path(folder)
    current = _settled(folder)
    new = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in contents.items()}
    with writing(folder / MANIFEST, folder):
        if contents:
            pending = {name: {**current.get(name, {"size": None, "sha256": None}), "next": entry}
                       for name, entry in new.items()}
            store_manifest(folder, {**current, **pending}, kind=kind, command=command)
        for name, data in contents.items():
            with writing(folder / name, folder):
                atomic_write_bytes(folder / name, data)
        return store_manifest(folder, {**current, **new}, kind=kind, command=command)


def _settled(folder: Path) -> dict:
    """The manifest's entries, each change under way resolved to the version on disk."""
    files = {}
    for name, entry in (read_manifest(folder) or {"files": {}})["files"].items():
        version = entry["next"] if isinstance(entry.get("next"), dict) and file_matches(folder / name, entry["next"]) \
            else entry
        if version.get("size") is not None:
            files[name] = {"size": version["size"], "sha256": version["sha256"]}
    return files


def open_results_folder(out, results_file: str = "results.csv") -> None:
    """Check ``out`` before a run: absent, empty, or an earlier genpqr experiment folder whose
    files match its manifest (nothing else in it). A trailing partial row of ``results_file``
    (left by a genpqr that appended rows in place, or a copy cut short) is dropped first, and
    converted line ends restored, when the rows are then the manifest's. A change a kill left under way is settled.

    Raises
    ------
    ValueError
        Naming ``--out`` and the foreign files, or (:class:`~genpqr.exceptions.IntegrityError`)
        the file that does not match the manifest.
    """
    out = Path(out)
    check_target(out, flag="--out", kind=KIND)
    manifest = read_manifest(out)
    if manifest is None:
        return
    _restore_rows(out / results_file, manifest["files"].get(results_file))
    verify_folder(out, kind=KIND)
    update_folder(out, {})


def _restore_rows(path: Path, entry: dict | None) -> None:
    """Rewrite ``path`` as genpqr writes it (``csv``, ``\\r\\n`` line ends) without a trailing
    partial row, when its complete rows are then a version the manifest lists (the same rows,
    their line ends converted or a partial row appended by a killed writer)."""
    if entry is None or not path.is_file() or file_matches(path, entry):
        return
    data = path.read_bytes()
    buffer = io.StringIO()
    csv.writer(buffer).writerows(csv.reader(io.StringIO(data[: data.rfind(b"\n") + 1].decode("utf-8"), newline="")))
    rows = buffer.getvalue().encode("utf-8")
    digest = hashlib.sha256(rows).hexdigest()
    versions = [entry] + ([entry["next"]] if isinstance(entry.get("next"), dict) else [])
    if any(v.get("size") == len(rows) and v.get("sha256") == digest for v in versions):
        atomic_write_bytes(path, rows)
