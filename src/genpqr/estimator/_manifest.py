r"""What genpqr writes is a transaction, and says that genpqr wrote it.

Files (``write_signed``, ``read_signed``)
    A saved model or result is one file: a first line ``GENPQR-SIGNED 1``, a second line of
    JSON (the payload's size and SHA-256, the genpqr version, what it holds, and an
    HMAC-SHA256 *signature* of that header with this user's signing key), then the payload
    (a pickle; ``joblib.load`` reads it, and the joblib pickles earlier versions wrote). It is written to a temporary name beside the target and renamed over it
    (a reader sees the old file or the new one, never half of one). ``read_signed`` reads
    the file once and checks size, hash and signature on those bytes *before* the payload is
    unpickled: unpickling runs code, so a file genpqr did not write under this key (handed over,
    downloaded, edited) is refused unless the caller says ``trusted=True``, and an empty,
    truncated or text file is an :class:`~genpqr.exceptions.IntegrityError` either way.

Folders (``output_folder``, ``verify_folder``)
    A command that writes a folder builds it in a hidden temporary folder beside the target,
    writes ``manifest.json`` last (every file's relative path, size and SHA-256; the genpqr
    version; the kind of folder; the command line; the signature) and renames it into place.
    An earlier genpqr folder at the target is replaced as a whole; a target holding anything
    genpqr did not write (the user's data, a config, a symlink) is refused before any work
    starts. Readers call ``verify_folder``, which names the first file that is missing,
    changed or unlisted in the manifest.

The signing key
    32 random bytes in ``$GENPQR_CONFIG_DIR/signing.key`` (default
    ``$XDG_CONFIG_HOME/genpqr`` or ``~/.config/genpqr``), created on first use, readable by its
    owner only. A signature proves that genpqr wrote the file under this key (this account, or
    whoever shares the key file); it says nothing about files from other machines, which need
    ``trusted=True`` (``--trust``). Where no key can be created (a read-only home), files are
    written unsigned and reading them needs ``trusted=True``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import secrets
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from ..exceptions import IntegrityError, UntrustedFileError
from ..messages import Mention, Message
from ._folder_ops import (check_place, exchange, fsync_dir, is_leftover, named_target, remove_leftover_staging, umask,
                         writing)

__all__ = ["MANIFEST", "MAGIC", "signing_key", "write_signed", "read_signed", "read_header", "output_folder",
           "verify_folder", "read_manifest", "manifest_trusted", "sha256_file", "atomic_write_bytes",
           "is_genpqr_folder", "file_matches", "check_target"]

#: The manifest of an output folder, written last.
MANIFEST = "manifest.json"
#: The first line of a signed file.
MAGIC = b"GENPQR-SIGNED 1\n"
_KEY_BYTES = 32
_CHUNK = 1 << 20


# ================================================================================== the key
def config_dir() -> Path:
    """``$GENPQR_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/genpqr``, else ``~/.config/genpqr``."""
    if os.environ.get("GENPQR_CONFIG_DIR"):
        return Path(os.environ["GENPQR_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "genpqr"


def signing_key(create: bool = True) -> bytes | None:
    """This user's signing key (created on first use when ``create``); None when there is none
    and it cannot be created."""
    path = config_dir() / "signing.key"
    with contextlib.suppress(OSError):
        key = path.read_bytes()
        if len(key) == _KEY_BYTES:
            return key
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it meanwhile
        return signing_key(create=False)
    except OSError:
        return None
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(_KEY_BYTES))
    return signing_key(create=False)


def _canonical(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _sign(body: dict) -> str | None:
    key = signing_key()
    return None if key is None else hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def _signature_ok(body: dict, signature) -> bool:
    key = signing_key(create=False)
    if key is None or not isinstance(signature, str):
        return False
    return hmac.compare_digest(hmac.new(key, _canonical(body), hashlib.sha256).hexdigest(), signature)


def _version() -> str:
    from .. import __version__

    return __version__


# ============================================================================ atomic writes
def sha256_file(path) -> str:
    with open(path, "rb") as fh:
        return _sha256(fh)


def _sha256(fh) -> str:
    """SHA-256 (hex) of what remains of the open binary file ``fh``, read in chunks."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: fh.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()


def atomic_write_bytes(path, chunks) -> None:
    """Write ``chunks`` (bytes or an iterable of bytes) to a temporary file beside ``path``,
    flush it to disk and rename it over ``path``. On any error the temporary file is removed
    and ``path`` is untouched. A symlink at ``path`` is replaced, its target never written."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # the mode a plain open() gives, not mkstemp's owner-only
            os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as fh:
            for chunk in [chunks] if isinstance(chunks, (bytes, bytearray, memoryview)) else chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ============================================================================ signed files
def write_signed(obj, path, *, holds: str) -> None:
    """Pickle ``obj`` (cloudpickle for user closures) into a signed file at ``path``
    (atomic). ``holds`` names what it is (e.g. ``"GenPQR"``), checked again on reading."""
    payload = _pickle_bytes(obj)
    body = {"format": 1, "genpqr": _version(), "holds": holds, "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest()}
    header = dict(body, signature=_sign(body))
    atomic_write_bytes(path, [MAGIC, _canonical(header), b"\n", payload])


def _pickle_bytes(obj) -> bytes:
    """The payload: a plain pickle (arrays in-band; ``joblib.load`` reads it as it reads its own
    format, without importing joblib here: it costs a tenth of a small fit)."""
    import pickle

    try:
        return pickle.dumps(obj, protocol=pickle.DEFAULT_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        buffer = io.BytesIO()
        cloudpickle.dump(obj, buffer)
        return buffer.getvalue()


def read_header(path) -> dict | None:
    """The signed file's header, or None when ``path`` is not a genpqr signed file."""
    with open(path, "rb") as fh:
        return _parse_header(fh.read(len(MAGIC) + (1 << 16)), path)[0]


def _parse_header(data: bytes, path) -> tuple[dict | None, int]:
    """``(header, payload offset)`` of a signed file's bytes (``data`` may be only its start);
    ``(None, 0)`` without the genpqr first line."""
    if not data.startswith(MAGIC):
        return None, 0
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise IntegrityError(f"{path}: the genpqr header is cut short; the file was truncated or edited")
    try:
        header = json.loads(data[len(MAGIC):end])
    except ValueError:
        raise IntegrityError(f"{path}: the genpqr header is damaged (not JSON); the file was cut or edited") from None
    if not isinstance(header, dict) or not {"size", "sha256", "holds"} <= header.keys():
        raise IntegrityError(f"{path}: the genpqr header is incomplete; the file was cut or edited")
    return header, end + 1


#: How a pickle (protocol 2 and later) or a joblib-compressed pickle begins (zlib, gzip, bz2,
#: xz, lzma, lz4): a file starting otherwise is not a model file at all (text, an empty file).
_PICKLE_STARTS = (b"\x80", b"\x78", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x5d\x00\x00", b"\x04\x22\x4d\x18")


def read_signed(path, *, holds: str, trusted: bool = False, sha256: str | None = None):
    """Unpickle a file written by ``write_signed``, after checking it. The file is read once;
    size, hash and signature are checked on those bytes, and only they are unpickled.

    ``trusted=True`` loads a file genpqr did not sign under this user's key (a plain joblib or
    pickle file, a file signed elsewhere): unpickling runs any code it holds. ``sha256`` is the
    whole file's hash as listed by an output folder's ``manifest.json`` whose signature verified
    (:func:`manifest_trusted`): a file with exactly that content counts as trusted.

    Raises
    ------
    FileNotFoundError
    IntegrityError
        Empty, truncated or edited (size or hash differ from the header), text rather than a
        pickle, or a trusted file that fails to unpickle. Nothing in it has run.
    UntrustedFileError
        Not signed under this user's key and not ``trusted``. Nothing in it has run.
    TypeError
        It holds something other than ``holds``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    data = memoryview(path.read_bytes())
    if not data:
        raise IntegrityError(f"{path} is empty (0 bytes); it is not a {holds} file saved by genpqr "
                             "(an interrupted copy?)")
    if sha256 is not None and hashlib.sha256(data).hexdigest() == sha256:
        trusted = True
    header, offset = _parse_header(bytes(data[:len(MAGIC) + (1 << 16)]), path)
    if header is None:
        if not bytes(data[:8]).startswith(_PICKLE_STARTS) and not trusted:
            start = bytes(data[:24]).decode("ascii", "replace").split("\n")[0]
            raise IntegrityError(f"{path} is not a {holds} file saved by genpqr: it has no genpqr header and is not "
                                 f"a pickle (it starts with {start!r})")
        if not trusted:
            raise UntrustedFileError(Message(
                f"{path} was not written by genpqr's save (no genpqr header), so genpqr cannot tell who wrote it; "
                "loading a pickle runs any code it holds. Load it only if you trust its source: ",
                Mention("trusted", True)))
        return _unpickle(path, data)
    payload = data[offset:]
    if len(payload) != header["size"]:
        raise IntegrityError(f"{path} is damaged: its payload has {len(payload)} bytes, its header says "
                             f"{header['size']} (a cut or interrupted copy?)")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise IntegrityError(f"{path} is damaged: its SHA-256 does not match its header (edited or corrupted)")
    body = {k: v for k, v in header.items() if k != "signature"}
    if not trusted and not _signature_ok(body, header.get("signature")):
        why = ("it was written where no signing key could be created" if header.get("signature") is None else
               "another machine or user wrote it, or it was edited")
        raise UntrustedFileError(Message(
            f"{path} was written by genpqr but not under this account's signing key ({config_dir() / 'signing.key'}): "
            f"{why}. Loading runs any code it holds; load it only if you trust its source: ", Mention("trusted", True)))
    if header["holds"] != holds:
        raise TypeError(f"{path} holds a {header['holds']}, not a {holds}")
    return _unpickle(path, payload)


def _unpickle(path, payload):
    """joblib.load of trusted bytes; a file of another genpqr's format (an object refusing its
    format, or a pickle naming a genpqr class or module that is gone) is a one-line
    :class:`~genpqr.exceptions.ModelFormatError` naming the file; any other failure an
    IntegrityError naming the file."""
    import joblib

    from ..exceptions import ModelFormatError

    try:
        return joblib.load(io.BytesIO(payload))
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path}: {exc}") from None
    except (AttributeError, ImportError) as exc:
        if "genpqr" not in str(exc):
            raise IntegrityError(_unreadable(path, exc)) from None
        raise ModelFormatError(f"{path} was saved by another version of genpqr (it names "
                               f"{' '.join(str(exc).split())[:120]}); refit it with this version (GenPQR(...).fit"
                               f"(data), or genpqr fit) and save it again") from None
    except Exception as exc:  # noqa: BLE001  (a damaged pickle fails in any way)
        raise IntegrityError(_unreadable(path, exc)) from None


def _unreadable(path, exc) -> str:
    text = " ".join(str(exc).split())[:200]
    return (f"{path} could not be read as a saved genpqr object ({type(exc).__name__}: {text}); it is damaged, is "
            "not a genpqr file, or needs modules this environment lacks")


# ================================================================================== folders
def read_manifest(folder) -> dict | None:
    """``manifest.json`` of ``folder`` as a dict, or None when there is none (or it is not JSON)."""
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def _listing(folder: Path) -> list[str]:
    """Every entry under ``folder`` (relative POSIX paths; symlinks, special files and empty
    folders -- as ``name/`` -- included), leaving out genpqr's leftovers (:func:`is_leftover`)
    and nested genpqr outputs (a subfolder with its own manifest, e.g. a fit's ``counterfactual/``)."""
    out = []
    for path in sorted(folder.iterdir()):
        if is_leftover(path.name):
            continue
        if path.is_dir() and not path.is_symlink():
            if read_manifest(path) is None:
                inner = [f"{path.name}/{name}" for name in _listing(path)]
                out += inner if inner or any(path.iterdir()) else [f"{path.name}/"]
        else:
            out.append(path.name)
    return out


def file_entry(path) -> dict:
    """``{"size", "sha256"}`` of the file at ``path``, flushed to disk on the way."""
    with open(path, "rb") as fh:
        sha256 = _sha256(fh)
        with contextlib.suppress(OSError):
            os.fsync(fh.fileno())
    return {"size": Path(path).stat().st_size, "sha256": sha256}


def file_matches(path, entry: dict) -> bool:
    """True when ``path`` is the file a manifest entry describes. While an update is under way
    (``genpqr.experiments._folder.update_folder``) the entry also names the ``next``
    version; either is accepted, and a version of size None (a file being added) accepts an
    absent file."""
    path, digest = Path(path), None
    for version in [entry] + ([entry["next"]] if isinstance(entry.get("next"), dict) else []):
        if version.get("size") is None:
            if not os.path.lexists(path):
                return True
        elif path.is_file() and not path.is_symlink() and path.stat().st_size == version["size"]:
            digest = digest or sha256_file(path)
            if digest == version.get("sha256"):
                return True
    return False


def verify_folder(folder, *, kind: str | None = None, require=()) -> dict:
    """Check that ``folder`` is a complete genpqr output: ``manifest.json`` present, every file
    it lists present with its size and SHA-256, nothing else in the folder (but genpqr's
    leftovers and nested genpqr outputs), the files in ``require`` listed and present, and (with
    ``kind``) the folder of that kind. Returns the manifest.

    Raises
    ------
    IntegrityError
        Naming the folder and the first file that is missing, changed or absent from the
        manifest: the folder is incomplete (a run was interrupted), mixed or was edited.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise IntegrityError(f"{folder}: no such folder")
    manifest = read_manifest(folder)
    if manifest is None:
        raise IntegrityError(f"{folder} has no valid {MANIFEST}: it was not written by genpqr, or the run that wrote "
                             "it did not finish; run the command again")
    if kind is not None and manifest.get("kind") != kind:
        raise IntegrityError(f"{folder} holds a genpqr {manifest.get('kind')!r} output, not a {kind!r} output")
    files = manifest["files"]
    for name in require:
        if name not in files:
            raise IntegrityError(f"{folder}: {name} is not in its {MANIFEST}: the folder is incomplete")
        if not (folder / name).is_file():
            raise IntegrityError(f"{folder}: {name} is missing (listed in {MANIFEST}); the folder is incomplete")
    for name, entry in files.items():
        if not file_matches(folder / name, entry):
            if not os.path.lexists(folder / name):
                raise IntegrityError(f"{folder}: {name} is missing (listed in {MANIFEST}); the folder is incomplete")
            raise IntegrityError(f"{folder}: {name} does not match {MANIFEST} (changed after genpqr wrote it, or "
                                 "from another run)")
    extra = [name for name in _listing(folder) if name != MANIFEST and name not in files]
    if extra:
        raise IntegrityError(f"{folder}: {extra[0]} is not in its {MANIFEST} (left by another run, or added after "
                             "genpqr wrote the folder); remove it or run the command again")
    return manifest


def manifest_trusted(manifest: dict) -> bool:
    """True when ``manifest`` carries a valid signature under this user's key."""
    body = {k: v for k, v in manifest.items() if k != "signature"}
    return _signature_ok(body, manifest.get("signature"))


def is_genpqr_folder(folder) -> bool:
    """True when ``folder`` holds a genpqr manifest and nothing but files it lists (some of them
    may be gone), genpqr's leftovers and nested genpqr outputs."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        return False
    return set(_listing(folder)) <= set(manifest["files"]) | {MANIFEST}


def check_target(target, *, inputs=(), flag: str | None = None, kind: str | None = None) -> None:
    """Refuse ``target`` unless it is absent, empty (but for genpqr's leftovers) or an earlier
    genpqr output (of ``kind``, when given) holding nothing but its manifest's files; refuse
    inputs that lie inside it and a target inside an input folder."""
    target = Path(target)
    check_place(target, inputs, flag)
    if not target.exists():
        return
    manifest = read_manifest(target)
    if manifest is None:
        foreign = [p.name for p in sorted(target.iterdir()) if not is_leftover(p.name)]
    else:
        if kind is not None and manifest.get("kind") != kind:
            raise ValueError(Message(named_target(flag), f" {target} holds a genpqr {manifest.get('kind')!r} output; "
                                     f"this command writes {kind!r} outputs and replaces only those. Choose a new or "
                                     "empty folder"))
        foreign = [name for name in _listing(target) if name != MANIFEST and name not in manifest["files"]]
    if foreign:
        raise ValueError(Message(named_target(flag), f" {target} holds files genpqr did not write "
                                 f"({', '.join(foreign[:5])}); genpqr replaces only its own earlier outputs. Choose a "
                                 "new or empty folder"))


@contextlib.contextmanager
def output_folder(target, *, kind: str, inputs=(), command=None, flag: str | None = None):
    """Build an output folder as a transaction.

    Yields a temporary folder beside ``target``; write every file into it (see
    ``write_each``). On success, ``manifest.json`` is written last and the folder takes the
    place of ``target`` in one step (an earlier genpqr output there is replaced as a whole). On
    any error the temporary folder is removed and ``target`` is untouched; an ``OSError`` (a
    full disk) is raised again naming the file and saying so. ``target`` is checked first
    (:func:`check_target`) and again at the swap.

    Parameters
    ----------
    target : path
    kind : str
        ``"fit"``, ``"counterfactual"``, ``"continuous-experiment"``, ``"demo"``...; only an
        earlier output of the same kind is replaced.
    inputs : paths
        The run's input files and folders, refused inside ``target``.
    command : list of str, optional
        The command line recorded (default ``sys.argv``).
    """
    target = Path(target)
    check_target(target, inputs=inputs, flag=flag, kind=kind)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}-", suffix=".partial", dir=target.parent))
    os.chmod(staging, 0o777 & ~umask())  # the mode a plain mkdir gives, not mkdtemp's owner-only
    try:
        with writing(target, target, staging):
            yield staging
        with writing(target / MANIFEST, target, staging):
            write_manifest(staging, kind=kind, command=command)
            _swap_into_place(staging, target, inputs, flag, kind)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    remove_leftover_staging(target)


def write_manifest(folder, *, kind: str, command=None) -> dict:
    """Write ``folder/manifest.json`` over every file in ``folder`` (each flushed to disk; atomic); returns it."""
    folder = Path(folder)
    files = {}
    for name in _listing(folder):
        path = folder / name
        if name == MANIFEST:
            continue
        if path.is_symlink() or not path.is_file():
            raise IntegrityError(f"{path}: outputs must be plain files (found a link, a folder or a special file)")
        files[name] = file_entry(path)
    return store_manifest(folder, files, kind=kind, command=command)


def store_manifest(folder, files: dict, *, kind: str, command=None) -> dict:
    """Sign and write (atomically) the manifest of ``folder`` listing ``files`` ({name: entry}); returns it."""
    body = {"format": 1, "genpqr": _version(), "kind": kind,
            "command": list(sys.argv if command is None else command),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "files": files}
    manifest = dict(body, signature=_sign(body))
    atomic_write_bytes(Path(folder) / MANIFEST, json.dumps(manifest, indent=1).encode())
    return manifest


def _swap_into_place(staging: Path, target: Path, inputs, flag, kind: str) -> None:
    """Put ``staging`` at ``target``: a rename, or over an earlier output an atomic exchange
    (Linux ``renameat2``; elsewhere two renames, the earlier output intact at ``.NAME.XXXX.old``
    in between)."""
    if not os.path.lexists(target):
        os.rename(staging, target)
    else:
        check_target(target, inputs=inputs, flag=flag, kind=kind)  # still ours (or empty) at the moment of the swap
        if exchange(staging, target):
            shutil.rmtree(staging, ignore_errors=True)  # it holds the earlier output now
        else:
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.rmdir(old)
            os.rename(target, old)
            os.rename(staging, target)
            shutil.rmtree(old, ignore_errors=True)
    fsync_dir(target.parent)  # the renames themselves to disk
