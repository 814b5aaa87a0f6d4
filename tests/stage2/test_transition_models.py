"""Tabular transition models (counts, shrinkage, low-rank, classifier) and their selection."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression

from genpqr import GenPQR, normalization as N
from genpqr.envs._rust import simulate_buses
from genpqr.envs._tabular import simulate_tabular
from genpqr.exceptions import NotFittedError
from genpqr.stage2 import (ClassifierKernel, CountKernel, LowRankKernel, ShrinkageKernel, TabularMDP,
                           estimate_transitions, select_transition_model)
from genpqr.stage2._transition_selection import AutoTransition
from genpqr.stage2._transition_models import TransitionMoves


def draw_moves(P, n, rng, episode_length=10):
    """``n`` moves from uniformly drawn cells of a (S, K, S) kernel (termination = missing mass)."""
    S, K, _ = P.shape
    s, a = rng.integers(0, S, n), rng.integers(0, K, n)
    cdf = np.cumsum(P[s, a], axis=1)
    s2 = (rng.random(n)[:, None] > cdf).sum(axis=1)
    term = s2 == S
    return TransitionMoves(s, a, np.where(term, 0, s2), S, K, terminated=term, episodes=np.arange(n) // episode_length)


def random_kernel(S, K, rng, termination=0.0, alpha=0.3):
    return rng.dirichlet(np.full(S, alpha), size=(S, K)) * (1.0 - termination)


def fixed_models():
    return [CountKernel(), ShrinkageKernel(concentrations=(2.0, 5.0, 10.0, 1.0)),
            LowRankKernel(rank=3, concentration=5.0, n_groups=0, random_state=0, max_iter=50),
            ClassifierKernel(LogisticRegression(max_iter=200))]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), S=st.integers(2, 7), K=st.integers(1, 3), n=st.integers(20, 120))
def test_rows_sum_to_one_without_termination(seed, S, K, n):
    rng = np.random.default_rng(seed)
    moves = draw_moves(random_kernel(S, K, rng), n, rng)
    for model in fixed_models():
        if np.unique(moves.outcomes).size < 2 and isinstance(model, ClassifierKernel):
            continue
        dense = model.fit(moves).to_dense()
        assert dense.min() >= 0
        np.testing.assert_allclose(dense.sum(axis=2), 1.0, atol=1e-10, err_msg=type(model).__name__)


@pytest.mark.parametrize("model", fixed_models(), ids=lambda m: type(m).__name__)
def test_protocol_agrees_with_the_dense_kernel(model):
    rng = np.random.default_rng(1)
    S, K = 9, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=0.1), 400, rng)
    model.fit(moves)
    D = model.to_dense()
    assert D.shape == (S, K, S) and np.all(D.sum(axis=2) <= 1 + 1e-12)
    v, w = rng.normal(size=(S, 4)), rng.random((S, K))
    np.testing.assert_allclose(model.expect(v), np.einsum("sat,tk->sak", D, v), atol=1e-10)
    np.testing.assert_allclose(model.expect(v[:, 0]), D @ v[:, 0], atol=1e-10)
    np.testing.assert_allclose(model.push(w), np.einsum("sa,sat->t", w, D), atol=1e-10)
    proba = model.predict_proba(moves.states[:5], moves.actions[:5])
    proba = proba.toarray() if hasattr(proba, "toarray") else proba
    np.testing.assert_allclose(proba, D[moves.states[:5], moves.actions[:5]], atol=1e-12)
    term = moves.outcomes == S
    expected = np.where(term, 1 - D[moves.states, moves.actions].sum(axis=1),
                        D[moves.states, moves.actions, np.minimum(moves.outcomes, S - 1)])
    np.testing.assert_allclose(model.move_proba(moves), expected, atol=1e-12)
    s2 = np.where(term, 0, moves.outcomes)
    with np.errstate(divide="ignore"):
        assert model.score(moves.states, moves.actions, s2, term) == pytest.approx(np.mean(np.log(expected)))


def test_count_kernel_equals_estimate_transitions():
    rng = np.random.default_rng(2)
    S, K = 12, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=0.2), 60, rng)  # some cells unvisited
    s2 = np.where(moves.outcomes == S, 0, moves.outcomes)
    for unvisited in ("self", "uniform"):
        kernel, _ = estimate_transitions(moves.states, moves.actions, s2, S, K, terminated=moves.outcomes == S,
                                         unvisited=unvisited)
        model = CountKernel(unvisited).fit(moves)
        assert np.array_equal(model.to_dense(), kernel.dense())
        assert model.kernel().matrix.nnz == kernel.matrix.nnz


def test_shrinkage_with_zero_concentrations_is_counts():
    rng = np.random.default_rng(3)
    S, K = 10, 4
    moves = draw_moves(random_kernel(S, K, rng, termination=0.1), 60, rng)
    counts = CountKernel().fit(moves).to_dense()
    shrunk = ShrinkageKernel(concentrations=(0, 0, 0, 0)).fit(moves).to_dense()
    visited = np.bincount(moves.rows, minlength=S * K).reshape(S, K) > 0
    assert not visited.all()
    np.testing.assert_allclose(shrunk[visited], counts[visited], atol=1e-14)
    # an unvisited cell borrows its state's row (not "stay put")
    s, a = np.argwhere(~visited)[0]
    assert shrunk[s, a].sum() > 0


def test_shrinkage_cross_validates_toward_pooling_on_thin_cells():
    rng = np.random.default_rng(4)
    S, K = 30, 5
    base = random_kernel(S, 1, rng, alpha=0.5)
    P = np.repeat(base, K, axis=1)  # actions do not matter: the state's pooled row is the truth
    moves = draw_moves(P, 600, rng)
    model = ShrinkageKernel(random_state=0).fit(moves)
    c_cell, c_state = model.concentrations_[:2]
    assert c_cell > 5 and c_cell > c_state
    err = np.abs(model.to_dense() - P).sum(axis=2).mean()
    err_counts = np.abs(CountKernel().fit(moves).to_dense() - P).sum(axis=2).mean()
    assert err < 0.7 * err_counts


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), termination=st.sampled_from([0.0, 0.1]),
       log_c=st.lists(st.floats(-3.0, 8.0), min_size=4, max_size=4))
def test_shrinkage_gradient_in_the_concentrations_matches_finite_differences(seed, termination, log_c):
    """The analytic derivatives of the held-out probabilities in the four concentrations (the
    cross-validation's L-BFGS gradient) against central differences; the probabilities are
    ``proba``'s, to the bit."""
    from genpqr.stage2._transition_models import _fold_tables, _ShrunkMoves

    rng = np.random.default_rng(seed)
    S, K = 8, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=termination), 80, rng)
    c = np.exp(np.asarray(log_c))
    for test, table, n_out in _fold_tables(moves, moves.folds(3, 0)):
        shrunk = _ShrunkMoves(table, n_out, moves.outcomes[test])
        p, grad = shrunk.proba_and_gradient(c)
        np.testing.assert_array_equal(p, shrunk.proba(c))
        for j in range(4):
            h = 1e-6 * c[j]
            step = np.eye(4)[j] * h
            numeric = (shrunk.proba(c + step) - shrunk.proba(c - step)) / (2 * h)
            np.testing.assert_allclose(grad[j], numeric, rtol=1e-5, atol=1e-9 / c[j])


def test_low_rank_recovers_a_planted_rank_two_kernel():
    """200,000 moves of a rank-2 kernel over 15 states, 3 actions: every row within 0.03 in
    total variation of the truth."""
    rng = np.random.default_rng(5)
    S, K = 15, 3
    psi = rng.dirichlet(np.full(S, 0.5), size=2)
    phi = rng.dirichlet(np.ones(2), size=(S, K))
    P = phi @ psi
    moves = draw_moves(P, 200_000, rng, episode_length=100)
    model = LowRankKernel(rank=2, concentration=0.0, n_groups=0, random_state=0, max_iter=2000, tol=1e-10).fit(moves)
    tv = 0.5 * np.abs(model.to_dense() - P).sum(axis=2)
    assert tv.max() < 0.03
    chosen = LowRankKernel(ranks=(1, 2, 4), concentrations=(1.0,), n_groups=0, random_state=0, n_splits=3).fit(
        draw_moves(P, 20_000, rng, episode_length=100))
    assert chosen.rank_ == 2


def _simplex(x):
    total = x.sum(axis=-1, keepdims=True)
    return x / np.where(total > 0, total, 1.0)


def _reference_prior(expected, S, K, tilt, groups):
    cube = expected.reshape(S, K, -1)
    overall = _simplex(cube.sum(axis=(0, 1)) + 1.0)
    state = _simplex(cube.sum(axis=1) + overall)
    if not tilt:
        return np.repeat(state, K, axis=0)
    action = _simplex(cube.sum(axis=0) + K * overall)
    ratio = (action / overall)[None]
    if groups is not None:
        within = np.stack([cube[groups == g].sum(axis=0) for g in range(groups.max() + 1)])
        ratio = (_simplex(within + 10.0 * action) / _simplex(within.sum(axis=1) + 10.0 * K * overall)[:, None])[groups]
    return _simplex((state[:, None] * ratio).reshape(S * K, -1))


def reference_low_rank(N, S, K, r, c, tilt, termination, n_groups, seed, smoothing=0.1, max_iter=200, tol=1e-5):
    """The penalized EM of ``LowRankKernel`` written plainly on dense arrays."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    pick = rng.choice(S, size=r, replace=S < r)
    psi = _simplex(_simplex(N.reshape(S, K, S + 1).sum(axis=1)[pick]) + rng.uniform(0.5, 1.5, (r, S + 1)) / (S + 1))
    psi[:, S] *= termination
    phi, groups, previous, seen = np.full((S * K, r), 1.0 / r), None, -np.inf, N > 0
    spread = np.where(np.arange(S + 1) < S + termination, smoothing / (S + termination), 0.0)
    for it in range(1, max_iter + 1):
        if n_groups and it == 20:
            pooled = expected.reshape(S, K, r).sum(axis=1)
            km = KMeans(n_clusters=min(n_groups, S), n_init=3, random_state=int(rng.integers(0, 2**31 - 1)))
            groups, previous = km.fit(_simplex(pooled + 1.0 / r), sample_weight=pooled.sum(axis=1) + 1e-3).labels_, -np.inf
        fit = phi @ psi
        R = np.divide(N, fit, out=np.zeros_like(N), where=seen)
        expected = phi * (R @ psi.T)
        phi, psi = _simplex(expected + c * _reference_prior(expected, S, K, tilt, groups)), _simplex(psi * (phi.T @ R) + spread)
        loglik = np.sum(N[seen] * np.log(fit[seen])) / N.sum()
        if loglik - previous < tol and (not n_groups or it > 20):
            break
        previous = loglik
    return phi, psi, it


@pytest.mark.parametrize("rank, concentration, n_groups, tilt, termination",
                         [(3, 5.0, 0, True, 0.1), (5, 10.0, 4, True, 0.1), (4, 2.0, 0, False, 0.0), (5, 0.0, 0, True, 0.05),
                          (7, 1.0, 5, True, 0.0)])
def test_low_rank_em_matches_a_plain_reference(rank, concentration, n_groups, tilt, termination):
    """The EM (sparse ratios, in-place updates) agrees with a plain dense transcription to 1e-10."""
    rng = np.random.default_rng(rank)
    S, K = 25, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=termination), 1500, rng)
    model = LowRankKernel(rank=rank, concentration=concentration, n_groups=n_groups, action_tilt=tilt,
                          random_state=7).fit(moves)
    phi, psi, n_iter = reference_low_rank(model.counts_.toarray(), S, K, rank, concentration, tilt,
                                          bool(np.any(moves.outcomes == S)), n_groups, 7)
    assert model.n_iter_ == n_iter
    np.testing.assert_allclose(model.phi_, phi, atol=1e-10)
    np.testing.assert_allclose(model.psi_, psi, atol=1e-10)


def test_low_rank_cross_validation_warm_starts_its_later_settings():
    """The concentration and group settings start from the previous stage's fit on each fold: a
    fit started from a converged estimate at the same settings stops after a few iterations
    near it; the cross-validation fills its grid as before."""
    from genpqr.stage2._transition_lowrank import fit_low_rank

    rng = np.random.default_rng(8)
    S, K = 20, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=0.1), 3000, rng)
    counts = moves.counts()
    phi, psi, cold = fit_low_rank(counts, S, K, 4, 5.0, random_state=0)
    phi2, psi2, warm = fit_low_rank(counts, S, K, 4, 5.0, start=(phi, psi), random_state=0)
    assert warm <= 5 < cold
    np.testing.assert_allclose(phi2 @ psi2, phi @ psi, atol=1e-3)
    model = LowRankKernel(ranks=(2, 4), concentrations=(1.0, 10.0, 100.0), group_counts=(0, 3), random_state=0).fit(moves)
    # every setting of the climb was tried: scored on every fold, or dropped after a fold (cv_stopped_)
    assert set(model.cv_scores_) | set(model.cv_stopped_) == {(2, 10.0, 0), (4, 10.0, 0), (model.rank_, 1.0, 0),
                                                              (model.rank_, 100.0, 0),
                                                              (model.rank_, model.concentration_, 3)}
    assert not set(model.cv_scores_) & set(model.cv_stopped_)
    assert all(np.isfinite(v) for v in model.cv_scores_.values())
    assert all(0 < k < model.n_splits for k in model.cv_stopped_.values())


def test_classifier_over_increments():
    rng = np.random.default_rng(6)
    S, K, n = 40, 2, 3000
    s, a = rng.integers(0, S - 3, n), rng.integers(0, K, n)
    s2 = s + rng.choice(3, size=n, p=[0.2, 0.5, 0.3])
    model = ClassifierKernel(LogisticRegression(max_iter=500), target="increment").fit(
        TransitionMoves(s, a, s2, S, K, episodes=np.arange(n) // 10))
    row = model.predict_proba([10], [1])[0]
    np.testing.assert_allclose(row[10:13], [0.2, 0.5, 0.3], atol=0.05)
    assert row.sum() == pytest.approx(1.0) and model.to_dense()[S - 1, 0, S - 1] == pytest.approx(1.0)


def test_selection_uses_held_out_folds_only():
    """Counts maximize the in-sample likelihood; on thin cells the held-out comparison
    prefers shrinkage, and says why."""
    rng = np.random.default_rng(7)
    S, K = 40, 5
    P = np.repeat(random_kernel(S, 1, rng, alpha=0.3), K, axis=1)
    moves = draw_moves(P, 800, rng)
    selection = select_transition_model(moves, {"counts": CountKernel(), "shrinkage": ShrinkageKernel(random_state=0)},
                                        random_state=0)
    in_sample = {name: np.mean(np.log(np.maximum(m.fit(moves).move_proba(moves), 1e-300)))
                 for name, m in (("counts", CountKernel()), ("shrinkage", selection.model))}
    assert in_sample["counts"] > in_sample["shrinkage"]  # an in-sample choice would be counts
    assert selection.chosen == "shrinkage"
    rows = {r["name"]: r for r in selection.scores}
    assert rows["counts"]["unexplained"] > 0.2 and rows["shrinkage"]["unexplained"] == 0
    assert rows["shrinkage"]["difference"] > 2 * rows["shrinkage"]["standard_error"]
    assert "shrinkage" in selection.summary() and "counts" in selection.summary()


def test_selection_keeps_counts_on_well_filled_cells():
    rng = np.random.default_rng(8)
    S, K = 5, 2
    moves = draw_moves(random_kernel(S, K, rng, alpha=2.0), 20_000, rng)
    selection = select_transition_model(moves, random_state=0)
    assert selection.chosen == "counts", selection.summary()


def test_auto_chooses_counts_on_a_bus_panel():
    panel = simulate_buses(n_buses=50, n_periods=120, random_state=0).transitions
    auto = AutoTransition(random_state=0).fit(panel, n_states=175)
    assert auto.selection_.chosen == "counts", auto.selection_.summary()
    base = GenPQR(N.anchor_action("keep"), gamma=0.975, q_model="exact", n_states=175, random_state=0).fit(panel)
    assert base.transition_selection_.chosen == "counts" and base.transition_model_ is None
    for given in (CountKernel(), "counts", None):
        other = GenPQR(N.anchor_action("keep"), gamma=0.975, q_model="exact", n_states=175, random_state=0,
                       transition_model=given).fit(panel)
        np.testing.assert_array_equal(base.stage2_.recovery.reward, other.stage2_.recovery.reward)


def test_a_fitted_model_feeds_genpqr():
    rng = np.random.default_rng(9)
    S, K = 8, 3
    mdp = TabularMDP.create(random_kernel(S, K, rng, termination=0.05), 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, np.full((S, K), 1 / K), 100, 10, random_state=0)
    model = ShrinkageKernel(concentrations=(3.0, 3.0, 3.0, 1.0))
    fit = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=model).fit(data)
    np.testing.assert_allclose(fit.stage2_.kernel.dense(), model.fit(data, n_states=S).to_dense(), atol=1e-14)
    assert not hasattr(ShrinkageKernel(), "n_states_")


def test_a_model_above_the_dense_limit_feeds_genpqr_matrix_free(monkeypatch):
    """Above the dense limit a transition model reaches GenPQR as itself (expect/push, a
    KernelOperator) and the rewards equal the dense kernel's to 1e-8."""
    import genpqr.stage2._transition_models as models

    rng = np.random.default_rng(9)
    S, K = 8, 3
    mdp = TabularMDP.create(random_kernel(S, K, rng, termination=0.05), 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, np.full((S, K), 1 / K), 100, 10, random_state=0)
    model = ShrinkageKernel(concentrations=(3.0, 3.0, 3.0, 1.0))
    dense = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=model).fit(data)
    monkeypatch.setattr(models, "DENSE_KERNEL_MAX_BYTES", 0)
    assert model.fit(data, n_states=S).kernel() is model
    free = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=model).fit(data)
    assert type(free.stage2_.kernel).__name__ == "KernelOperator"
    np.testing.assert_allclose(free.stage2_.recovery.reward, dense.stage2_.recovery.reward, atol=1e-8)


def test_errors_name_the_argument():
    rng = np.random.default_rng(10)
    moves = draw_moves(random_kernel(4, 2, rng), 50, rng)
    with pytest.raises(NotFittedError, match="not fitted"):
        CountKernel().expect(np.zeros(4))
    with pytest.raises(ValueError, match="concentrations must be 4 non-negative"):
        ShrinkageKernel(concentrations=(1, 2)).fit(moves)
    with pytest.raises(ValueError, match="rank must be a positive integer"):
        LowRankKernel(rank=0).fit(moves)
    with pytest.raises(ValueError, match="n_groups must be 'cv', None or a non-negative integer"):
        LowRankKernel(rank=1, concentration=1.0, n_groups=-2).fit(moves)
    with pytest.raises(ValueError, match="target must be one of"):
        ClassifierKernel(target="delta").fit(moves)
    with pytest.raises(ValueError, match="max_bytes"):
        CountKernel().fit(moves).to_dense(max_bytes=10)
    with pytest.raises(ValueError, match="values must have shape"):
        CountKernel().fit(moves).expect(np.zeros(5))
    with pytest.raises(ValueError, match="weights must have shape"):
        CountKernel().fit(moves).push(np.zeros(4))
    with pytest.raises(TypeError, match="X must be genpqr Transitions"):
        CountKernel().fit(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="at least 2 episodes"):
        select_transition_model(TransitionMoves([0, 1], [0, 1], [1, 0], 2, 2))


# ---------------------------------------------------------------------------- the docs page
@pytest.mark.slow
@pytest.mark.usefixtures("checkout_unchanged")
def test_choosing_a_transition_model_page_runs(tmp_path, monkeypatch, capsys):
    """Every python block of docs/choosing_a_transition_model.md in one namespace, then its
    command; the page's claims hold."""
    import re
    import shlex

    from genpqr.app.cli import main

    from ..doc_warnings import ROOT, check_warnings, printed, recording

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "choosing_a_transition_model.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    ns: dict = {}
    with recording() as found:
        for block in blocks:
            exec(compile(block, "docs/choosing_a_transition_model.md", "exec"), ns)
    check_warnings("docs/choosing_a_transition_model.md", "python", found)
    selection, errors = ns["selection"], ns["errors"]
    rows = {r["name"]: r for r in selection.scores}
    assert selection.chosen == "lowrank" and selection.model.rank_ == 20
    assert 0.4 < rows["counts"]["unexplained"] < 0.6 and rows["shrinkage"]["difference"] > 4
    assert errors["counts"] == pytest.approx(3.6, abs=0.1) and errors["lowrank"] == pytest.approx(1.3, abs=0.1)
    command = re.search(r"```bash\n(genpqr fit .*?)```", text, re.S).group(1).replace("\\\n", " ")
    command = command.replace('"$(python -m genpqr.datasets choices)"', str(datasets_path("choices")))
    capsys.readouterr()
    with recording() as found:
        assert main(shlex.split(command)[1:]) == 0
    from genpqr.app.console import unwrap

    console = unwrap(capsys.readouterr().out)
    check_warnings("docs/choosing_a_transition_model.md", "shell", found + printed(console))
    line = re.search(r"transition model: counts \(0\.1% of the moves .*?, at most 1%: cells are well filled, no "
                     r"held-out comparison\)", text.replace("\n", " "))
    assert line and line.group(0) in console


def datasets_path(name):
    from genpqr import datasets

    return datasets.path(name)



def test_genpqr_refuses_another_string():
    panel = simulate_buses(n_buses=5, n_periods=20, random_state=1).transitions
    with pytest.raises(ValueError, match="transition_model must be 'auto', 'counts', None"):
        GenPQR(N.anchor_action("keep"), q_model="exact", transition_model="smooth").fit(panel)


def test_bootstrap_replicates_hold_the_full_sample_choice(monkeypatch):
    """``transition_model="auto"``: the replicates refit the chosen model with its settings fixed
    instead of choosing again."""
    import genpqr.stage2._transition_spec as spec
    from genpqr.evaluation import bootstrap

    rng = np.random.default_rng(3)
    S, K = 30, 3
    mdp = TabularMDP.create(random_kernel(S, K, rng, termination=0.05), 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, np.full((S, K), 1 / K), 60, 6, random_state=0)
    model = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, random_state=0).fit(data)
    chosen = model.transition_selection_.chosen
    assert chosen != "counts", model.transition_selection_.summary()
    calls = []
    monkeypatch.setattr(spec, "select_transition_model", lambda *a, **k: calls.append(1))
    result = bootstrap(model, data, n_boot=3, fitted=model, random_state=0, progress=False)
    assert not calls and np.all(np.isfinite(result.std_error))
    fixed = model.transition_model_.fixed_copy().get_params()
    assert all(v is not None for k, v in fixed.items() if k in ("rank", "concentration", "concentrations"))


def test_auto_keeps_counts_on_weighted_rows_and_one_episode():
    rng = np.random.default_rng(4)
    S, K = 30, 3
    mdp = TabularMDP.create(random_kernel(S, K, rng, termination=0.05), 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, np.full((S, K), 1 / K), 1, 200, random_state=0)
    model = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, random_state=0).fit(data)
    assert model.transition_selection_.chosen == "counts" and "one episode" in str(model.summary())


def test_auto_without_random_state_is_seed_zero():
    """The exact path's reward does not change from run to run: None folds are seed 0 (genpqr fit's default)."""
    rng = np.random.default_rng(3)
    S, K = 30, 3
    mdp = TabularMDP.create(random_kernel(S, K, rng, termination=0.05), 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, np.full((S, K), 1 / K), 60, 6, random_state=0)
    fits = [GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, random_state=seed).fit(data)
            for seed in (None, None, 0)]
    assert fits[0].transition_selection_.chosen != "counts"
    for other in fits[1:]:
        np.testing.assert_array_equal(fits[0].stage2_.recovery.reward, other.stage2_.recovery.reward)
