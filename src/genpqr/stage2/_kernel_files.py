"""Transition kernels from files: ``.npy`` (dense, (S, K, S) or (S*K, S)) and ``.npz`` (a scipy
sparse (S*K, S) matrix), checked against the data's actions (``load_kernel``). Named by a
user as ``transition_model`` (``genpqr fit --transition FILE.npy``) or as the changed kernel of
a counterfactual.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..messages import Mention, Message

__all__ = ["load_kernel", "check_kernel_against_moves", "SPARSE_FILE_BYTES"]

#: ``.npy`` kernel files larger than this are read memory-mapped and kept as CSR when sparse
#: (``load_kernel``): 256 MiB, e.g. S = 1,000 states x K = 33 actions dense.
SPARSE_FILE_BYTES = 256 * 1024 ** 2
_BLOCK_BYTES = 64 * 1024 ** 2


def load_kernel(path: str, n_actions: int, what: str = "transition kernel", n_states: int | None = None,
                param: str = "transition_model"):
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
    kernel = _sparse_rows(kernel) if isinstance(kernel, np.memmap) else kernel
    _check_kernel_values(kernel, K, path, what, param)
    return kernel


def _row_sum_tolerance(dtype, n_states: int) -> float:
    """How far from 1 a row of ``n_states`` probabilities stored as ``dtype`` may sum by rounding:
    the stage-2 tolerance (``genpqr.stage2._kernels.ROW_SUM_TOL``, rows within it are renormalized),
    or more for a coarse dtype with many states (``n_states`` roundings of its epsilon)."""
    from ._kernels import ROW_SUM_TOL

    return max(ROW_SUM_TOL, n_states * float(np.finfo(dtype).eps))


def _check_kernel_values(kernel, K: int, path, what: str, param: str) -> None:
    """A kernel holds probabilities: floats (not integers or booleans: counts or a 0/1 pattern),
    no NaN or infinity, non-negative, rows summing to 1 within the dtype's rounding
    (:func:`_row_sum_tolerance`). Each refusal names the file, its flag and the first bad cell
    ``P[s, a, s']``; ``param`` is the parameter that named the file (a front end names it its way)."""
    data = kernel.data if sp.issparse(kernel) else np.asarray(kernel)
    where = Message(f"the {what} {str(path)!r} (", Mention(param), ")")
    if data.dtype.kind in "biu":
        raise ValueError(Message(where, f" holds {'booleans' if data.dtype.kind == 'b' else 'integers'} (dtype {data.dtype}); a "
                         f"kernel holds probabilities P[s, a, s'] as floats, each row summing to 1: divide counts by "
                         f"their row sums and save the float array"))
    S = kernel.shape[-1]
    dense = None if sp.issparse(kernel) else np.asarray(kernel).reshape(-1, S)

    def cell(mask_rows, mask_cols):
        row, col = int(mask_rows), int(mask_cols)
        return f"P[{row // K}, {row % K}, {col}]"

    for test, say in ((lambda v: ~np.isfinite(v), "is not a number (NaN or infinite)"),
                      (lambda v: v < 0, "is negative")):
        if sp.issparse(kernel):
            bad = np.flatnonzero(test(kernel.data))
            if bad.size:
                coo = kernel.tocoo()
                hit = np.flatnonzero(test(coo.data))[0]
                raise ValueError(Message(where, f": {cell(coo.row[hit], coo.col[hit])} = {coo.data[hit]:g} {say} "
                                                f"({bad.size} such entries); a kernel holds probabilities in [0, 1]"))
        else:
            bad = test(dense)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ValueError(Message(where, f": {cell(r, c)} = {dense[r, c]:g} {say} ({int(bad.sum())} such "
                                                f"entries); a kernel holds probabilities in [0, 1]"))
    sums = np.asarray(kernel.sum(axis=1)).ravel() if sp.issparse(kernel) else dense.sum(axis=1, dtype=np.float64)
    tol = _row_sum_tolerance(data.dtype, S)
    off = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if off.size:
        row = int(off[0])
        raise ValueError(Message(where, f": P[{row // K}, {row % K}, :] sums to {sums[row]:.10g}, not 1 (within {tol:.2g} for "
                         f"{data.dtype}; {off.size} of {sums.size} rows are off); each row of a kernel is the "
                         f"distribution of the next state, summing to 1 (the end of an episode is the data's ",
                                 Mention("terminated"), " flags, not missing mass)"))


def check_kernel_against_moves(kernel, K: int, states, actions, next_states, path, param: str = "transition_model",
                               what: str = "transition kernel"):
    """The observed moves ``(s, a, s')`` a given kernel deems impossible: ``None`` when it gives each a
    positive probability, else a message naming the file, the flag, the share of moves with
    probability zero and the first few such cells ``P[s, a, s']`` with their move counts.
    ``states``, ``actions``, ``next_states``: integer arrays of the observed moves."""
    S = kernel.shape[-1]
    s, a, t = (np.asarray(x, dtype=np.int64).ravel() for x in (states, actions, next_states))
    if s.size == 0:
        return None
    rows = s * K + a
    if sp.issparse(kernel):
        p = np.asarray(kernel.tocsr()[rows, t]).ravel()
    else:
        p = np.asarray(kernel).reshape(-1, S)[rows, t]
    zero = p <= 0
    if not zero.any():
        return None
    cells, counts = np.unique(np.c_[s[zero], a[zero], t[zero]], axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:3]
    first = ", ".join(f"P[{c[0]}, {c[1]}, {c[2]}] ({n} move(s))" for c, n in zip(cells[order], counts[order]))
    return Message(f"the {what} {str(path)!r} (", Mention(param), f") gives probability zero to {zero.mean():.1%} of the observed moves "
            f"({int(zero.sum())} of {zero.size}, {len(cells)} cell(s); e.g. {first}): the data contradict it, so the "
            f"rewards computed through it (rewards.csv, and parameters.csv of a structural fit) are in doubt; check "
            f"the file's state and action order (states numbered as the fit numbers them, actions in sorted "
            f"label order)")


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
    if not (np.issubdtype(kernel.dtype, np.number) or kernel.dtype == bool):
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
    if not (np.issubdtype(kernel.dtype, np.number) or kernel.dtype == bool):
        raise ValueError(f"the {what} {path!r} must hold numbers, got dtype {kernel.dtype}")
    return kernel
