"""Exact tabular recovery against closed-form truth (Theorem "IRL via a Bellman equation")."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from genpqr import normalization as N, stage2 as T
from genpqr.stage2._kernels import as_kernel
from genpqr.stage2._linear_bellman import solve_linear_bellman
from genpqr.envs import random_mdp

from ..conftest import all_normalizations

EXACT = 1e-8
SIZES = [(6, 2), (40, 4), (150, 7)]


def soft_bellman_gap(r, v, kernel, gamma):
    """max |v - P logsumexp(r + gamma v)|."""
    return np.max(np.abs(v - kernel.expect(logsumexp(r + gamma * v, axis=1))))


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("S,K", SIZES)
@pytest.mark.parametrize("sparse", [False, True])
def test_exact_recovery_every_normalization(seed, S, K, sparse):
    rng = np.random.default_rng(seed)
    gamma = [0.0, 0.5, 0.9, 0.95][seed % 4] if seed % 5 else 0.99
    mdp = random_mdp(S, K, n_next=(min(3, S) if sparse else None), gamma=gamma, random_state=rng,
                     reward_scale=1.0 + seed % 3)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, gamma)
    assert sol.residual < 1e-10 * max(1.0, np.abs(sol.value).max())
    for name, norm in all_normalizations(S, K, rng).items():
        truth = T.normalized_reward(mdp.reward, mdp.kernel, gamma, norm)
        rec = T.recover_reward(sol.log_policy, mdp.kernel, gamma, norm)
        assert rec.reward.shape == rec.continuation.shape == rec.q.shape == (S, K)
        assert np.max(np.abs(rec.reward - truth)) < EXACT, name
        # (r, v) satisfies the soft Bellman equation and the normalization
        assert soft_bellman_gap(rec.reward, rec.continuation, mdp.kernel, gamma) < EXACT, name
        assert np.max(np.abs(np.sum(rec.mu * rec.reward, axis=1) - rec.g)) < EXACT, name
        # Q solves its linear Bellman equation; v = (u - g - Q) / gamma
        assert np.max(np.abs(rec.q - (rec.log_policy - rec.g[:, None] + gamma * mdp.kernel.expect(rec.mu_q)))) < EXACT
        if gamma > 0:
            assert np.max(np.abs(rec.continuation - (rec.log_policy - rec.g[:, None] - rec.q) / gamma)) < 1e-7
        # the recovered reward reproduces the behaviour exactly
        assert np.max(np.abs(T.soft_optimal_policy(rec.reward, mdp.kernel, gamma) - sol.policy)) < EXACT, name


def test_truth_is_shaping_of_the_reward(rng):
    """normalized_reward differs from the reward by c - gamma P c (shaping lemma)."""
    mdp = random_mdp(25, 3, gamma=0.9, random_state=rng)
    for norm in all_normalizations(25, 3, rng).values():
        diff = T.normalized_reward(mdp.reward, mdp.kernel, 0.9, norm) - mdp.reward
        # diff = c - gamma P c  =>  diff + gamma P c has equal entries across actions; recover c from mu
        c, _ = solve_linear_bellman(mdp.kernel.under(np.full((25, 3), 1 / 3)), diff.mean(axis=1), 0.9)
        resid = diff + 0.9 * mdp.kernel.expect(c) - c[:, None]
        assert np.max(np.abs(resid)) < 1e-9


def test_value_normalization_fixes_the_value(rng):
    """value(h, mu): the mu-policy's (unregularized) value of the normalized reward is h."""
    S, K, gamma = 30, 4, 0.8
    mdp = random_mdp(S, K, gamma=gamma, random_state=rng)
    h = rng.normal(size=S)
    mu = rng.dirichlet(np.ones(K), size=S)
    r = T.normalized_reward(mdp.reward, mdp.kernel, gamma, N.value(h, mu=N.weighted(mu)))
    _, v = T.policy_evaluation(r, mu, mdp.kernel, gamma)
    assert np.max(np.abs(v - h)) < EXACT
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, gamma)
    r_b = T.normalized_reward(mdp.reward, mdp.kernel, gamma, N.value(h))
    assert np.max(np.abs(T.policy_evaluation(r_b, policy, mdp.kernel, gamma)[1] - h)) < EXACT


@pytest.mark.parametrize("seed", range(5))
def test_value_differences_identified_from_u(seed):
    """Theorem "Identification of policy value differences": same under u = log pi and r*."""
    rng = np.random.default_rng(seed)
    S, K, gamma = 30, 4, 0.9
    mdp = random_mdp(S, K, n_next=4, gamma=gamma, random_state=rng)
    sol = T.soft_optimal_solution(mdp.reward, mdp.kernel, gamma)
    pi1, pi2 = rng.dirichlet(np.ones(K), size=S), rng.dirichlet(np.ones(K), size=S)
    from_u = T.value_difference(sol.log_policy, pi1, pi2, mdp.kernel, gamma)
    for norm in (N.anchor_action(0), N.mean_zero(g=rng.normal(size=S))):
        r_star = T.normalized_reward(mdp.reward, mdp.kernel, gamma, norm)
        assert np.max(np.abs(T.value_difference(r_star, pi1, pi2, mdp.kernel, gamma) - from_u)) < EXACT
    assert np.max(np.abs(T.value_difference(mdp.reward, pi1, pi2, mdp.kernel, gamma) - from_u)) < EXACT


@pytest.mark.parametrize("solver", ["direct", "gmres", "bicgstab", "iteration", "auto"])
def test_solvers_agree(solver, rng):
    mdp = random_mdp(300, 5, n_next=8, gamma=0.95, random_state=rng)
    u = mdp.reward - logsumexp(mdp.reward, axis=1, keepdims=True)
    ref = T.recover_reward(u, mdp.kernel, 0.95, N.mean_zero(), solver="direct")
    rec = T.recover_reward(u, mdp.kernel, 0.95, N.mean_zero(), solver=solver, tol=1e-11)
    assert np.max(np.abs(rec.reward - ref.reward)) < 1e-9
    assert rec.solve.residual <= 1e-11


def test_auto_uses_krylov_on_large_sparse(rng):
    mdp = random_mdp(5000, 3, n_next=5, gamma=0.95, random_state=rng)
    u = mdp.reward - logsumexp(mdp.reward, axis=1, keepdims=True)
    rec = T.recover_reward(u, mdp.kernel, 0.95, N.anchor_action(0))
    assert "bicgstab" in rec.solve.solver or "gmres" in rec.solve.solver
    target = rec.log_policy - rec.g[:, None] + 0.95 * mdp.kernel.expect(rec.mu_q)
    assert np.max(np.abs(rec.q - target)) < 1e-8


def test_value_iteration_matches_policy_iteration(rng):
    mdp = random_mdp(20, 3, gamma=0.9, random_state=rng)
    a = T.soft_optimal_solution(mdp.reward, mdp.kernel, 0.9, method="policy_iteration")
    b = T.soft_optimal_solution(mdp.reward, mdp.kernel, 0.9, method="value_iteration", tol=1e-13)
    assert np.max(np.abs(a.policy - b.policy)) < 1e-10
    assert a.iterations < 15 < b.iterations


def test_dense_and_sparse_kernels_agree(rng):
    mdp = random_mdp(15, 3, n_next=4, gamma=0.9, random_state=rng)
    dense = mdp.kernel.dense()
    sparse = sp.csr_matrix(dense.reshape(45, 15))
    r1 = T.normalized_reward(mdp.reward, dense, 0.9, N.anchor_action(1))
    r2 = T.normalized_reward(mdp.reward, as_kernel(sparse, 3), 0.9, N.anchor_action(1))
    assert np.max(np.abs(r1 - r2)) < 1e-12


def test_substochastic_kernel_is_termination(rng):
    """Rows summing below one terminate; recovery stays exact."""
    mdp = random_mdp(20, 3, gamma=0.9, random_state=rng)
    P = mdp.kernel.dense() * rng.uniform(0.5, 1.0, size=(20, 3, 1))
    sol = T.soft_optimal_solution(mdp.reward, P, 0.9)
    for norm in (N.anchor_action(0), N.behavior(g=0.5)):
        rec = T.recover_reward(sol.log_policy, P, 0.9, norm)
        assert np.max(np.abs(rec.reward - T.normalized_reward(mdp.reward, P, 0.9, norm))) < EXACT


def test_estimate_transitions_from_counts():
    s = np.array([0, 0, 0, 1, 1, 2])
    a = np.array([0, 0, 1, 0, 0, 1])
    s2 = np.array([1, 2, 2, 0, 0, 0])
    term = np.array([False, False, False, False, True, False])
    kernel, counts = T.estimate_transitions(s, a, s2, 3, 2, terminated=term)
    P = kernel.dense()
    assert np.allclose(P[0, 0], [0, 0.5, 0.5])
    assert np.allclose(P[0, 1], [0, 0, 1])
    assert np.allclose(P[1, 0], [0.5, 0, 0])  # one of two visits terminated
    assert np.allclose(P[1, 1], [0, 1, 0])  # unvisited -> self
    assert counts[1, 1] == 0 and counts[0, 0] == 2
    kernel_u, _ = T.estimate_transitions(s, a, s2, 3, 2, unvisited="uniform")
    assert np.allclose(kernel_u.dense()[2, 0], 1 / 3)
    with pytest.raises(ValueError, match="never visited"):
        T.estimate_transitions(s, a, s2, 3, 2, unvisited="error")


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_have_clear_errors(rng):
    mdp = random_mdp(5, 2, gamma=0.9, random_state=rng)
    u = mdp.reward - logsumexp(mdp.reward, axis=1, keepdims=True)
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\)"):
        T.recover_reward(u, mdp.kernel, 1.0, N.mean_zero())
    with pytest.raises(ValueError, match="gamma"):
        T.recover_reward(u, mdp.kernel, -0.1, N.mean_zero())
    with pytest.raises(ValueError, match="log_policy must be finite"):
        T.recover_reward(np.where(u < -1, np.nan, u), mdp.kernel, 0.9, N.mean_zero())
    with pytest.raises(ValueError, match="logsumexp"):
        T.recover_reward(u + 1.0, mdp.kernel, 0.9, N.mean_zero())
    with pytest.raises(ValueError, match=r"log_policy must have shape \(S, K\)"):
        T.recover_reward(u[:4], mdp.kernel, 0.9, N.mean_zero())
    with pytest.raises(ValueError, match="rows must sum to at most 1"):
        T.recover_reward(u, mdp.kernel.dense() * 2, 0.9, N.mean_zero())
    with pytest.raises(ValueError, match="non-negative"):
        T.recover_reward(u, -mdp.kernel.dense(), 0.9, N.mean_zero())
    with pytest.raises(ValueError, match="P must be finite"):
        T.recover_reward(u, np.full((5, 2, 5), np.nan), 0.9, N.mean_zero())
    with pytest.raises(ValueError, match="anchor action must be an action code"):
        T.recover_reward(u, mdp.kernel, 0.9, N.anchor_action(7))
    with pytest.raises(ValueError, match="mu must be a distribution"):
        N.weighted(np.array([0.5, 0.6]))
    with pytest.raises(ValueError, match="mu must be a distribution"):
        N.weighted(np.array([1.5, -0.5]))
    with pytest.raises(ValueError, match="mu must be a distribution"):
        T.recover_reward(u, mdp.kernel, 0.9, N.weighted(lambda s: np.ones((len(s), 2))))
    with pytest.raises(TypeError, match="normalization must be a genpqr Normalization"):
        T.recover_reward(u, mdp.kernel, 0.9, "anchor")
    with pytest.raises(ValueError, match="behavior"):
        T.recover_reward(u, mdp.kernel, 0.9, N.behavior())


def test_inputs_not_modified(rng):
    mdp = random_mdp(8, 3, gamma=0.9, random_state=rng)
    P = mdp.kernel.dense().copy()
    r = mdp.reward.copy()
    u = r - logsumexp(r, axis=1, keepdims=True)
    u0, P0, r0 = u.copy(), P.copy(), r.copy()
    T.recover_reward(u, P, 0.9, N.value(1.0))
    T.normalized_reward(r, P, 0.9, N.mean_zero())
    assert np.array_equal(u, u0) and np.array_equal(P, P0) and np.array_equal(r, r0)


def test_float32_kernel_is_renormalized_and_real_excess_refused():
    """A kernel saved in float32 is off stochastic by ~1e-7: accepted, its rows renormalized to sum
    to 1 (said in ``note``); a row over 1 by more than ROW_SUM_TOL is refused; an exact kernel is untouched."""
    mdp = random_mdp(12, 3, gamma=0.9, random_state=4)
    P = mdp.kernel.dense()
    P32 = P.astype(np.float32)
    sums32 = P32.astype(np.float64).sum(axis=2)
    assert np.abs(sums32 - 1).max() > 1e-9  # float32 rounding is there
    kernel = as_kernel(P32)
    np.testing.assert_allclose(kernel.dense().sum(axis=2), 1.0, rtol=0, atol=1e-14)
    assert "renormalized" in kernel.note and "float rounding" in kernel.note
    np.testing.assert_allclose(kernel.dense(), P, atol=1e-6)
    sparse = as_kernel(sp.csr_matrix(P32.reshape(-1, 12)), 3)  # the sparse form too
    np.testing.assert_allclose(np.asarray(sparse.matrix.sum(axis=1)).ravel(), 1.0, rtol=0, atol=1e-14)
    assert as_kernel(P).note == "" and np.array_equal(as_kernel(P).dense(), P)
    bad = P.copy()
    bad[2, 2, 0] += 1e-5
    with pytest.raises(ValueError, match=r"P\[2, 2, :\] sums to 1\.00001"):
        as_kernel(bad)
    # the reward solved under the float32 kernel is the float64 one to float32 precision
    r64 = T.normalized_reward(mdp.reward, P, 0.9, N.anchor_action(0))
    r32 = T.normalized_reward(mdp.reward, P32, 0.9, N.anchor_action(0))
    np.testing.assert_allclose(r32, r64, atol=1e-5)
