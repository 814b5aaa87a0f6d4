"""Transition kernels from files: ``.npy`` (dense, (S, K, S) or (S*K, S)) and ``.npz`` (a scipy
sparse (S*K, S) matrix), checked against the data's actions (:func:`load_kernel`). Named by a
user as ``transition_model`` (``genpqr fit --transition FILE.npy``) or as the changed kernel of
a counterfactual.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["load_kernel", "SPARSE_FILE_BYTES"]

#: ``.npy`` kernel files larger than this are read memory-mapped and kept as CSR when sparse
#: (:func:`load_kernel`): 256 MiB, e.g. S = 1,000 states x K = 33 actions dense.
SPARSE_FILE_BYTES = 256 * 1024 ** 2
_BLOCK_BYTES = 64 * 1024 ** 2


def load_kernel(path: str, n_actions: int, what: str = "transition kernel", n_states: int | None = None):
    """The kernel file: shape (S, K, S) or (S*K, S) with K = ``n_actions`` (the data's actions)
    and, when given, S = ``n_states``. Errors name ``what`` (e.g. "transition kernel") and the file.

    A ``.npz`` file holds a scipy sparse matrix (``scipy.sparse.save_npz``) of shape (S*K, S),
    row ``s*K + a``, and is kept sparse. A ``.npy`` file above :data:`SPARSE_FILE_BYTES` is read
    memory-mapped, block by block, into a CSR matrix when at most a third of its entries are
    non-zero (a kernel with a few next states per pair); smaller or fuller files stay dense."""
    kernel = _read_npz(path, what) if str(path).endswith(".npz") else _read_npy(path, what)
    K = n_actions
    shape = tuple(kernel.shape)
    ok = ((kernel.ndim == 3 and shape[1] == K and shape[0] == shape[2] > 0)
          or (kernel.ndim == 2 and shape[1] > 0 and shape[0] == shape[1] * K))
    if not ok:
        S = shape[-1] if kernel.ndim else "S"
        raise ValueError(f"the {what} {path!r} must have shape (S, K, S) = ({S}, {K}, {S}) or (S*K, S) = "
                         f"({S}*{K}, {S}) for S states and the data's K = {K} actions (in sorted label order), got "
                         f"{shape}")
    if n_states is not None and shape[-1] != n_states:
        raise ValueError(f"the {what} {path!r} has {shape[-1]} states (shape {shape}), but the fit has {n_states}")
    return _sparse_rows(kernel) if isinstance(kernel, np.memmap) else kernel


def _sparse_rows(kernel: np.memmap):
    """A memory-mapped (S, K, S) or (S*K, S) kernel as CSR (S*K, S), read in blocks of rows; the
    array itself (read into memory) when more than a third of its entries are non-zero."""
    S = kernel.shape[-1]
    rows = kernel.reshape(-1, S)
    block = max(1, _BLOCK_BYTES // (8 * S))
    parts, nnz = [], 0
    for start in range(0, rows.shape[0], block):
        parts.append(sp.csr_matrix(np.asarray(rows[start:start + block], dtype=np.float64)))
        nnz += parts[-1].nnz
        if 3 * nnz > rows.size:
            return np.array(kernel)  # a copy in memory, the file closed
    return sp.vstack(parts, format="csr")


def _read_npz(path: str, what: str):
    """A scipy sparse matrix from a ``.npz`` file written by ``scipy.sparse.save_npz``."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    try:
        kernel = sp.load_npz(path)
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f"cannot read the {what} {path!r}: {' '.join(str(exc).split())}; write a sparse (S*K, S) "
                         f"matrix with scipy.sparse.save_npz (or a dense array with numpy.save, .npy)") from None
    if not np.issubdtype(kernel.dtype, np.number):
        raise ValueError(f"the {what} {path!r} must hold numbers, got dtype {kernel.dtype}")
    return kernel.tocsr()


def _read_npy(path: str, what: str) -> np.ndarray:
    """A numeric array from a ``.npy`` file; ``ValueError`` naming ``what`` and the file otherwise."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{what} file {path!r} is a folder; expected a .npy file written by numpy.save")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic != b"\x93NUMPY":
        raise ValueError(f"cannot read the {what} {path!r}: it is not a NumPy .npy file (no .npy header); write the "
                         f"array with numpy.save")
    try:
        big = Path(path).stat().st_size > SPARSE_FILE_BYTES
        kernel = np.load(path, allow_pickle=False, mmap_mode="r" if big else None)
    except (ValueError, OSError) as exc:
        why = ("it holds Python objects, not numbers" if "pickle" in str(exc) or "Python objects" in str(exc)
               else " ".join(str(exc).split()))
        raise ValueError(f"cannot read the {what} {path!r}: {why}; write a numeric array with numpy.save") from None
    if not np.issubdtype(kernel.dtype, np.number):
        raise ValueError(f"the {what} {path!r} must hold numbers, got dtype {kernel.dtype}")
    return kernel
