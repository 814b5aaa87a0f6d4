"""Small exact designs shared by the inference tests."""

from __future__ import annotations

import numpy as np

from genpqr.inference import _algebra as alg

S, K = 5, 3


def random_law(seed=1, gamma=0.8, terminal=True, anchor=False, n_states=S, n_actions=K):
    """A random finite MDP law (Dirichlet rho, pi, kernel rows with a termination slot) and a
    random normalization (or an anchor on action 0)."""
    rng = np.random.default_rng(seed)
    S_, K_ = n_states, n_actions
    rho = rng.dirichlet(np.ones(S_))
    pi = rng.dirichlet(np.ones(K_), size=S_)
    P = rng.dirichlet(np.ones(S_ + 1), size=(S_, K_))
    if not terminal:
        P[:, :, -1] = 0.0
        P /= P.sum(axis=2, keepdims=True)
    mu = np.zeros((S_, K_))
    if anchor:
        mu[:, 0] = 1.0
    else:
        mu = rng.dirichlet(np.ones(K_), size=S_)
    g = rng.normal(size=S_)
    return law_from(rho, pi, P, gamma, mu, g)


def law_from(rho, pi, P_full, gamma, mu, g):
    """``P_full`` (S, K, S + 1), the last slot termination."""
    S_, K_ = pi.shape
    return alg.TabularLaw.create(rho, pi, P_full[:, :, :S_].reshape(S_ * K_, S_), gamma, mu, g)


def full_kernel(law):
    """(S, K, S + 1) with the termination slot."""
    P = law.kernel.to_dense()
    return np.concatenate([P, np.clip(1 - P.sum(axis=2), 0, None)[:, :, None]], axis=2)


def joint(law):
    """The law of one row (S, K, S + 1)."""
    return law.density[:, :, None] * full_kernel(law)


def split(p, gamma, mu, g):
    """``(rho, pi, P)`` of a joint law ``p`` (S, K, S + 1) as a TabularLaw."""
    rho = p.sum(axis=(1, 2))
    pi = p.sum(axis=2) / rho[:, None]
    P = p / (rho[:, None, None] * pi[:, :, None])
    return law_from(rho, pi, P, gamma, mu, g)
