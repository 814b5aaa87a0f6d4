"""Checks of ``genpqr`` settings that need no data and no config: a Dask scheduler address and
an output folder that can be written."""

from __future__ import annotations

from pathlib import Path

__all__ = ["check_dask_scheduler", "check_output_folder"]


def check_dask_scheduler(address) -> None:
    """``address`` is None, ``local:N`` (N >= 1 worker processes) or a scheduler address."""
    if address is None:
        return
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"--dask-scheduler must be a scheduler address (tcp://host:8786) or local:N, got {address!r}")
    if address.startswith("local"):
        count = address.partition(":")[2]
        if not (count.isdigit() and int(count) >= 1):
            raise ValueError(f"--dask-scheduler local:N needs a positive number of worker processes N, got "
                             f"{address!r} (e.g. local:2)")


def check_output_folder(path, flag: str) -> None:
    """``path`` is (or can be created as) a writable folder; ``ValueError`` naming ``flag`` if not."""
    import os

    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {str(path)!r} is a file, not a folder; give a folder to write the outputs to")
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {str(path)!r} cannot be written ({str(existing)!r} is not a writable folder)")
    import tempfile

    try:  # os.access trusts permission bits (always true for root); a real file is the test
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {str(path)!r} cannot be written ({str(existing)!r}: {exc.strerror or exc})") from None
