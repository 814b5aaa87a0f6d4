r"""Quadratic functions ``f(x) = x' H x + h' x + h0`` and their Gaussian expectations.

The linear-quadratic-Gaussian benchmark (``genpqr.envs._lqg``) stays inside this
class: rewards, soft values, log-policies, shaping potentials and normalized rewards are all
quadratics, and every integral the theory needs is an expectation of a quadratic under an
affine-Gaussian change of variables, which ``Quadratic.push`` gives in closed form:

    E[f(F y + f0 + e)] = y' (F'HF) y + (F'(2 H f0 + h))' y + f0'H f0 + h'f0 + h0 + tr(H C),

for ``e ~ N(0, C)``. Linear equations of the form ``c - gamma E[c(A y + b + e)] = t`` in an
unknown quadratic ``c`` are solved exactly in coefficient space by ``solve_stein``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data._validation import as_float_array

__all__ = ["Quadratic", "solve_stein"]


@dataclass(frozen=True, eq=False)
class Quadratic:
    """``f(x) = x' H x + h' x + h0`` on ``R^p`` (``H`` stored symmetric).

    Parameters
    ----------
    H : ndarray of shape (p, p)
    h : ndarray of shape (p,)
    h0 : float

    Notes
    -----
    A Quadratic is callable on an ``(n, p)`` array (or ``(n,)`` when ``p = 1``) and returns
    ``(n,)``; so it can serve as a state function ``g(s)``.
    """

    H: np.ndarray
    h: np.ndarray
    h0: float = 0.0

    def __post_init__(self):
        H = np.atleast_2d(np.asarray(self.H, dtype=np.float64))
        h = np.atleast_1d(np.asarray(self.h, dtype=np.float64))
        if H.shape != (h.size, h.size):
            raise ValueError(f"Quadratic: H must have shape ({h.size}, {h.size}) to match h, got {H.shape}")
        object.__setattr__(self, "H", 0.5 * (H + H.T))
        object.__setattr__(self, "h", h)
        object.__setattr__(self, "h0", float(self.h0))

    # ------------------------------------------------------------------ construction
    @classmethod
    def zero(cls, p: int) -> "Quadratic":
        return cls(np.zeros((p, p)), np.zeros(p), 0.0)

    @classmethod
    def constant(cls, value: float, p: int) -> "Quadratic":
        return cls(np.zeros((p, p)), np.zeros(p), float(value))

    @property
    def dim(self) -> int:
        return int(self.h.size)

    # ------------------------------------------------------------------ evaluation
    def __call__(self, x) -> np.ndarray:
        x = as_float_array(x, "x", ndim=2, allow_1d_as_column=True)
        if x.shape[1] != self.dim:
            raise ValueError(f"x must have {self.dim} column(s) for this quadratic, got {x.shape[1]}")
        return np.einsum("ni,ij,nj->n", x, self.H, x) + x @ self.h + self.h0

    # ------------------------------------------------------------------ algebra
    def __add__(self, other):
        if isinstance(other, Quadratic):
            _same_dim(self, other)
            return Quadratic(self.H + other.H, self.h + other.h, self.h0 + other.h0)
        return Quadratic(self.H, self.h, self.h0 + float(other))

    __radd__ = __add__

    def __neg__(self):
        return Quadratic(-self.H, -self.h, -self.h0)

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, scalar):
        scalar = float(scalar)
        return Quadratic(scalar * self.H, scalar * self.h, scalar * self.h0)

    __rmul__ = __mul__

    def push(self, F, f0=None, cov=None) -> "Quadratic":
        r"""``y -> E[f(F y + f0 + e)]`` with ``e ~ N(0, cov)``: a quadratic in ``y``.

        Parameters
        ----------
        F : ndarray of shape (p, q)
        f0 : ndarray of shape (p,), optional (default 0)
        cov : ndarray of shape (p, p), optional (default 0: no noise)
        """
        F = np.atleast_2d(np.asarray(F, dtype=np.float64))
        p = self.dim
        if F.shape[0] != p:
            raise ValueError(f"F must have {p} rows to feed this quadratic, got shape {F.shape}")
        f0 = np.zeros(p) if f0 is None else np.atleast_1d(np.asarray(f0, dtype=np.float64))
        trace = 0.0 if cov is None else float(np.sum(self.H * np.atleast_2d(cov)))
        H, h = self.H, self.h
        return Quadratic(F.T @ H @ F, F.T @ (2.0 * H @ f0 + h), f0 @ H @ f0 + h @ f0 + self.h0 + trace)

    def embed(self, index, p: int) -> "Quadratic":
        """The same function of the coordinates ``index`` of a ``p``-vector (e.g. a state
        function seen as a function of ``z = [s, a]``)."""
        index = np.asarray(index, dtype=np.int64)
        F = np.zeros((self.dim, p))
        F[np.arange(self.dim), index] = 1.0
        return self.push(F)

    # ------------------------------------------------------------------ coefficients
    def to_vector(self) -> np.ndarray:
        return np.concatenate([self.H.ravel(), self.h, [self.h0]])

    @classmethod
    def from_vector(cls, v, p: int) -> "Quadratic":
        v = np.asarray(v, dtype=np.float64)
        return cls(v[: p * p].reshape(p, p), v[p * p: p * p + p], float(v[-1]))

    def max_abs_difference(self, other: "Quadratic") -> float:
        """Largest coefficient difference (a norm on quadratics)."""
        _same_dim(self, other)
        return float(np.max(np.abs(self.to_vector() - other.to_vector())))

    def __repr__(self):
        return f"Quadratic(H={self.H.tolist()}, h={self.h.tolist()}, h0={self.h0:.6g})"


def _same_dim(a: Quadratic, b: Quadratic):
    if a.dim != b.dim:
        raise ValueError(f"quadratics live on different spaces (dimensions {a.dim} and {b.dim})")


def solve_stein(target: Quadratic, A, b, cov, gamma: float) -> Quadratic:
    r"""The quadratic ``c`` with ``c(y) - gamma E[c(A y + b + e)] = target(y)``, ``e ~ N(0, cov)``.

    The map ``c -> E[c(A y + b + e)]`` is linear in the coefficients of ``c``; the equation is
    solved by one dense linear solve in the ``p^2 + p + 1`` coefficients. It has a unique
    solution when ``gamma * rho(A)^2 < 1`` and ``gamma * rho(A) < 1`` (``rho``: spectral radius),
    the condition for the discounted sums to converge on quadratics; otherwise ValueError.
    """
    A = np.atleast_2d(np.asarray(A, dtype=np.float64))
    p = target.dim
    rho = float(np.max(np.abs(np.linalg.eigvals(A)))) if A.size else 0.0
    if gamma * max(rho, rho * rho) >= 1.0:
        raise ValueError(
            f"the discounted expectation does not converge on quadratics: gamma * rho(A)^2 = {gamma * rho * rho:.4g} "
            f"(rho(A) = {rho:.4g}); the closed-loop state matrix under mu must satisfy sqrt(gamma) rho < 1"
        )
    size = p * p + p + 1
    M = np.empty((size, size))
    for k in range(size):
        basis = np.zeros(size)
        basis[k] = 1.0
        pushed = Quadratic.from_vector(basis, p).push(A, b, cov)  # linear in the coefficients
        M[:, k] = pushed.to_vector()
    coef = np.linalg.solve(np.eye(size) - gamma * M, target.to_vector())
    return Quadratic.from_vector(coef, p)
