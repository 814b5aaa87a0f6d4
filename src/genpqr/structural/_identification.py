r"""Which structural parameters the choices identify, and which combinations of the others.

At a maximum of the likelihood the information matrix (the OPG ``J``) is singular exactly
when some direction ``v`` of the parameters changes no choice probability: two collinear
features, a feature equal on every action at each state. Moving ``theta`` along ``v`` leaves
the likelihood flat, so where an optimizer stops along it is arbitrary (NPL and NFXP stop at
different points on the same data) and the inverse of ``J`` is not defined (or, nearly
singular, enormous). :func:`identification` reads ``J``:

- the **null space** ``N`` (p, m): the eigenvectors of ``J`` with eigenvalue at most
  ``rtol`` times the largest;
- parameter ``j`` is **identified** when ``e_j`` is orthogonal to it (``||N_j|| <= 1e-3``); the
  others are not, and are reported without a number;
- the **identified combinations** ``c' theta`` of the parameters that are not identified: the
  ``c`` supported on them and orthogonal to ``N`` (e.g. ``bonus + bonus2`` for two equal
  features), each scaled so that its largest coefficient is 1. Their estimates do not depend
  on where the optimizer stopped, and their variance is ``c' J^+ c`` with ``J^+`` the
  pseudo-inverse (``generalized_inverse``), which is also the covariance of the identified
  parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IDENTIFICATION_RTOL", "IdentifiedCombination", "Identification", "identification", "generalized_inverse",
           "identified_basis"]

#: An eigenvalue of the information matrix at most this times the largest is zero (not identified).
IDENTIFICATION_RTOL = 1e-10


@dataclass(frozen=True)
class IdentifiedCombination:
    """A linear combination ``sum_j coefficients[j] theta_j`` that the choices identify.

    Attributes
    ----------
    coefficients : dict name -> float
    estimate, std_error : float
        ``c' theta`` and ``sqrt(c' cov c)`` (NaN without a covariance).
    """

    coefficients: dict
    estimate: float
    std_error: float

    def describe(self) -> str:
        """``"bonus + bonus2"``, ``"a - 0.5 b"``."""
        text = ""
        for name, c in self.coefficients.items():
            sign = "-" if c < 0 else "+"
            size = "" if np.isclose(abs(c), 1.0, rtol=0, atol=1e-9) else f"{abs(c):.4g} "
            text += (f"{'-' if c < 0 else ''}{size}{name}" if not text else f" {sign} {size}{name}")
        return text


@dataclass(frozen=True)
class Identification:
    """What the information matrix says about the parameters (see the module docstring).

    Attributes
    ----------
    identified : ndarray (p,) of bool
    null_space : ndarray (p, m)
        Orthonormal directions that change no choice probability (m = 0: all identified).
    combinations : tuple of IdentifiedCombination
    """

    identified: np.ndarray
    null_space: np.ndarray
    combinations: tuple = ()

    @property
    def all_identified(self) -> bool:
        return bool(np.all(self.identified))


def identified_basis(gram, *, rtol: float = IDENTIFICATION_RTOL) -> np.ndarray | None:
    """An orthonormal basis (p, r) of the directions a positive semi-definite ``gram`` (a Gram
    matrix of scores, an information matrix) does not call flat -- its eigenvectors with
    eigenvalue above ``rtol`` times the largest -- or None when every direction is kept (or the
    matrix is not finite: no reduction). An estimator stepping on this span cannot run off along
    a direction that changes no likelihood (exactly collinear features, a feature constant over
    every state and action): there its solve is singular, and a step ran off to ``1e15``,
    cancelling every digit of the identified combinations."""
    gram = np.asarray(gram, dtype=np.float64)
    if gram.size == 0 or not np.all(np.isfinite(gram)):
        return None
    vals, vecs = np.linalg.eigh(gram)
    keep = vals > rtol * max(float(vals[-1]), 1e-300)
    return None if keep.all() else vecs[:, keep]


def generalized_inverse(matrix, null_space) -> np.ndarray:
    """The inverse of a symmetric ``matrix`` on the complement of ``null_space`` (p, m), zero on
    it: the covariance of the identified parameters and combinations."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if not np.all(np.isfinite(matrix)):
        return np.full(matrix.shape, np.nan)
    vals, vecs = np.linalg.eigh(matrix)
    keep = np.ones(vals.size, dtype=bool)
    if null_space.shape[1]:
        keep[np.argsort(vals)[:null_space.shape[1]]] = False  # the m smallest: the null space
    return (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T


def identification(opg, theta, names, cov=None, *, rtol: float = IDENTIFICATION_RTOL) -> Identification:
    """The identified parameters and combinations of a fit whose information matrix is ``opg``.

    Parameters
    ----------
    opg : ndarray (p, p)
        The information matrix at the estimate (a sum of outer products of the scores).
    theta : ndarray (p,)
    names : list of str
    cov : ndarray (p, p), optional
        The covariance for the combinations' standard errors (default
        ``generalized_inverse`` of ``opg``; NaN gives NaN standard errors).
    rtol : float
        Eigenvalues at most ``rtol`` times the largest count as zero.
    """
    opg = np.asarray(opg, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    p = theta.size
    if p == 0 or not np.all(np.isfinite(opg)):
        return Identification(np.ones(p, dtype=bool), np.zeros((p, 0)))
    vals, vecs = np.linalg.eigh(opg)
    null = vecs[:, vals <= rtol * max(vals[-1], 1e-300)]
    identified = np.linalg.norm(null, axis=1) <= 1e-3
    if identified.all():
        return Identification(identified, null)
    cov = generalized_inverse(opg, null) if cov is None else np.asarray(cov, dtype=np.float64)
    involved = np.flatnonzero(~identified)
    # c supported on the involved parameters and orthogonal to the null space: null(N_J')
    _, sing, vt = np.linalg.svd(null[involved].T)
    rank = int(np.sum(sing > 1e-8))
    combinations = []
    for a in _echelon(vt[rank:]):
        c = np.zeros(p)
        c[involved] = a / a[np.argmax(np.abs(a))]
        c[np.abs(c) < 1e-10] = 0.0
        variance = float(c @ cov @ c)
        combinations.append(IdentifiedCombination({names[j]: float(c[j]) for j in np.flatnonzero(c)},
                                                  float(c @ theta), float(np.sqrt(variance)) if variance >= 0
                                                  else float("nan")))
    return Identification(identified, null, tuple(combinations))


def _echelon(basis: np.ndarray) -> np.ndarray:
    """A basis of the row space of ``basis`` (m, q) in reduced row echelon form: each row has a
    coefficient 1 where the others have 0, so that several combinations read one at a time
    (``r0_b[type 0] + dup[type 0]`` and ``r0_b[type 1] + dup[type 1]``, not an arbitrary
    rotation of the two). One row is returned as it is."""
    rows = np.array(basis, dtype=np.float64)
    if rows.shape[0] < 2:
        return rows
    pivot_row = 0
    for col in range(rows.shape[1]):
        if pivot_row == rows.shape[0]:
            break
        k = pivot_row + int(np.argmax(np.abs(rows[pivot_row:, col])))
        if abs(rows[k, col]) < 1e-8:
            continue
        rows[[pivot_row, k]] = rows[[k, pivot_row]]
        rows[pivot_row] /= rows[pivot_row, col]
        others = np.arange(rows.shape[0]) != pivot_row
        rows[others] -= np.outer(rows[others, col], rows[pivot_row])
        pivot_row += 1
    return rows
