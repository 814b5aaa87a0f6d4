"""Designs of the inference benchmarks (issue 34; shared/references/debiased-inference.md):
the notes' ring-30 reference design, exact nuisances and true targets."""

from __future__ import annotations

import numpy as np

from genpqr.inference import _algebra as alg
from genpqr.stage2 import soft_optimal_solution, TransitionKernel

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
    states): the notes' deliberately biased but consistent first stage (Sec. 9.4)."""

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
