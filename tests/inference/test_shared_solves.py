"""The shortcuts of the exact tabular route give the answers of the long way (issue 34, cost):
the Riesz regression's held-out loss of every ridge from one eigendecomposition, the
factorizations shared within one ``infer`` call, the soft fixed point's chord and warm-started
Newton steps, and the refined solves at its policy on Newton's last factorization."""

import contextlib
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.preprocessing import SplineTransformer

import genpqr
from genpqr.envs import simulate_tabular
from genpqr.inference import _algebra as alg
from genpqr.inference import infer, policy_value, softmax_value, value_difference
from genpqr.normalization import anchor_action
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import soft_optimal_solution
from genpqr.stage2._tabular import TabularMDP

from .designs import random_law


def _projector(seed=0, S=40, K=3):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, S)[:, None]
    # splines plus a near-duplicate column: the small ridges are ill-conditioned
    spl = SplineTransformer(n_knots=5, degree=3).fit_transform(x)
    psi = np.column_stack([np.ones(S), spl, spl[:, 0] + 1e-7 * rng.normal(size=S)])
    freq = rng.dirichlet(np.ones(S * K)).reshape(S, K)
    halves = [rng.dirichlet(np.ones(S * K)).reshape(S, K) for _ in range(2)]
    halves[0][:3] = 0.0  # a half that never visits some states: the free fit extrapolates there
    halves = [h / h.sum() for h in halves]
    projector = alg.SieveProjector(psi, freq, ridge=None, halves=halves)
    projector.test_halves = halves
    return projector, rng.normal(size=(2, S, K)), psi, freq


def _held_out_loss_by_cells(projector, measure, halves):
    """The held-out Riesz loss the long way: each ridge's inverse, its representer on every cell
    and the loss summed over the cells of the other half, per component of the measure."""
    moments = np.einsum("jsk,sm->jkm", measure, projector.psi)
    loss = {r: np.zeros(measure.shape[0]) for r in projector.RIDGES}
    for system, other in zip(projector.halves, halves[::-1]):
        for r, inv in projector._inverses(system, projector.RIDGES).items():
            alpha = projector._solve(inv, moments)
            loss[r] += np.sum(other[None] * alpha ** 2, axis=(1, 2)) - 2 * np.sum(measure * alpha, axis=(1, 2))
    return loss


@pytest.mark.parametrize("seed", range(4))
def test_held_out_loss_of_every_ridge_is_the_per_ridge_solve(seed):
    projector, measure, psi, _ = _projector(seed)
    moments = np.einsum("jsk,sm->jkm", measure, psi)
    fast, slow = projector.held_out_loss(moments), _held_out_loss_by_cells(projector, measure, projector.test_halves)
    assert list(fast) == list(slow) == list(alg.SieveProjector.RIDGES)
    scale = max(np.abs(v).max() for v in slow.values())
    for r in slow:  # the small ridges are ill-conditioned: the two ways agree to their conditioning
        assert fast[r].shape == (measure.shape[0],)
        assert np.all(np.abs(fast[r] - slow[r]) <= (1e-10 if r >= 1e-4 else 1e-6) * scale), r
    table = (lambda loss: np.stack(list(loss.values())))
    np.testing.assert_array_equal(table(fast).argmin(axis=0), table(slow).argmin(axis=0))
    # each component's ridge is its own loss's minimizer
    projector(measure)
    assert projector.chosen[-1] == tuple(projector.RIDGES[i] for i in table(slow).argmin(axis=0))


def test_projector_representer_is_the_ridge_regression_on_the_cells():
    projector, measure, psi, freq = _projector(1)
    alpha = projector(measure)
    ridges = projector.chosen[-1]  # one per component
    S, K = freq.shape
    m = psi.shape[1]
    grams = np.einsum("sk,sm,sn->kmn", freq, psi, psi)
    scale = np.mean(np.trace(grams, axis1=1, axis2=2)) / m
    theta = np.stack([np.stack([np.linalg.solve(grams[k] + r * scale * np.eye(m), psi.T @ measure[j, :, k])
                                for k in range(K)]) for j, r in enumerate(ridges)])  # (j, K, m)
    np.testing.assert_allclose(alpha, np.einsum("sm,jkm->jsk", psi, theta), rtol=1e-8, atol=1e-10)


def test_shared_resolvents_factorize_once_and_solve_the_same():
    law = random_law(3, n_states=7)
    sigma = np.random.default_rng(0).dirichlet(np.ones(3), size=7)
    b = np.random.default_rng(1).normal(size=(7, 2))
    plain = alg.Resolvent(law.kernel, sigma, 0.8)
    alg.clear_kept_factorizations()
    assert alg.resolvent(law.kernel, sigma, 0.8) is not alg.resolvent(law.kernel, sigma, 0.8)  # no scope
    with alg.shared_resolvents():
        first = alg.resolvent(law.kernel, sigma, 0.8)
        assert alg.resolvent(law.kernel, sigma.copy(), 0.8) is first
        assert alg.resolvent(law.kernel, sigma, 0.7) is not first
        other = sigma[::-1].copy()
        assert alg.resolvent(law.kernel, other, 0.8) is not first
        np.testing.assert_allclose(first.solve(b), plain.solve(b), rtol=1e-13)
        np.testing.assert_allclose(first.solve_t(b), plain.solve_t(b), rtol=1e-13)
    alg.clear_kept_factorizations()
    with alg.shared_resolvents():
        assert alg.resolvent(law.kernel, sigma, 0.8) is not first  # what a scope made ends with it when not kept


@pytest.mark.parametrize("sparse", [False, True])
def test_factorizations_kept_across_scopes_are_found_by_content(sparse, monkeypatch):
    """A later scope (a bootstrap replicate, a Monte Carlo replication) finds a factorization of
    the same kernel content, policy and discount, whatever the objects holding them; a kernel
    changed in place, another policy or discount, or a kernel held as a model is not found."""
    import scipy.sparse as sp

    from genpqr.stage2._tabular import as_kernel

    P = _grid_design(n=20)[0]
    S = P.shape[0]
    make = (lambda: as_kernel(sp.csr_matrix(P.reshape(S * 3, S)), 3)) if sparse else (lambda: as_kernel(P.copy()))
    sigma = np.random.default_rng(0).dirichlet(np.ones(3), size=S)
    alg.clear_kept_factorizations()
    kernel = make()
    with alg.shared_resolvents():
        first = alg.resolvent(kernel, sigma, 0.9)
    with alg.shared_resolvents():
        assert alg.resolvent(make(), sigma.copy(), 0.9) is first  # same content, new objects
        assert alg.resolvent(make(), sigma, 0.91) is not first
        assert alg.resolvent(make(), sigma[::-1].copy(), 0.9) is not first
    changed = make()
    data = changed.matrix.data if sparse else changed.matrix
    data[data > 0] *= 0.999  # the same object's content changed in place: a new key
    with alg.shared_resolvents():
        again = alg.resolvent(changed, sigma, 0.9)
        assert again is not first
        b = np.random.default_rng(1).normal(size=S)
        np.testing.assert_allclose(again.solve(b), alg.Resolvent(changed, sigma, 0.9).solve(b), rtol=1e-13)
    monkeypatch.setattr(alg, "KEPT_BYTES", 1)  # the bound: nothing fits, nothing is kept
    alg.clear_kept_factorizations()
    with alg.shared_resolvents():
        first = alg.resolvent(kernel, sigma, 0.9)
    with alg.shared_resolvents():
        assert alg.resolvent(kernel, sigma, 0.9) is not first
    assert alg.kernel_digest(as_kernel(_RowOperator(P), 3)) is None  # a model's content is not read


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("gamma", [0.9, 0.99])
def test_refined_resolvent_is_the_direct_solve(sparse, gamma):
    """Iterative refinement on a nearby policy's factorization solves as the policy's own
    factorization does (to 1e-12 relative, both orientations, one or several right-hand sides);
    a policy too far for the refinement to contract falls back to its own factorization."""
    import scipy.sparse as sp

    from genpqr.stage2._tabular import as_kernel

    P = _grid_design(n=20)[0]  # moves along a ring: where the policy goes matters
    S = P.shape[0]
    kernel = as_kernel(sp.csr_matrix(P.reshape(S * 3, S)), 3) if sparse else as_kernel(P)
    rng = np.random.default_rng(5)
    sigma0 = rng.dirichlet(np.ones(3), size=S)
    base = alg.Resolvent(kernel, sigma0, gamma)
    for target, mix, refined in ((None, 0.02, True), (2, 0.9, False)):  # near; mostly "right" everywhere
        other = rng.dirichlet(np.ones(3), size=S) if target is None else np.eye(3)[np.full(S, target)]
        sigma = (1 - mix) * sigma0 + mix * other
        near, direct = alg.RefinedResolvent(kernel, sigma, gamma, base), alg.Resolvent(kernel, sigma, gamma)
        for b in (rng.normal(size=S), rng.normal(size=(S, 3)) * np.array([1.0, 1e-6, 1e6]), np.zeros(S)):
            for how in ("solve", "solve_t"):
                want = getattr(direct, how)(b)
                got = getattr(near, how)(b)
                scale = np.maximum(np.max(np.abs(want), axis=0), 1e-300)
                assert np.all(np.max(np.abs(got - want), axis=0) <= 1e-12 * scale), (mix, how)
                x = got  # and it solves its own system: x = b + gamma M x
                M = alg.dense_state_kernel(kernel, sigma)
                np.testing.assert_allclose(x, b + gamma * ((M.T if how == "solve_t" else M) @ x), rtol=0,
                                           atol=1e-12 * max(1.0, float(np.max(np.abs(x)))))
        assert (near._own is None) == refined  # near: refined, no factorization; far: factorized
    assert alg.refined_resolvent(kernel, sigma0, gamma, None)._lu is not None  # no base: a factorization
    assert alg.refined_resolvent(kernel, sigma0, gamma, near)._lu is not None  # a refined one is no base


class _RowOperator:
    """A kernel held as a model (the kernel protocol, no matrix)."""

    def __init__(self, P):
        self.P = P
        self.n_states, self.n_actions = P.shape[:2]

    def expect(self, f):
        return np.tensordot(self.P, f, axes=([2], [0]))

    def push(self, w):
        return np.tensordot(w, self.P, axes=([0, 1], [0, 1]))


def _newton(monkeypatch, r, law, mask, tau):
    with monkeypatch.context() as m:
        m.setattr(alg, "CHORD_RATE", 0.0)  # a factorization at every step: plain Newton
        return alg.soft_fixed_point(r, law, law.gamma, mask, tau)


def test_soft_fixed_point_chord_and_warm_start_reach_newtons_fixed_point(monkeypatch):
    law = random_law(5, gamma=0.9, terminal=False, n_states=12, n_actions=4)
    mask = np.ones((12, 4), dtype=bool)
    mask[:, 2] = False
    rng = np.random.default_rng(2)
    r0 = rng.normal(size=(12, 4))
    reference = [_newton(monkeypatch, r0 + t * rng.normal(size=r0.shape), law, mask, 0.6) for t in (0.0, 0.05, 0.2)]
    rng = np.random.default_rng(2)
    r0 = rng.normal(size=(12, 4))
    with alg.shared_resolvents():
        for t, (Phi_ref, pi_ref) in zip((0.0, 0.05, 0.2), reference):
            r = r0 + t * rng.normal(size=r0.shape)
            fn = alg.softmax_value_functional(mask, 0.6)
            fn(law, r, law.gamma)  # registers its fixed point: the next ones start from it
            Phi, pi = alg.soft_fixed_point(r, law, law.gamma, mask, 0.6)
            np.testing.assert_allclose(Phi, Phi_ref, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(pi, pi_ref, rtol=1e-11, atol=1e-13)
            # the fixed point itself: Phi = tau log sum_{A*} exp((r + gamma P Phi) / tau)
            z = np.where(mask, (r + law.gamma * law.expect(Phi)) / 0.6, -np.inf)
            np.testing.assert_allclose(0.6 * np.log(np.exp(z).sum(axis=1)), Phi, rtol=1e-12, atol=1e-12)


def _grid_design(S=36, K=3, n=3000):
    P = np.zeros((S, K, S))
    for s in range(S):
        for a, move in enumerate((0, -1, 1)):
            for d, p in zip((-1, 0, 1), (0.2, 0.6, 0.2)):
                P[s, a, (s + move + d) % S] += p
    x = 2 * np.pi * np.arange(S) / S
    reward = np.column_stack([np.zeros(S), np.cos(x), np.sin(x) - 0.2])
    pi0 = soft_optimal_solution(reward, P.reshape(S * K, S), 0.9).policy
    mdp = TabularMDP.create(P.reshape(S * K, S), 0.9, reward)
    return P, simulate_tabular(mdp, pi0, n_episodes=n // 20, horizon=20, random_state=1)


def test_infer_with_shared_solves_is_the_long_way(monkeypatch):
    """A given kernel, Riesz regression on splines of the state with the ridge chosen by held-out
    loss, a softmax target (Newton) and normalized-reward values: ``infer`` with its factorizations
    shared across the folds, chord Newton steps and refined solves at the softmax policy equals the
    long way (every factorization made again, plain Newton, the softmax policy factorized) to 1e-10."""
    P, data = _grid_design()
    S, K = P.shape[:2]
    pi_fix = np.random.default_rng(3).dirichlet(np.ones(K), size=S)
    targets = [policy_value(pi_fix, reward="log_policy", name="1a"), softmax_value([0, 2], 0.6, reward="log_policy",
                                                                                  name="1b"),
               policy_value(pi_fix, gamma=0.92, name="2"), value_difference(pi_fix, "behavior", name="d")]
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S,
                          policy_model=FrequencyClassifier(n_states=S), transition_model=P, clip=(1e-3, 0.999))
    riesz = SplineTransformer(n_knots=6, degree=3)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return infer(model, targets, data, cross_fit=3, random_state=0, riesz=riesz, warn=False)

    made = []
    init = alg.Resolvent.__init__
    monkeypatch.setattr(alg.Resolvent, "__init__", lambda self, *a: made.append(1) or init(self, *a))
    fast = run()
    n_fast = len(made)
    with monkeypatch.context() as m:
        m.setattr(alg, "shared_resolvents", contextlib.nullcontext)
        m.setattr(alg, "CHORD_RATE", 0.0)
        m.setattr(alg, "REFINE_RATE", 0.0)  # the softmax policy's own factorization, no refinement
        slow = run()
    # the fixed policies' factorizations are made once, not once per fold and the plug-in
    assert n_fast < len(made) - n_fast
    np.testing.assert_allclose(fast.plug_in, slow.plug_in, rtol=1e-10)
    np.testing.assert_allclose(fast.estimate, slow.estimate, rtol=1e-10)
    np.testing.assert_allclose(fast.std_error, slow.std_error, rtol=1e-10)
    np.testing.assert_allclose(fast.influence, slow.influence, rtol=1e-8, atol=1e-10 * np.abs(slow.influence).max())


def test_lean_fold_fits_have_the_full_fits_nuisances():
    """A fold's refit (``lean_fits``) gives the nuisances inference reads, those of a full fit bit
    for bit (stage 1, the clipped ``u``, the kernel, the normalization's weights), and skips the
    rest (diagnostics, fingerprint, the stage-2 solve); the scope ends with its block."""
    from genpqr.estimator._estimator_finite import lean_fits

    P, data = _grid_design(n=1000)
    S = P.shape[0]
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S,
                          policy_model=FrequencyClassifier(n_states=S), transition_model="counts")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = clone(model).fit(data)
        with lean_fits():
            lean = clone(model).fit(data)
    assert not hasattr(lean, "diagnostics_") and getattr(lean, "data_fingerprint_", None) is None
    assert lean.stage2_.recovery.q is None
    assert full.diagnostics_ is not None and full.data_fingerprint_ == data.fingerprint()
    for name in ("log_policy", "mu", "g"):
        np.testing.assert_array_equal(getattr(lean.stage2_.recovery, name), getattr(full.stage2_.recovery, name))
    assert (lean.stage2_.kernel.matrix != full.stage2_.kernel.matrix).nnz == 0
    np.testing.assert_array_equal(lean.stage2_.counts, full.stage2_.counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = clone(model).fit(data)  # the scope ended: a full fit again
    assert again.diagnostics_ is not None and again.data_fingerprint_ == data.fingerprint()


def test_fold_fits_share_the_full_fits_given_kernel():
    """Under a given kernel every fold's fit holds the full fit's validated kernel object (not a copy,
    so the folds' factorizations are the plug-in's), with the nuisances of a fit on the array; the
    template keeps it after each fold's copy is made."""
    from genpqr.inference._nuisances import fit_quietly, fold_template

    P, data = _grid_design(n=1000)
    S = P.shape[0]
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S,
                          policy_model=FrequencyClassifier(n_states=S), transition_model=P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = clone(model).fit(data)
        template = fold_template(full)
        half = data.subset(np.arange(data.n // 2))
        fold = fit_quietly(template, half)
        again = fit_quietly(fold_template(full).set_params(transition_model=P), half)  # the array, copied
    assert template.transition_model is full.stage2_.kernel
    assert fold.stage2_.kernel is full.stage2_.kernel
    assert again.stage2_.kernel is not full.stage2_.kernel
    np.testing.assert_array_equal(fold.stage2_.kernel.matrix, again.stage2_.kernel.matrix)
    for name in ("log_policy", "mu", "g"):
        np.testing.assert_array_equal(getattr(fold.stage2_.recovery, name), getattr(again.stage2_.recovery, name))


def test_riesz_regression_estimate_does_not_depend_on_the_targets_asked_with_it():
    """The Riesz loss of a stack of targets is a sum of one term per target, each with its own
    coefficients: each target's ridge is chosen by its own held-out loss, so a target's estimate,
    SE and influence are the same asked alone or with others (one answer per question). A ridge
    shared by the stack made the log-policy value's representer follow the others' (issue 34)."""
    P, data = _grid_design()
    S, K = P.shape[:2]
    pi_fix = np.random.default_rng(3).dirichlet(np.ones(K), size=S)
    targets = [policy_value(pi_fix, reward="log_policy", name="1a"), softmax_value([0, 2], 0.6, reward="log_policy",
                                                                                  name="1b"),
               policy_value(pi_fix, gamma=0.92, name="2")]
    model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S,
                          policy_model=FrequencyClassifier(n_states=S), transition_model=P, clip=(1e-3, 0.999))
    riesz = SplineTransformer(n_knots=6, degree=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint = infer(model, targets, data, cross_fit=3, random_state=0, riesz=riesz, warn=False)
        for j, target in enumerate(targets):
            alone = infer(model, target, data, cross_fit=3, random_state=0, riesz=riesz, warn=False)
            np.testing.assert_allclose(alone.estimate[0], joint.estimate[j], rtol=1e-10, err_msg=target.name)
            np.testing.assert_allclose(alone.std_error[0], joint.std_error[j], rtol=1e-8, err_msg=target.name)
