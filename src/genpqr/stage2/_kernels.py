r"""Transition kernels behind one small protocol, stored dense, sparse or as a model.

A kernel over ``S`` states and ``K`` actions is anything with

* ``n_states``, ``n_actions`` (int);
* ``expect(values)``: ``values`` (S,) or (S, ...) -> (S, K) or (S, K, ...),
  ``(P f)(s, a) = sum_{s'} P(s'|s,a) f(s')``;
* ``push(weights)``: ``weights`` (S, K) or (S, K, ...) -> (S,) or (S, ...),
  ``(P^T w)(s') = sum_{s,a} w(s, a) P(s'|s,a)``, the adjoint of ``expect``:
  ``<push(w), f> = <w, expect(f)>``;
* ``to_dense()``: the kernel as an (S, K, S) float array (a ``ValueError`` above
  ``DENSE_KERNEL_MAX_BYTES``).

Rows may sum to less than one: the missing mass is termination into an absorbing state of
value zero. ``TransitionKernel`` stores the kernel as an (S*K, S) matrix whose row
``s*K + a`` is ``P(. | s, a)``, a dense ndarray or a scipy CSR matrix (1e4 states x 100
actions with a few next states per pair take tens of MB sparse, 80 GB dense).
``KernelOperator`` wraps any other object with the protocol (a transition model that
never stores the matrix, e.g. a low-rank kernel). ``as_kernel`` turns any of these into
one of the two and validates it. Re-exported by :mod:`genpqr.stage2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..data._validation import as_float_array

__all__ = ["DENSE_KERNEL_MAX_BYTES", "ROW_SUM_TOL", "TransitionKernel", "KernelOperator", "as_kernel", "is_kernel_like"]

#: A given kernel's row whose sum is within this of 1 is float rounding (a kernel saved in float32
#: is off by about 1e-7): it is renormalized to sum to 1, not read as termination or refused.
ROW_SUM_TOL = 1e-6
#: Largest dense kernel (bytes of the float64 (S, K, S) array) that ``to_dense()`` builds
#: unless told otherwise: 2 GiB, e.g. S = 1,000 states x K = 268 actions.
DENSE_KERNEL_MAX_BYTES = 2 * 1024 ** 3
#: Largest S for which :meth:`KernelOperator.under` builds ``P_mu`` as a dense (S, S) array
#: (direct solves); above it ``P_mu`` is a matrix-free operator (Krylov solves).
_OPERATOR_DENSE_MAX_STATES = 2500
#: Memory for one block of columns when a kernel operator's ``P_mu`` is built densely.
_BLOCK_BYTES = 64 * 1024 ** 2
#: A transition model's row sums above ``1 + _SUM_ATOL`` are refused (below one is termination).
_SUM_ATOL = 1e-8
_PROTOCOL = ("n_states", "n_actions", "expect", "push")


def is_kernel_like(obj) -> bool:
    """Whether ``obj`` has the kernel protocol (``n_states``, ``n_actions``, ``expect``, ``push``)."""
    return all(hasattr(obj, name) for name in _PROTOCOL) and callable(obj.expect) and callable(obj.push)


def _dense_check(S: int, K: int, max_bytes, owner: str) -> None:
    limit = DENSE_KERNEL_MAX_BYTES if max_bytes is None else max_bytes
    need = 8 * S * K * S
    if need > limit:
        raise ValueError(
            f"{owner}: a dense (S, K, S) = ({S}, {K}, {S}) kernel needs {need / 1024 ** 3:.3g} GiB, above the "
            f"limit max_bytes={limit / 1024 ** 3:.3g} GiB; keep the kernel sparse (expect/push) or raise max_bytes")


def _values(values, S: int, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[0] != S:
        raise ValueError(f"{name} must have shape (S, ...) with S = {S} states, got {arr.shape}")
    return arr


def _weights(weights, S: int, K: int) -> np.ndarray:
    arr = np.asarray(weights, dtype=np.float64)
    if arr.ndim < 2 or arr.shape[:2] != (S, K):
        raise ValueError(f"weights must have shape (S, K, ...) = ({S}, {K}, ...), got {arr.shape}")
    return arr


@dataclass(frozen=True, eq=False)
class TransitionKernel:
    """Transition kernel ``P[s, a, s']`` stored as an ``(S*K, S)`` matrix (row ``s*K + a``).

    Attributes
    ----------
    matrix : ndarray or scipy.sparse.csr_matrix of shape (S*K, S)
    n_states, n_actions : int
    note : str
        What ``as_kernel`` changed in a given kernel (rows within :data:`ROW_SUM_TOL` of
        summing to 1 renormalized), or ``""``.
    """

    matrix: object
    n_states: int
    n_actions: int
    note: str = ""

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.matrix)

    def expect(self, values) -> np.ndarray:
        """``(P f)(s, a) = sum_{s'} P(s'|s,a) f(s', ...)`` for ``values`` (S,) or (S, ...);
        returns (S, K) or (S, K, ...)."""
        f = _values(values, self.n_states, "values")
        # a vector stays a vector: the matrix-vector product of earlier releases, bit for bit
        out = np.asarray(self.matrix @ (f if f.ndim == 1 else f.reshape(self.n_states, -1)))
        return out.reshape((self.n_states, self.n_actions) + f.shape[1:])

    def push(self, weights) -> np.ndarray:
        """``sum_{s,a} w(s, a, ...) P(.|s,a)`` for ``weights`` (S, K) or (S, K, ...); returns
        (S,) or (S, ...). The adjoint of :meth:`expect`."""
        w = _weights(weights, self.n_states, self.n_actions)
        flat = w.reshape(self.n_states * self.n_actions, -1)
        out = np.asarray(self.matrix.T @ (flat[:, 0] if w.ndim == 2 else flat))
        return out.reshape((self.n_states,) + w.shape[2:])

    def under(self, mu: np.ndarray):
        """The state kernel ``P_mu`` (S, S) for action weights ``mu`` (S, K): sparse
        when ``P`` is sparse (only rows with ``mu > 0`` are touched), dense otherwise."""
        S, K = self.n_states, self.n_actions
        weights = np.asarray(mu, dtype=np.float64).reshape(-1)
        if not self.is_sparse:
            return np.einsum("sa,sat->st", mu, np.asarray(self.matrix).reshape(S, K, S))
        rows = np.flatnonzero(weights)
        selector = sp.csr_matrix((weights[rows], (rows // K, rows)), shape=(S, S * K))
        return (selector @ self.matrix).tocsr()

    def to_dense(self, max_bytes: int | None = None) -> np.ndarray:
        """``P`` as a dense (S, K, S) array; ``ValueError`` when it needs more than
        ``max_bytes`` (default ``DENSE_KERNEL_MAX_BYTES``)."""
        S, K = self.n_states, self.n_actions
        if self.is_sparse:
            _dense_check(S, K, max_bytes, "TransitionKernel.to_dense")
            return self.matrix.toarray().reshape(S, K, S)
        return np.asarray(self.matrix).reshape(S, K, S)

    def dense(self) -> np.ndarray:
        """``P`` as a dense (S, K, S) array (small problems only; see :meth:`to_dense`)."""
        return self.to_dense()


class KernelOperator:
    """A kernel given only through the protocol (``expect``/``push``), never stored as a matrix.

    ``P_mu`` (:meth:`under`) is a dense (S, S) array for S <= 2,500 states (the model's own
    ``under(mu)`` where it has one, else built from ``expect`` in blocks of columns) and a matrix-free ``scipy.sparse.linalg.LinearOperator``
    above, which the Krylov solvers of ``genpqr.stage2._linear_bellman.solve_linear_bellman`` accept.
    Code that needs the entries (``matrix``, ``to_dense``) builds them densely, with a
    ``ValueError`` above ``DENSE_KERNEL_MAX_BYTES``.

    Parameters
    ----------
    model : object with ``n_states``, ``n_actions``, ``expect``, ``push`` (and optionally ``to_dense``)
    """

    is_sparse = False

    def __init__(self, model):
        self.model = model
        self.n_states, self.n_actions = int(model.n_states), int(model.n_actions)

    def expect(self, values) -> np.ndarray:
        """The model's ``expect``: (S,) or (S, ...) -> (S, K) or (S, K, ...), shape checked."""
        f = _values(values, self.n_states, "values")
        out = np.asarray(self.model.expect(f), dtype=np.float64)
        want = (self.n_states, self.n_actions) + f.shape[1:]
        if out.shape != want:
            raise ValueError(f"the transition model's expect returned shape {out.shape}, expected {want}")
        return out

    def push(self, weights) -> np.ndarray:
        """The model's ``push``: (S, K) or (S, K, ...) -> (S,) or (S, ...), shape checked."""
        w = _weights(weights, self.n_states, self.n_actions)
        out = np.asarray(self.model.push(w), dtype=np.float64)
        want = (self.n_states,) + w.shape[2:]
        if out.shape != want:
            raise ValueError(f"the transition model's push returned shape {out.shape}, expected {want}")
        return out

    def under(self, mu: np.ndarray):
        """``P_mu`` (S, S): dense for small S, a ``LinearOperator`` above."""
        S, K = self.n_states, self.n_actions
        mu = np.asarray(mu, dtype=np.float64)
        own = getattr(self.model, "under", None)
        if callable(own) and S <= _OPERATOR_DENSE_MAX_STATES:  # the model's own (a low-rank one's: a product)
            out = np.asarray(own(mu), dtype=np.float64)
            if out.shape != (S, S):
                raise ValueError(f"the transition model's under returned shape {out.shape}, expected {(S, S)}")
            return out
        block = max(1, min(S, _BLOCK_BYTES // (8 * S * K)))  # columns per product: memory S * K * block

        def matmat(X):
            X = np.asarray(X, dtype=np.float64).reshape(S, -1)
            out = np.empty(X.shape)
            for start in range(0, X.shape[1], block):
                out[:, start:start + block] = np.einsum("sa,sac->sc", mu, self.expect(X[:, start:start + block]))
            return out

        def rmatmat(Y):
            Y = np.asarray(Y, dtype=np.float64).reshape(S, -1)
            return np.column_stack([self.push(mu[:, :, None] * Y[:, None, start:start + block])
                                    for start in range(0, Y.shape[1], block)])

        if S > _OPERATOR_DENSE_MAX_STATES:
            return spla.LinearOperator((S, S), matvec=matmat, rmatvec=rmatmat, matmat=matmat, rmatmat=rmatmat,
                                       dtype=np.float64)
        return matmat(np.eye(S))

    def to_dense(self, max_bytes: int | None = None) -> np.ndarray:
        """``P`` as a dense (S, K, S) array (the model's own ``to_dense`` when it has one)."""
        S, K = self.n_states, self.n_actions
        _dense_check(S, K, max_bytes, f"{type(self.model).__name__}.to_dense")
        own = getattr(self.model, "to_dense", None)
        dense = np.asarray(own() if callable(own) else self.expect(np.eye(S)), dtype=np.float64)
        if dense.shape != (S, K, S):
            raise ValueError(f"the transition model's to_dense returned shape {dense.shape}, expected {(S, K, S)}")
        return dense

    def dense(self) -> np.ndarray:
        """``P`` as a dense (S, K, S) array (see :meth:`to_dense`)."""
        return self.to_dense()

    @property
    def matrix(self) -> np.ndarray:
        """``P`` as a dense (S*K, S) array (built on each access; see :meth:`to_dense`)."""
        return self.to_dense().reshape(self.n_states * self.n_actions, self.n_states)

    def __repr__(self) -> str:
        return f"KernelOperator({type(self.model).__name__}, n_states={self.n_states}, n_actions={self.n_actions})"


def _checked(matrix, K: int, S: int) -> TransitionKernel:
    """The kernel of a validated (S*K, S) matrix: rows summing to more than ``1 + ROW_SUM_TOL`` are
    refused; rows within :data:`ROW_SUM_TOL` of 1 (float rounding, e.g. a kernel saved in float32)
    are renormalized to sum to 1, which the kernel's ``note`` says."""
    sums = np.asarray(matrix.sum(axis=1)).ravel()
    if sums.size and sums.max() > 1.0 + ROW_SUM_TOL:
        row = int(np.argmax(sums))
        raise ValueError(
            f"P's rows must sum to at most 1 (a missing mass is termination; within {ROW_SUM_TOL:g} of 1 is float "
            f"rounding and renormalized), but P[{row // K}, {row % K}, :] sums to {sums[row]:.10g}"
        )
    deviation = np.abs(sums - 1.0)
    fix = (deviation > 1e-12) & (deviation <= ROW_SUM_TOL)
    if not fix.any():
        return TransitionKernel(matrix, int(S), int(K))
    scale = np.where(fix, 1.0 / np.where(fix, sums, 1.0), 1.0)
    matrix = sp.csr_matrix(sp.diags(scale) @ matrix) if sp.issparse(matrix) else matrix * scale[:, None]
    note = (f"{int(fix.sum())} row(s) of the given kernel summed to within {ROW_SUM_TOL:g} of 1 (largest deviation "
            f"{float(deviation[fix].max()):.3g}: float rounding) and were renormalized to sum to 1")
    return TransitionKernel(matrix, int(S), int(K), note)


def _operator(model, n_actions) -> KernelOperator:
    """Wrap and check a protocol object: sizes, and row sums ``expect(1)`` in [0, 1]."""
    op = KernelOperator(model)
    if op.n_states < 1 or op.n_actions < 1:
        raise ValueError(f"the transition model must have n_states, n_actions >= 1, got {op.n_states}, {op.n_actions}")
    if n_actions is not None and n_actions != op.n_actions:
        raise ValueError(f"P has {op.n_actions} actions but {n_actions} were expected")
    sums = op.expect(np.ones(op.n_states))
    if not np.all(np.isfinite(sums)):
        raise ValueError("P must be finite, but the transition model's expect(1) holds NaN/inf")
    if sums.min() < -_SUM_ATOL:
        raise ValueError(f"P must be non-negative, but a row of the transition model sums to {sums.min():.3g}")
    if sums.max() > 1.0 + _SUM_ATOL:
        row = int(np.argmax(sums.ravel()))
        raise ValueError(f"P's rows must sum to at most 1 (a missing mass is termination), but the transition model's "
                         f"row P[{row // op.n_actions}, {row % op.n_actions}, :] sums to {sums.ravel()[row]:.10g}")
    return op


def as_kernel(P, n_actions: int | None = None, *, atol: float = 1e-10):
    """Validate a transition kernel.

    Parameters
    ----------
    P : ndarray of shape (S, K, S); ndarray or scipy sparse matrix of shape (S*K, S) (row
        ``s*K + a``); a ``TransitionKernel`` or ``KernelOperator``; an object
        holding one as ``.kernel`` (a :class:`~genpqr.stage2.TabularMDP`); or any object with
        the kernel protocol (``n_states``, ``n_actions``, ``expect``, ``push``), wrapped in a
        ``KernelOperator`` after a check of its row sums ``expect(1)``.
    n_actions : int, optional
        Required for the (S*K, S) form.

    Returns
    -------
    TransitionKernel or KernelOperator
        Entries are checked non-negative (to ``atol``) and rows to sum to at most 1 (to 1e-8);
        a protocol object's entries are not seen, only its row sums.
    """
    if isinstance(P, (TransitionKernel, KernelOperator)):
        return P
    if is_kernel_like(P):
        return _operator(P, n_actions)
    inner = getattr(P, "kernel", None)
    if isinstance(inner, (TransitionKernel, KernelOperator)):
        return inner
    if sp.issparse(P):
        return _sparse_kernel(P, n_actions, atol)
    arr = as_float_array(P, "P")
    if arr.ndim == 3:
        S, K, S2 = arr.shape
        if S2 != S:
            raise ValueError(f"P must have shape (S, K, S), got {arr.shape}")
        if n_actions is not None and n_actions != K:
            raise ValueError(f"P has {K} actions but {n_actions} were expected")
    elif arr.ndim == 2 and n_actions is not None and arr.shape[0] == arr.shape[1] * n_actions:
        S, K = arr.shape[1], n_actions
    else:
        raise ValueError(f"P must have shape (S, K, S) (or (S*K, S) with n_actions), got {arr.shape}")
    if arr.min() < -atol:
        raise ValueError(f"P must be non-negative, got a minimum of {arr.min():.3g}")
    return _checked(arr.reshape(S * K, S), K, S)


def _sparse_kernel(P, n_actions, atol) -> TransitionKernel:
    if n_actions is None:
        raise ValueError("a sparse P must have shape (S*K, S) and needs n_actions")
    matrix = sp.csr_matrix(P, dtype=np.float64)
    S = matrix.shape[1]
    if matrix.shape[0] != S * n_actions:
        raise ValueError(f"P must have shape (S*K, S) = ({S * n_actions}, {S}), got {matrix.shape}")
    data = matrix.data
    if not np.all(np.isfinite(data)):
        raise ValueError("P must be finite, but holds NaN/inf")
    if data.size and data.min() < -atol:
        raise ValueError(f"P must be non-negative, got a minimum of {data.min():.3g}")
    return _checked(matrix, n_actions, S)
