"""Designs of the inference benchmarks (van der Laan, Bibaut & Kallus, arXiv 2512.24407, and docs/inference.md):
the ring-30 reference design, exact nuisances and true targets."""

from __future__ import annotations

import numpy as np

from genpqr.inference import _algebra as alg
from genpqr.stage2 import soft_optimal_solution
from genpqr.stage2._tabular import TransitionKernel

STAY, LEFT, RIGHT = 0, 1, 2


def ring_kernel(n_states: int = 30, slip=(0.15, 0.70, 0.15)) -> np.ndarray:
    """(S*K, S): intended move (stay, -1, +1), then a slip of -1 / 0 / +1."""
    S, K = n_states, 3
    P = np.zeros((S, K, S))
    for s in range(S):
        for a, move in enumerate((0, -1, 1)):
            for d, p in zip((-1, 0, 1), slip):
                P[s, a, (s + move + d) % S] += p
    return P.reshape(S * K, S)


def ring30(n_states: int = 30, gamma: float = 0.9):
    """The ring-30 design: ``(law, pi_fix, reward)``; ``law`` the true TabularLaw (anchor on stay, g = 0)."""
    S = n_states
    x = 2 * np.pi * np.arange(S) / S
    reward = np.column_stack([np.zeros(S), np.cos(x), np.sin(x) - 0.2])
    P = ring_kernel(S)
    pi0 = soft_optimal_solution(reward, P, gamma).policy
    M = np.einsum("sa,sat->st", pi0, P.reshape(S, 3, S))
    w, v = np.linalg.eig(M.T)
    rho = np.real(v[:, np.argmin(np.abs(w - 1))])
    rho = rho / rho.sum()
    mu = np.zeros((S, 3))
    mu[:, STAY] = 1.0
    law = alg.TabularLaw.create(rho, pi0, P, gamma, mu, np.zeros(S))
    logits = np.column_stack([np.full(S, 0.3), 1.2 * np.cos(x + 1), np.sin(2 * x)])
    pi_fix = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi_fix /= pi_fix.sum(axis=1, keepdims=True)
    return law, pi_fix, reward


def simulate_rows(law, n: int, rng) -> tuple:
    """``n`` i.i.d. rows (S ~ rho, A ~ pi, S' ~ P) of a tabular law: (s, a, s')."""
    S, K = law.shape
    s = rng.choice(S, size=n, p=law.rho)
    u = rng.random(n)
    a = np.minimum((np.cumsum(law.policy[s], axis=1) < u[:, None]).sum(axis=1), K - 1)
    P = law.kernel.to_dense().reshape(S * K, S)
    cdf = np.cumsum(P[s * K + a], axis=1)
    s2 = np.minimum((cdf < rng.random(n)[:, None]).sum(axis=1), S - 1)
    return s, a, s2


class RingSmoother:
    """Action frequencies smoothed over ring neighbours with a Gaussian kernel (bandwidth in
    states): a deliberately biased but consistent first stage."""

    def __init__(self, n_states=30, bandwidth=3.0):
        self.n_states = n_states
        self.bandwidth = bandwidth

    def get_params(self, deep=True):
        return {"n_states": self.n_states, "bandwidth": self.bandwidth}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def fit(self, X, y):
        S = self.n_states
        s = np.asarray(X)[:, 0].astype(int)
        y = np.asarray(y).astype(int)
        self.classes_ = np.unique(y)
        counts = np.zeros((S, self.classes_.size))
        np.add.at(counts, (s, np.searchsorted(self.classes_, y)), 1.0)
        d = np.abs(np.arange(S)[:, None] - np.arange(S)[None])
        d = np.minimum(d, S - d)
        kern = np.exp(-0.5 * (d / self.bandwidth) ** 2)
        smooth = kern @ counts
        self.table_ = smooth / smooth.sum(axis=1, keepdims=True)
        return self

    def predict_proba(self, X):
        return self.table_[np.asarray(X)[:, 0].astype(int)]


# ============================================================================ Experiment 2 (synthetic env)
def exp2_features(states) -> np.ndarray:
    """Features of the reward projection on the synthetic environment: for each non-anchor action
    ``a``, an intercept and the mean state coordinate (8 parameters); zero for the anchor."""
    states = np.asarray(states, dtype=np.float64)
    n, K = states.shape[0], 5
    X = np.zeros((n, K, 2 * (K - 1)))
    m = states.mean(axis=1)
    for a in range(1, K):
        X[:, a, 2 * (a - 1)] = 1.0
        X[:, a, 2 * (a - 1) + 1] = m
    return X


EXP2_NAMES = [f"a{a}:{w}" for a in range(1, 5) for w in ("const", "mean_s")]


def exp2_truth(env, n_trajectories: int = 200_000, chunk: int = 20_000, seed: int = 12345) -> np.ndarray:
    """``theta_0 = E_0[x x^T]^{-1} E_0[x rbar]`` under the rows' law, actions integrated out with the
    true policy (Monte Carlo over states, ``n_trajectories`` x 10 rows)."""
    rng = np.random.default_rng(seed)
    G, b = 0.0, 0.0
    for start in range(0, n_trajectories, chunk):
        data = env.simulate(min(chunk, n_trajectories - start), 10, random_state=rng)
        s = data.states
        pi = env.policy_proba(s)
        X = exp2_features(s)
        r = np.column_stack([env.true_reward(s, np.full(len(s), a)) for a in range(5)])
        G = G + np.einsum("na,nap,naq->pq", pi, X, X)
        b = b + np.einsum("na,nap,na->p", pi, X, r)
    return np.linalg.solve(G, b)


# ============================================================================ the paper's continuous design (Sec. 7)
def paper_grid(n_grid: int = 61, box: float = 2.5, noise: float = 0.2, gamma: float = 0.9, tau: float = 0.8):
    """The paper's simulation design on its ``n_grid`` x ``n_grid`` grid: returns
    ``(law, coords, pi_fix)``; ``law`` the true TabularLaw (states = grid cells, the stationary law
    of the behaviour, anchor on action 0 with g = 0), ``coords`` (S, 2) the cell centres."""
    from scipy.special import ndtr
    import scipy.sparse as sp

    g = np.linspace(-box, box, n_grid)
    X, Z = np.meshgrid(g, g, indexing="ij")
    x, z = X.ravel(), Z.ravel()
    S, K = x.size, 4
    means = [(0.80 * x + 0.15 * np.sin(z), 0.85 * z + 0.10 * np.tanh(x)),
             (0.65 * x + 0.10 * np.sin(z) - 0.45, 0.85 * z + 0.15 * np.tanh(x) + 0.20),
             (0.55 * x + 0.10 * np.sin(z) - 0.80, 0.80 * z + 0.20 * np.tanh(x) + 0.45),
             (0.90 * x + 0.10 * np.sin(z) + 0.35, 0.75 * z + 0.10 * np.tanh(x) - 0.30)]
    edges = np.concatenate([[-np.inf], (g[1:] + g[:-1]) / 2, [np.inf]])  # outer cells open

    def masses(m):  # (S, n_grid) cell masses of N(m, noise^2), m clipped to the box
        m = np.clip(m, -box, box)[:, None]
        return np.diff(ndtr((edges[None] - m) / noise), axis=1)

    rows, cols, vals = [], [], []
    for a, (mx, mz) in enumerate(means):
        px, pz = masses(mx), masses(mz)
        px[px < 1e-10], pz[pz < 1e-10] = 0.0, 0.0
        for s in range(S):
            ix, iz = np.flatnonzero(px[s]), np.flatnonzero(pz[s])
            p = np.outer(px[s, ix], pz[s, iz])
            rows.append(np.full(p.size, s * K + a))
            cols.append((ix[:, None] * n_grid + iz[None, :]).ravel())
            vals.append((p / p.sum()).ravel())
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(S * K, S))
    r = np.column_stack([np.zeros(S), 1.2 * np.tanh(0.55 * x - 0.35 * z - 0.10 * x * z - 0.15),
                         1.2 * np.tanh(0.90 * x - 0.80 * z - 0.15 * x * z - 0.60),
                         1.2 * np.tanh(-0.45 * x + 0.30 * z - 0.05 * x ** 2 - 0.10)])
    pi0 = soft_optimal_solution(r / tau, P, gamma).policy
    rho = _stationary(P, pi0)
    mu = np.zeros((S, K))
    mu[:, 0] = 1.0
    law = alg.TabularLaw.create(rho, pi0, P, gamma, mu, np.zeros(S))
    logits = np.column_stack([0.2 - 0.2 * np.abs(x) - 0.1 * np.abs(z), 1.4 * (x - 0.6) - 1.0 * (z - 0.7),
                              -1.5 + 0.3 * x - 0.3 * z, 1.1 * (-x - 0.3) + 1.0 * (z - 1.0)]) / tau
    pi_fix = np.exp(logits - logits.max(axis=1, keepdims=True))
    return law, np.column_stack([x, z]), pi_fix / pi_fix.sum(axis=1, keepdims=True)


def _stationary(P, pi, n_iter: int = 5000, tol: float = 1e-13) -> np.ndarray:
    """The stationary law of the state chain under ``pi`` (power iteration on the sparse kernel)."""
    S, K = pi.shape
    M = TransitionKernel(P, S, K).under(pi)
    d = np.full(S, 1.0 / S)
    for _ in range(n_iter):
        new = M.T @ d
        new /= new.sum()
        if np.abs(new - d).sum() < tol:
            break
        d = new
    return new


def exp2_riesz_features():
    """Riesz features for the synthetic environment: quantile splines of each state coordinate and
    of their mean (the direction every move shifts the state along)."""
    from sklearn.pipeline import make_pipeline, make_union
    from sklearn.preprocessing import FunctionTransformer

    from genpqr.inference._sieve import default_riesz_features

    mean = FunctionTransformer(lambda s: np.asarray(s).mean(axis=1, keepdims=True))
    return make_union(default_riesz_features(), make_pipeline(mean, default_riesz_features(n_knots=8)))


class GridCoordinates:
    """Grid cell index -> (x, z) coordinates (a transformer for a tabular state on a grid)."""

    def __init__(self, coords=None):
        self.coords = coords

    def get_params(self, deep=True):
        return {"coords": self.coords}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.asarray(self.coords)[np.asarray(X)[:, 0].astype(int)]


class TensorSplines:
    """Tensor-product cubic B-splines of two coordinates (``n_knots + 2`` per axis), after ``pre``."""

    def __init__(self, pre=None, n_knots=6):
        self.pre = pre
        self.n_knots = n_knots

    def get_params(self, deep=True):
        return {"pre": self.pre, "n_knots": self.n_knots}

    def set_params(self, **params):
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def fit(self, X, y=None):
        from sklearn.preprocessing import SplineTransformer

        Z = np.asarray(self.pre.transform(X) if self.pre is not None else X, dtype=np.float64)
        self.splines_ = [SplineTransformer(n_knots=self.n_knots, degree=3, extrapolation="constant").fit(Z[:, [j]])
                         for j in range(2)]
        return self

    def transform(self, X):
        Z = np.asarray(self.pre.transform(X) if self.pre is not None else X, dtype=np.float64)
        a, b = (sp.transform(Z[:, [j]]) for j, sp in enumerate(self.splines_))
        return (a[:, :, None] * b[:, None, :]).reshape(len(Z), -1)
