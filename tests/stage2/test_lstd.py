"""Closed-form Q-evaluation (genpqr.stage2): exact on tabular problems, chunk-additive statistics."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from genpqr import stage2
from genpqr.data import ActionTable, from_arrays
from genpqr.exceptions import ActionFeatureError, ActionTableError
from genpqr.estimator import GenPQR
from genpqr.stage2 import LSTDQ, PolicyFeatures, fourier_features, onehot_features, spline_features
from genpqr.stage2._lstd import BellmanProblem, BellmanStatistics
from genpqr.normalization import anchor_action, mean_zero, weighted
from genpqr.stage1 import FrequencyClassifier

GAMMA = 0.9


def _tabular_case(seed, S=6, K=3, reps=4, terminate=0.1):
    """Transitions covering every (s, a) cell ``reps`` times, some terminated."""
    rng = np.random.default_rng(seed)
    s = np.repeat(np.arange(S), K * reps)
    a = np.tile(np.repeat(np.arange(K), reps), S)
    s2 = rng.integers(0, S, size=s.size)
    term = rng.random(s.size) < terminate
    u = np.log(rng.dirichlet(np.ones(K), size=S))
    return s, a, s2, term, u


def _problem(s, a, s2, term, u, mu, g, gamma=GAMMA):
    X, X2 = s[:, None].astype(float), s2[:, None].astype(float)
    idx = lambda Z: np.asarray(Z)[:, 0].astype(int)  # noqa: E731
    return BellmanProblem(X, a, X2, 1.0 - term, u[s, a] - g[s], mu[s2], gamma,
                          next_reward=np.sum(mu[s2] * (u[s2] - g[s2][:, None]), axis=1),
                          log_policy=lambda Z: u[idx(Z)], offset=lambda Z: g[idx(Z)])


@pytest.mark.parametrize("target", ["continuation", "q"])
@pytest.mark.parametrize("seed", [0, 1])
def test_onehot_lstd_equals_exact_tabular_solve(seed, target):
    S, K = 6, 3
    s, a, s2, term, u = _tabular_case(seed, S, K)
    rng = np.random.default_rng(100 + seed)
    norm = weighted(rng.dirichlet(np.ones(K), size=S), rng.normal(size=S))
    kernel, _ = stage2.estimate_transitions(s, a, s2, S, K, terminated=term)
    exact = stage2.recover_reward(u, kernel, GAMMA, norm)
    model = LSTDQ(features=onehot_features(S), alpha=0.0, fit_intercept=False, target=target)
    model.fit_bellman(_problem(s, a, s2, term, u, exact.mu, exact.g))
    grid = np.arange(S, dtype=float)[:, None]
    np.testing.assert_allclose(model.predict_q(grid), exact.q, rtol=0, atol=1e-8)
    # the sample residual is not zero (single transitions), but it averages to zero in every cell
    assert len(model.history_.bellman_residual) == 1 and np.isfinite(model.history_.bellman_residual[0])


def test_many_iterations_converge_to_the_fixed_point():
    S, K = 5, 2
    s, a, s2, term, u = _tabular_case(3, S, K)
    mu, g = np.full((S, K), 1.0 / K), np.zeros(S)
    problem = _problem(s, a, s2, term, u, mu, g, gamma=0.5)
    fixed = LSTDQ(features=onehot_features(S), alpha=0.0, fit_intercept=False).fit_bellman(problem)
    iterated = LSTDQ(features=onehot_features(S), alpha=0.0, fit_intercept=False, n_iterations=80).fit_bellman(problem)
    few = LSTDQ(features=onehot_features(S), alpha=0.0, fit_intercept=False, n_iterations=2).fit_bellman(problem)
    grid = np.arange(S, dtype=float)[:, None]
    np.testing.assert_allclose(iterated.predict_q(grid), fixed.predict_q(grid), atol=1e-12)
    assert np.abs(few.predict_q(grid) - fixed.predict_q(grid)).max() > 1e-3


def test_genpqr_lstd_equals_exact_path():
    S, K = 6, 3
    s, a, s2, term, _ = _tabular_case(4, S, K, reps=6, terminate=0.0)
    rng = np.random.default_rng(4)
    a = rng.integers(0, K, size=s.size)
    a[: S * K] = np.repeat(np.arange(K), S)  # every cell visited
    s[: S * K] = np.tile(np.arange(S), K)
    data = from_arrays(s[:, None], a, s2[:, None], episode_ids=np.arange(s.size))
    for norm in (anchor_action(0), mean_zero()):
        kw = dict(normalization=norm, gamma=GAMMA, policy_model=FrequencyClassifier(n_states=S), clip=(0.01, 0.99))
        exact = GenPQR(q_model="exact", n_states=S, transition_model="counts", **kw).fit(data)
        lstd = GenPQR(q_model=LSTDQ(features="onehot", n_states=S, alpha=0.0, fit_intercept=False), **kw).fit(data)
        grid = np.arange(S)[:, None]
        np.testing.assert_allclose(lstd.reward(grid), exact.reward(grid), atol=1e-8)
        np.testing.assert_allclose(lstd.continuation(grid), exact.continuation(grid), atol=1e-8)
        assert lstd.diagnostics_.solver == "lstd"


def _continuous_problem(seed, n=600, d=2, K=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X2 = X + 0.1 * rng.normal(size=(n, d))
    mu = rng.dirichlet(np.ones(K), size=n)
    return BellmanProblem(X, rng.integers(0, K, n), X2, (rng.random(n) > 0.05).astype(float), rng.normal(size=n), mu,
                          GAMMA)


@pytest.mark.parametrize("encoding", ["per_action", "joint"])
def test_chunked_accumulation_equals_one_shot(encoding):
    problem = _continuous_problem(0)
    kw = dict(features=fourier_features(20, 0.5, random_state=0), encoding=encoding, target="q", alpha=1e-3)
    one = LSTDQ(chunk_size=10_000, **kw).fit_bellman(problem)
    chunked = LSTDQ(chunk_size=37, **kw).fit_bellman(problem)
    for name in ("gram", "cross", "b"):
        ref = getattr(one.statistics_, name)
        np.testing.assert_allclose(getattr(chunked.statistics_, name), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(chunked.coef_, one.coef_, rtol=1e-10, atol=1e-10)
    # partial_fit over chunks with the same (pre-fitted) feature map gives the same statistics
    stream = LSTDQ(**kw)
    for start in range(0, problem.n, 100):
        stream.partial_fit(problem.rows(start, start + 100))
    assert stream.statistics_.n_rows == problem.n
    np.testing.assert_allclose(stream.solve().predict_q(problem.states[:5]).shape, (5, 3))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 59), encoding=st.sampled_from(["blocks", "dense"]),
       unweighted=st.sampled_from([None, 0, 2]))
def test_statistics_are_additive_over_any_split(seed, cut, encoding, unweighted):
    rng = np.random.default_rng(seed)
    n, q, K = 60, 4, 3
    phi, nphi, w = rng.normal(size=(n, q)), rng.normal(size=(n, q)), rng.random((n, K))
    if unweighted is not None:  # an action mu never weighs (skipped by the block accumulation)
        w[:, unweighted] = 0.0
    acts, y = rng.integers(0, K, n), rng.normal(size=n)

    def stats(rows):
        out = BellmanStatistics(K * q if encoding == "blocks" else q)
        if encoding == "blocks":
            return out.accumulate_blocks(phi[rows], acts[rows], nphi[rows], w[rows], y[rows])
        return out.accumulate(phi[rows], nphi[rows], y[rows])

    whole = stats(slice(None))
    parts = stats(slice(0, cut)).merge(stats(slice(cut, None)))
    assert parts.n_rows == whole.n_rows == n
    for name in ("gram", "cross", "b"):
        np.testing.assert_allclose(getattr(parts, name), getattr(whole, name), rtol=1e-12, atol=1e-12)
    if encoding == "blocks":  # the block accumulation equals the dense one on the Kronecker features
        dense = np.zeros((n, K * q))
        for a in range(K):
            dense[acts == a, a * q:(a + 1) * q] = phi[acts == a]
        nxt = (w[:, :, None] * nphi[:, None, :]).reshape(n, K * q)
        ref = BellmanStatistics(K * q).accumulate(dense, nxt, y)
        np.testing.assert_allclose(whole.A, ref.A, rtol=1e-12, atol=1e-12)


def test_genpqr_lstd_on_continuous_states_with_policy_features():
    from genpqr.envs import make_synthetic_data
    from genpqr.models._nn import MLPClassifier

    data = make_synthetic_data(0, 60)
    policy = MLPClassifier(hidden_layer_sizes=(16,), max_epochs=5, random_state=0)
    for features in (None, PolicyFeatures(log_proba=True), spline_features(), "rff"):
        est = GenPQR(normalization=anchor_action(0), q_model=LSTDQ(features=features, random_state=0),
                     policy_model=policy, random_state=0).fit(data.train)
        r = est.reward(data.test.states, data.test.actions)
        assert np.all(np.isfinite(r)) and est.diagnostics_.solver == "lstd"
        np.testing.assert_allclose(est.reward(data.test.states)[:, 0], 0.0, atol=1e-10)  # anchor normalization
    est = GenPQR(normalization=anchor_action(0), q_model="lstd", policy_model=policy, random_state=0).fit(data.train)
    assert est.stage2_.fqe.features_.__class__.__name__ == "PolicyFeatures"
    v = est.policy_value_difference(mean_zero(), anchor_action(0), states=data.test.states[:4])
    assert v.shape == (4,) and np.all(np.isfinite(v))


def test_bad_arguments_are_named():
    problem = _continuous_problem(1)
    with pytest.raises(ValueError, match="encoding"):
        LSTDQ(encoding="kron", target="q").fit_bellman(problem)
    with pytest.raises(ValueError, match="alpha"):
        LSTDQ(alpha=-1.0, target="q").fit_bellman(problem)
    with pytest.raises(ValueError, match="n_iterations"):
        LSTDQ(n_iterations=0, target="q").fit_bellman(problem)
    with pytest.raises(ValueError, match="continuation"):
        LSTDQ(features="spline").fit_bellman(problem)
    with pytest.raises(ValueError, match="features"):
        LSTDQ(features="wavelets", target="q").fit_bellman(problem)
    with pytest.raises(ValueError, match="policy"):
        LSTDQ(features="policy", target="q").fit_bellman(problem)
    with pytest.raises(TypeError, match="BellmanProblem"):
        LSTDQ().fit_bellman((1, 2))
    with pytest.raises(ValueError, match="q_model"):
        GenPQR(q_model="lsdt").fit(from_arrays(np.zeros((4, 1)), [0, 1, 0, 1], np.zeros((4, 1))))


def test_cli_fit_with_lstd(tmp_path, capsys):
    import pandas as pd

    import genpqr
    from tests.app.test_workflow import fit_cli

    rng = np.random.default_rng(1)
    n_ep, T = 40, 10
    n = n_ep * T
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    act = np.where(rng.random(n) < 1 / (1 + np.exp(-x1)), "go", "wait")
    frame = pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep), "x1": x1,
                          "x2": x2, "choice": act})
    frame.to_csv(tmp_path / "c.csv", index=False)
    flags = [tmp_path / "c.csv", "--episode", "ep", "--time", "t", "--state", "x1,x2", "--action", "choice",
             "--gamma", 0.8, "--normalization", "anchor:wait", "--q-model", "lstd", "--out", tmp_path / "o", "--quiet"]
    code, _, err = fit_cli(flags, capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    np.testing.assert_allclose(r["reward_wait"], 0, atol=1e-8)
    model = genpqr.load(tmp_path / "o" / "model.joblib")
    assert model.diagnostics_.solver == "lstd"
    np.testing.assert_allclose(model.reward(frame[["x1", "x2"]].to_numpy(), frame["choice"]), r["reward"])


def test_mlp_hidden_representation_spans_the_logits():
    from scipy.special import log_softmax

    from genpqr.models._nn import MLPClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int) + (X[:, 1] > 1)
    clf = MLPClassifier(hidden_layer_sizes=(8, 6), max_epochs=3, random_state=0).fit(X, y)
    h = clf.hidden_representation(X)
    assert h.shape == (300, 6) and (h >= 0).all()
    W, b = (t.double().numpy() for t in (clf.network_.weights[-1], clf.network_.biases[-1]))
    np.testing.assert_allclose(log_softmax(h @ W.T + b, axis=1), clf.predict_log_proba(X), atol=1e-10)


@pytest.mark.parametrize("target", ["continuation", "q"])
def test_action_feature_lstd_with_onehot_codes_equals_the_exact_solve(target):
    """``encoding="action_features"`` with one-hot action codes ``x_a = e_a`` and one-hot states:
    ``phi(s) (x) e_a`` is the per-action encoding, so the solve is the exact tabular one (1e-8)."""
    S, K = 6, 3
    s, a, s2, term, u = _tabular_case(5, S, K)
    rng = np.random.default_rng(7)
    norm = weighted(rng.dirichlet(np.ones(K), size=S), rng.normal(size=S))
    kernel, _ = stage2.estimate_transitions(s, a, s2, S, K, terminated=term)
    exact = stage2.recover_reward(u, kernel, GAMMA, norm)
    problem = _problem(s, a, s2, term, u, exact.mu, exact.g)
    kw = dict(features=onehot_features(S), alpha=0.0, fit_intercept=False, target=target)
    model = LSTDQ(encoding="action_features", action_features=np.eye(K), **kw).fit_bellman(problem)
    grid = np.arange(S, dtype=float)[:, None]
    np.testing.assert_allclose(model.predict_q(grid), exact.q, rtol=0, atol=1e-8)
    assert model.coef_.shape == (S, K)
    # the action features may come with the problem instead (as GenPQR passes the data's table)
    problem.action_features = np.eye(K)
    from_problem = LSTDQ(encoding="action_features", **kw).fit_bellman(problem)
    np.testing.assert_allclose(from_problem.predict_q(grid), exact.q, rtol=0, atol=1e-8)


def test_action_feature_lstd_shares_across_actions_and_predicts_a_never_taken_action():
    """Actions with a scalar feature ``lam`` = 0, 1 (logged) and 0.5 (never taken),
    ``P(.|s, a) = lam_a P1(.|s) + (1 - lam_a) P0(.|s)`` and a reward linear in ``lam``: Q is
    ``q0(s) + lam_a q1(s)``, in the span of ``onehot(s) (x) [1, lam_a]``. P0 and P1 are quarters and
    every state logs four rows of each taken action, so the data reproduce them exactly and the
    solve is the true Q on all three actions (1e-9), the never-taken one included."""
    rng = np.random.default_rng(7)
    S, lam = 5, np.array([0.0, 1.0, 0.5])
    nxt1, nxt0 = rng.integers(0, S, size=(S, 4)), rng.integers(0, S, size=(S, 4))
    P1 = np.stack([np.bincount(r, minlength=S) / 4 for r in nxt1])
    P0 = np.stack([np.bincount(r, minlength=S) / 4 for r in nxt0])
    P = lam[None, :, None] * P1[:, None, :] + (1 - lam)[None, :, None] * P0[:, None, :]
    reward = rng.normal(size=(S, 1)) + lam[None, :] * rng.normal(size=(S, 1))
    sol = stage2.soft_optimal_solution(reward, P, GAMMA)
    for norm in (mean_zero(g=0.1), anchor_action(0)):
        rec = stage2.recover_reward(sol.log_policy, P, GAMMA, norm)
        u = rec.log_policy
        s = np.repeat(np.arange(S), 8)
        a = np.tile(np.repeat([0, 1], 4), S)
        s2 = np.where(a == 1, nxt1[s, np.tile(np.arange(4), 2 * S)], nxt0[s, np.tile(np.arange(4), 2 * S)])
        problem = _problem(s, a, s2, np.zeros(s.size, bool), u, rec.mu, rec.g)
        problem.action_features = np.column_stack([np.ones(3), lam])
        for target in ("continuation", "q"):
            model = LSTDQ(features=onehot_features(S), encoding="action_features", alpha=0.0, fit_intercept=False,
                          target=target).fit_bellman(problem)
            np.testing.assert_allclose(model.predict_q(np.arange(S, dtype=float)[:, None]), rec.q, rtol=0, atol=1e-9)


def test_action_feature_lstd_named_errors():
    s, a, s2, term, u = _tabular_case(0, 4, 2)
    problem = _problem(s, a, s2, term, u, np.full((4, 2), 0.5), np.zeros(4))
    kw = dict(features=onehot_features(4), encoding="action_features")
    with pytest.raises(ActionTableError, match="needs action features"):
        LSTDQ(**kw).fit_bellman(problem)
    with pytest.raises(ActionTableError, match="3 rows but the problem has 2 actions"):
        LSTDQ(action_features=np.eye(3), **kw).fit_bellman(problem)
    with pytest.raises(ActionFeatureError, match="NaN"):
        LSTDQ(action_features=np.array([[1.0, np.nan], [0.0, 1.0]]), **kw).fit_bellman(problem)
    with pytest.raises(ValueError, match="encoding must be one of"):
        LSTDQ(features=onehot_features(4), encoding="pairs").fit_bellman(problem)


def test_genpqr_lstd_on_a_one_hot_action_table_equals_the_exact_path():
    """GenPQR(q_model="lstd" or an LSTDQ, encoding="action_features") on data whose action table
    holds one-hot codes reproduces the exact tabular path to 1e-8."""
    S, K = 6, 3
    s, a, s2, term, _ = _tabular_case(4, S, K, reps=6, terminate=0.0)
    rng = np.random.default_rng(4)
    a = rng.integers(0, K, size=s.size)
    a[: S * K] = np.repeat(np.arange(K), S)  # every cell visited
    s[: S * K] = np.tile(np.arange(S), K)
    data = from_arrays(s[:, None], a, s2[:, None], episode_ids=np.arange(s.size),
                       action_features=ActionTable(np.arange(K), np.eye(K)))
    kw = dict(normalization=anchor_action(0), gamma=GAMMA, policy_model=FrequencyClassifier(n_states=S),
              clip=(0.01, 0.99))
    exact = GenPQR(q_model="exact", n_states=S, transition_model="counts", **kw).fit(data)
    lstd = GenPQR(q_model=LSTDQ(features="onehot", n_states=S, alpha=0.0, fit_intercept=False,
                                encoding="action_features"), **kw).fit(data)
    grid = np.arange(S)[:, None]
    np.testing.assert_allclose(lstd.reward(grid), exact.reward(grid), atol=1e-8)
    np.testing.assert_allclose(lstd.continuation(grid), exact.continuation(grid), atol=1e-8)
    default = GenPQR(q_model=LSTDQ(encoding="action_features"), **kw).fit(data)
    assert default.diagnostics_.solver == "lstd" and np.all(np.isfinite(default.reward(grid)))
