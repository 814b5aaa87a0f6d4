"""The kernel protocol (expect / push / to_dense) for dense, sparse and product-only kernels, and
GenPQR's exact solve through it (sparse == dense to 1e-10)."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.stage2._kernels import KernelOperator, TransitionKernel, as_kernel, is_kernel_like
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier

from ..conftest import all_normalizations

TIGHT = 1e-10


class ProductsOnly:
    """A transition model known only through products (the protocol, nothing stored densely)."""

    def __init__(self, matrix, n_states, n_actions):
        self._m, self.n_states, self.n_actions = sp.csr_matrix(matrix), n_states, n_actions

    def expect(self, values):
        values = np.asarray(values)
        return np.asarray(self._m @ values.reshape(self.n_states, -1)).reshape(
            (self.n_states, self.n_actions) + values.shape[1:])

    def push(self, weights):
        weights = np.asarray(weights)
        return np.asarray(self._m.T @ weights.reshape(self.n_states * self.n_actions, -1)).reshape(
            (self.n_states,) + weights.shape[2:])


def three_forms(mdp):
    """The same kernel dense (S, K, S), sparse (S*K, S) and product-only."""
    S, K = mdp.n_states, mdp.n_actions
    matrix = sp.csr_matrix(mdp.kernel.matrix)
    return {"dense": matrix.toarray().reshape(S, K, S), "sparse": matrix, "products": ProductsOnly(matrix, S, K)}


def test_as_kernel_dispatch():
    mdp = random_mdp(7, 3, n_next=2, random_state=0)
    forms = {name: as_kernel(P, 3) for name, P in three_forms(mdp).items()}
    assert not forms["dense"].is_sparse and forms["sparse"].is_sparse
    assert isinstance(forms["products"], KernelOperator)
    assert as_kernel(mdp) is mdp.kernel and as_kernel(forms["products"]) is forms["products"]
    assert is_kernel_like(forms["sparse"]) and not is_kernel_like(np.zeros((7, 3, 7)))
    for kernel in forms.values():
        assert (kernel.n_states, kernel.n_actions) == (7, 3)
        np.testing.assert_array_equal(kernel.to_dense(), forms["dense"].to_dense())


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 4), st.integers(0, 3), st.integers(0, 10_000))
def test_push_is_the_adjoint_of_expect(S, K, extra, seed):
    """<push(w), f> = <w, expect(f)> for every storage, with trailing columns too."""
    rng = np.random.default_rng(seed)
    mdp = random_mdp(S, K, n_next=min(2, S), random_state=rng)
    tail = () if extra == 0 else (extra,)
    f = rng.normal(size=(S,) + tail)
    w = rng.normal(size=(S, K) + tail)
    for name, P in three_forms(mdp).items():
        kernel = as_kernel(P, K)
        Pf, Pw = kernel.expect(f), kernel.push(w)
        assert Pf.shape == (S, K) + tail and Pw.shape == (S,) + tail, name
        assert abs(np.sum(Pw * f) - np.sum(w * Pf)) <= 1e-10 * (1 + np.abs(w).sum() * np.abs(f).max()), name
        dense = kernel.to_dense()
        np.testing.assert_allclose(Pf, np.einsum("sat,t...->sa...", dense, f), atol=1e-12, err_msg=name)


def test_to_dense_refuses_above_the_limit():
    mdp = random_mdp(20, 2, n_next=2, random_state=0)
    for kernel in (mdp.kernel, as_kernel(three_forms(mdp)["products"])):
        with pytest.raises(ValueError, match=r"dense \(S, K, S\) = \(20, 2, 20\).*max_bytes"):
            kernel.to_dense(max_bytes=1000)
        assert kernel.to_dense(max_bytes=8 * 20 * 2 * 20).shape == (20, 2, 20)
    big = TransitionKernel(sp.csr_matrix((10_000 * 100, 10_000)), 10_000, 100)
    with pytest.raises(ValueError, match="74.5 GiB"):
        big.to_dense()


def test_product_only_kernel_is_validated():
    mdp = random_mdp(5, 2, n_next=2, random_state=0)
    model = three_forms(mdp)["products"]
    with pytest.raises(ValueError, match="2 actions but 3 were expected"):
        as_kernel(model, 3)
    model._m = model._m * 1.5
    with pytest.raises(ValueError, match="rows must sum to at most 1"):
        as_kernel(model, 2)
    model.expect = lambda values: np.zeros((5, 3))
    with pytest.raises(ValueError, match=r"expect returned shape \(5, 3\), expected \(5, 2\)"):
        as_kernel(model, 2)


@pytest.mark.parametrize("seed", range(4))
def test_sparse_and_product_only_recovery_equal_dense(seed):
    """GenPQR's exact solve (reward, Q, v) is the same for every storage of one kernel."""
    rng = np.random.default_rng(seed)
    S, K, gamma = 30, 4, [0.5, 0.9, 0.95, 0.99][seed]
    mdp = random_mdp(S, K, n_next=3, gamma=gamma, random_state=rng)
    u = T.soft_optimal_solution(mdp.reward, mdp.kernel, gamma).log_policy
    forms = three_forms(mdp)
    for name, norm in all_normalizations(S, K, rng).items():
        base = T.recover_reward(u, forms["dense"], gamma, norm)
        for form in ("sparse", "products"):
            rec = T.recover_reward(u, forms[form], gamma, norm)
            for field in ("reward", "q", "continuation"):
                np.testing.assert_allclose(getattr(rec, field), getattr(base, field), rtol=0, atol=TIGHT,
                                           err_msg=f"{form} {name} {field}")


def test_matrix_free_solve_above_the_dense_limit():
    """S = 3,000: a product-only kernel gives a matrix-free P_mu and a Krylov solve that matches the
    sparse kernel's solve to the solver's tolerance; a direct solve is refused with a named error."""
    S, K, gamma = 3000, 3, 0.9
    mdp = random_mdp(S, K, n_next=3, gamma=gamma, random_state=1)
    rng = np.random.default_rng(1)
    u = np.log(rng.dirichlet(np.ones(K), size=S))
    operator = as_kernel(three_forms(mdp)["products"])
    sparse = T.recover_reward(u, mdp.kernel, gamma, N.anchor_action(0), tol=1e-12)
    free = T.recover_reward(u, operator, gamma, N.anchor_action(0), tol=1e-12)
    assert free.solve.solver.startswith("auto:")
    np.testing.assert_allclose(free.reward, sparse.reward, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="solver='direct' needs the entries of P_mu"):
        T.recover_reward(u, operator, gamma, N.anchor_action(0), solver="direct")


def _tabular_data(S, K, n_next, episodes, horizon, seed):
    mdp = random_mdp(S, K, n_next=n_next, gamma=0.9, random_state=seed)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, 0.9) if S * K <= 10_000 else np.full((S, K), 1.0 / K)
    return mdp, simulate_tabular(mdp, policy, episodes, horizon, random_state=seed)


def test_genpqr_fit_sparse_equals_dense():
    """GenPQR(q_model="exact") with the kernel given dense, sparse or product-only: same tables."""
    S, K = 25, 3
    mdp, data = _tabular_data(S, K, 3, 200, 15, seed=3)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, P in three_forms(mdp).items():
            est = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=P,
                         policy_model=FrequencyClassifier(n_states=S)).fit(data)
            fits[name] = est.stage2_.recovery
    for name in ("sparse", "products"):
        for field in ("reward", "q", "continuation"):
            np.testing.assert_allclose(getattr(fits[name], field), getattr(fits["dense"], field), rtol=0, atol=TIGHT,
                                       err_msg=f"{name} {field}")


def test_genpqr_fit_ten_thousand_states_hundred_actions_fits_in_memory():
    """1e4 states x 100 actions, 3 next states per pair: a dense kernel needs 80 GB; the exact fit with
    the sparse kernel (CSR, 3e6 entries) peaks far below 1 GB of traced allocations."""
    S, K = 10_000, 100
    mdp, data = _tabular_data(S, K, 3, 500, 20, seed=0)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=mdp.kernel.matrix,
                         policy_model=FrequencyClassifier(n_states=S)).fit(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1e9, f"peak traced memory {peak / 1e9:.2f} GB"
    assert est.stage2_.kernel.is_sparse and est.stage2_.recovery.reward.shape == (S, K)
    rec = est.stage2_.recovery
    # the solve holds: Q = u - g + gamma P mu Q, with mu Q computed through the sparse kernel
    mu_q = np.sum(rec.mu * rec.q, axis=1)
    residual = rec.q - (rec.log_policy - rec.g[:, None] + 0.9 * est.stage2_.kernel.expect(mu_q))
    assert np.max(np.abs(residual)) < 1e-8


def test_uniform_fill_of_many_unvisited_pairs_is_refused():
    """unvisited='uniform' on 1e4 states x 100 actions seen 10 times would store a dense row per unvisited pair."""
    S, K = 10_000, 100
    states = np.arange(10)
    with pytest.raises(ValueError, match="unvisited='uniform' would store"):
        T.estimate_transitions(states, np.zeros(10, int), states + 1, S, K, unvisited="uniform")
    kernel, counts = T.estimate_transitions(states, np.zeros(10, int), states + 1, S, K)
    assert kernel.is_sparse and kernel.matrix.nnz == S * K and counts.sum() == 10



def test_kernel_from_counts_divides_tiny_weighted_counts_without_overflow():
    """Weighted counts as small as a latent type's posterior on a foreign episode (subnormal) give
    the same rows as any other scale; the caller's matrix is left as it was."""
    import warnings

    import scipy.sparse as sp

    from genpqr.stage2._tabular import kernel_from_counts

    rows = np.array([[2.0, 1.0, 1.0], [0.0, 3.0, 1.0], [0.0, 0.0, 0.0]])  # 3 states, 1 action; cell 2 unvisited
    matrix = sp.csr_matrix(rows)
    before = matrix.toarray().copy()
    expected = kernel_from_counts(matrix, matrix.toarray().sum(axis=1))[0].dense()
    tiny = matrix * 1e-310
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = kernel_from_counts(tiny, tiny.toarray().sum(axis=1))[0].dense()
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_array_equal(matrix.toarray(), before)
