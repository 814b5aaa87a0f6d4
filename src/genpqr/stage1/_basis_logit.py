r"""The first stage of :class:`genpqr.GenPQR` on continuous states with finite actions: a
penalized multinomial logit on a fixed basis of the standardized state, fitted by L-BFGS.

:class:`StateBasis`
    ``x -> [B(z_1), ..., B(z_d), z_i z_j (i < j)]`` with ``z`` the standardized state: cubic
    B-splines per coordinate (``n_knots`` uniform knots over the training range, linear beyond
    it; the same functions as :class:`sklearn.preprocessing.SplineTransformer` with
    ``extrapolation="linear"``) and, when ``d <= MAX_INTERACTION_DIM``, the pairwise products.
    ``d (n_knots + 2) + d (d - 1) / 2`` columns: 45 for the paper's 5-D states. Plain numpy (one
    vectorized pass), so the many evaluations of a fit (stage 1, its next states, stage 2's
    features) stay cheap.
:class:`BasisLogit`
    ``pi(a|s) = softmax(B(s) W + b)_a`` with the ridge penalty of scikit-learn's
    ``LogisticRegression`` (``C sum_i w_i l_i + ||W||^2 / 2``; the intercepts unpenalized),
    minimized by L-BFGS from the marginal frequencies; a scikit-learn classifier
    (``sample_weight``: a weight of 2 is a repeated row).

Why this is the default (docs/benchmarks.md, "The default path of Experiment 2"): on the
paper's 5-D states the additive splines capture each coordinate's curvature and the products
the interactions of the softmax, at a held-out policy log loss as low as the alternatives'
(linear, quadratic, splines alone) across the repository's continuous-state designs, and the
fit is a few tens of milliseconds. The penalty ``C`` was set by held-out log loss across those
designs (not by the reward): see ``DEFAULT_C``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin

__all__ = ["StateBasis", "BasisLogit", "MAX_INTERACTION_DIM", "DEFAULT_C", "DEFAULT_KNOTS"]

#: Pairwise products ``z_i z_j`` are in the basis up to this many state columns (45 pairs).
MAX_INTERACTION_DIM = 10
#: Inverse ridge penalty of :class:`BasisLogit` (scikit-learn's ``C``), by held-out log loss.
DEFAULT_C = 0.003
#: Uniform knots per state coordinate of :class:`StateBasis`.
DEFAULT_KNOTS = 5


def _cubic_pieces(u: np.ndarray, slopes: bool = False):
    """The four non-zero uniform cubic B-splines on a knot interval at offset ``u`` in [0, 1]
    (bases ``j .. j + 3`` of the interval ``j``), and with ``slopes`` their derivatives."""
    v = 1.0 - u
    u2 = u * u
    b0 = v * v * v / 6.0
    b3 = u2 * u / 6.0
    b1 = 3.0 * b3 - u2 + 2.0 / 3.0  # (3 u^3 - 6 u^2 + 4) / 6
    values = (b0, b1, 1.0 - b0 - b1 - b3, b3)  # a partition of unity
    if not slopes:
        return values, None
    return values, (-0.5 * v * v, 1.5 * u2 - 2.0 * u, -1.5 * u2 + u + 0.5, 0.5 * u2)


class StateBasis(TransformerMixin, BaseEstimator):
    """Cubic B-splines per standardized state coordinate and their pairwise products.

    Parameters
    ----------
    n_knots : int >= 2
        Uniform knots over each standardized coordinate's training range (``n_knots + 2``
        cubic B-splines per coordinate, a partition of unity inside the range; linear
        extrapolation outside).
    interactions : "auto" or bool
        Append ``z_i z_j`` (i < j) of the standardized coordinates; ``"auto"``: when the state
        has at most ``MAX_INTERACTION_DIM`` columns.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (d,)
        Standardization (weighted with ``sample_weight``; a constant column has scale 1).
    low_, step_ : ndarray of shape (d,)
        The first knot and the knot spacing on the standardized scale.
    pairs_ : tuple of two index arrays
    n_features_out_ : int
    """

    def __init__(self, n_knots=DEFAULT_KNOTS, interactions="auto"):
        self.n_knots = n_knots
        self.interactions = interactions

    def fit(self, X, y=None, sample_weight=None):
        X = _check_states(X, "X")
        n_knots = self.n_knots
        if isinstance(n_knots, bool) or not isinstance(n_knots, (int, np.integer)) or n_knots < 2:
            raise ValueError(f"n_knots must be an int >= 2, got {n_knots!r}")
        if not (self.interactions == "auto" or isinstance(self.interactions, (bool, np.bool_))):
            raise ValueError(f"interactions must be 'auto' or a bool, got {self.interactions!r}")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        keep = slice(None) if w is None else w > 0
        rows, wk = X[keep], None if w is None else w[keep]
        if rows.shape[0] == 0:
            raise ValueError("StateBasis needs at least one row of positive weight")
        self.mean_ = np.average(rows, axis=0, weights=wk)
        scale = np.sqrt(np.average((rows - self.mean_) ** 2, axis=0, weights=wk))
        self.scale_ = np.where(scale > 0, scale, 1.0)
        z = (rows - self.mean_) / self.scale_
        self.low_ = z.min(axis=0)
        span = z.max(axis=0) - self.low_
        self.step_ = np.where(span > 0, span, 1.0) / (int(n_knots) - 1)
        d = X.shape[1]
        use = d <= MAX_INTERACTION_DIM if self.interactions == "auto" else bool(self.interactions)
        self.pairs_ = np.triu_indices(d, 1) if use else (np.zeros(0, int), np.zeros(0, int))
        self.n_features_in_ = d
        self.n_features_out_ = d + d * (int(n_knots) + 2) + self.pairs_[0].size
        return self

    def transform(self, X):
        if not hasattr(self, "mean_"):
            from ..exceptions import NotFittedError

            raise NotFittedError("this StateBasis is not fitted yet; call fit(X) first")
        X = _check_states(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns but StateBasis was fitted on {self.n_features_in_}")
        n, d, m = X.shape[0], X.shape[1], int(self.n_knots) + 2
        out = np.zeros((n, self.n_features_out_))
        z = (X - self.mean_) / self.scale_
        out[:, :d] = z
        t = (z - self.low_) / self.step_  # knot units: knots at 0, 1, ..., n_knots - 1
        inside = np.clip(t, 0.0, float(int(self.n_knots) - 1))
        cell = np.minimum(inside.astype(np.int64), int(self.n_knots) - 2)  # the knot interval
        beyond = t - inside  # linear extrapolation beyond the boundary knots (0 inside the range)
        outside = bool(np.any(beyond))
        values, slopes = _cubic_pieces(inside - cell, slopes=outside)
        # the four non-zero splines of each coordinate, written in place through flat indices
        first = np.arange(n)[:, None] * self.n_features_out_ + d + np.arange(d) * m + cell
        flat = out.reshape(-1)
        for k in range(4):
            flat[first + k] = values[k] + slopes[k] * beyond if outside else values[k]
        i, j = self.pairs_
        np.multiply(z[:, i], z[:, j], out=out[:, d + d * m:])
        return out

    def get_feature_names_out(self, input_features=None):
        names = [f"x{k}" for k in range(self.n_features_in_)] if input_features is None else list(input_features)
        splines = [f"{names[k]}_sp{m}" for k in range(self.n_features_in_) for m in range(int(self.n_knots) + 2)]
        out = list(names) + splines
        out += [f"{names[a]} {names[b]}" for a, b in zip(*self.pairs_)]
        return np.asarray(out, dtype=object)


class BasisLogit(ClassifierMixin, BaseEstimator):
    """Multinomial logit on a :class:`StateBasis` of continuous states, ridge-penalized.

    Minimizes ``C sum_i w_i l_i(W, b) + ||W||^2 / 2`` (scikit-learn's convention: ``C`` is the
    inverse penalty per unit of row weight, so the penalty's share falls as rows are added;
    the intercepts ``b`` are not penalized) by L-BFGS from ``W = 0`` and ``b`` the log
    marginal frequencies.

    Parameters
    ----------
    C : float > 0
    n_knots : int
        Knots per coordinate of the basis (:class:`StateBasis`).
    interactions : "auto" or bool
        Pairwise products in the basis (:class:`StateBasis`).
    max_iter : int
    tol : float
        L-BFGS stops when the largest gradient entry of the mean loss is below ``tol``.

    Attributes
    ----------
    classes_ : ndarray
    basis_ : StateBasis (fitted)
    coef_ : ndarray of shape (n_basis, n_classes)
    intercept_ : ndarray of shape (n_classes,)
    n_iter_ : int
    """

    def __init__(self, C=DEFAULT_C, C_linear=1.0, n_knots=DEFAULT_KNOTS, interactions="auto", max_iter=1000,
                 tol=1e-6):
        self.C = C
        self.C_linear = C_linear
        self.n_knots = n_knots
        self.interactions = interactions
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y, sample_weight=None):
        """Fit on states ``X`` (n, d) and actions ``y``; returns self."""
        from scipy.optimize import minimize
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        if not (np.isscalar(self.C) and np.isfinite(self.C) and self.C > 0):
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}")
        w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (X.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError(f"sample_weight must be finite and non-negative with shape ({X.shape[0]},), and not "
                             f"all weights zero")
        self.classes_, codes = np.unique(y, return_inverse=True)
        codes = codes.ravel()
        K, total = self.classes_.size, float(w.sum())
        freq = np.bincount(codes, weights=w, minlength=K) / total
        self.basis_ = StateBasis(self.n_knots, self.interactions).fit(X, sample_weight=sample_weight)
        if K < 2:  # one class: probability one
            self.coef_, self.intercept_, self.n_iter_ = np.zeros((self.basis_.n_features_out_, 1)), np.zeros(1), 0
            return self
        B = self.basis_.transform(X)
        p = B.shape[1]
        share = w / total
        d = X.shape[1]
        ridge = np.full(p, 1.0 / (float(self.C) * total))
        ridge[:d] = 1.0 / (float(self.C_linear) * total)  # the linear terms: shrink the rest toward a linear logit
        # whitened coordinates: W = M phi with M = L^-T, L L^T the weighted covariance of the basis
        # plus the ridge (the logit's Fisher metric up to the softmax's variance), and the basis
        # centred so that the intercept decouples: the same optimum, reached in a few dozen steps
        centre = share @ B
        Bc = B - centre
        L = np.linalg.cholesky((Bc.T * share) @ Bc + np.diag(ridge))
        M = np.linalg.solve(L.T, np.eye(p))  # L^-T (upper triangular)
        Bw = np.ascontiguousarray((Bc @ M).T)  # (p, n): reductions over the K classes run along rows
        MtM = (M.T * ridge) @ M  # the penalty's matrix in whitened coordinates
        target = np.zeros((K, X.shape[0]))
        target[codes, np.arange(X.shape[0])] = share  # weighted one-hot, mean-scaled

        def objective(theta):
            phi, b = theta[:p * K].reshape(p, K), theta[p * K:]
            S = phi.T @ Bw + b[:, None]  # (K, n)
            top = S.max(axis=0)
            E = np.exp(S - top)
            Z = E.sum(axis=0)
            shrink = MtM @ phi
            loss = float(share @ (np.log(Z) + top) - np.vdot(target, S)) + 0.5 * float(np.vdot(phi, shrink))
            R = E * (share / Z) - target
            return loss, np.concatenate([(Bw @ R.T + shrink).ravel(), R.sum(axis=1)])

        start = np.concatenate([np.zeros(p * K), np.log(np.maximum(freq, 1e-12))])
        res = minimize(objective, start, jac=True, method="L-BFGS-B",
                       options={"maxiter": int(self.max_iter), "gtol": float(self.tol), "ftol": 1e-4 * float(self.tol),
                                "maxcor": 20})
        self.coef_ = M @ res.x[:p * K].reshape(p, K)
        self.intercept_ = res.x[p * K:] - centre @ self.coef_
        self.n_iter_ = int(res.nit)
        return self

    def _logits(self, X):
        from sklearn.utils.validation import check_is_fitted, validate_data

        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.basis_.transform(X) @ self.coef_ + self.intercept_

    def decision_function(self, X):
        """The logits ``B(s) W + b``, shape (n, n_classes); with two classes the difference of
        the second's and the first's, shape (n,) (scikit-learn's convention)."""
        S = self._logits(X)
        return S[:, 1] - S[:, 0] if S.shape[1] == 2 else S

    def predict_proba(self, X):
        """Choice probabilities at states ``X`` (n, d), shape (n, n_classes)."""
        return np.exp(self.predict_log_proba(X))

    def predict_log_proba(self, X):
        """``log pi(a|s)`` at states ``X``, shape (n, n_classes)."""
        S = self._logits(X)
        S -= S.max(axis=1, keepdims=True)
        return S - np.log(np.exp(S).sum(axis=1, keepdims=True))

    def predict(self, X):
        """The most probable action at each state, shape (n,)."""
        S = self._logits(X)  # first: NotFittedError before any fitted attribute is read
        return self.classes_[np.argmax(S, axis=1)]

    def describe(self) -> str:
        return (f"basis logit (cubic splines, {self.n_knots} knots per coordinate, pairwise products "
                f"{self.interactions}; C={self.C:g})")


def _check_states(X, name):
    from ..data._validation import as_float_array

    return as_float_array(X, name, ndim=2, allow_1d_as_column=False)
