"""What makes the transition selection cost little without changing its answer: fold statistics
by subtraction, the low-rank EM on observed cells, the climbed and raced grids of its
cross-validation, the refits its own folds already decide, the fixed copy that reuses its fit,
and the progress bar."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import genpqr.stage2._transition_lowrank as lowrank
import genpqr.stage2._transition_selection as selection_module
from genpqr.stage2 import CountKernel, LowRankKernel, ShrinkageKernel, select_transition_model
from genpqr.stage2._transition_models import TransitionMoves
from genpqr.stage2._transition_models import KernelModel

from .test_transition_models import draw_moves, random_kernel, reference_low_rank


def low_rank_moves(S=40, K=5, rank=3, n=3000, seed=0, episode_length=10):
    """Moves from a rank-``rank`` kernel whose mixture weights differ by cell (not by state):
    pooling a state's actions is wrong there, sharing next-state profiles is right."""
    rng = np.random.default_rng(seed)
    psi = rng.dirichlet(np.full(S, 0.2), size=rank) * 0.95
    phi = rng.dirichlet(np.full(rank, 0.3), size=(S, K))
    return draw_moves(np.einsum("sak,kt->sat", phi, psi), n, rng, episode_length)


# ---------------------------------------------------------------------------- fold statistics
@pytest.mark.parametrize("model", [CountKernel(), CountKernel(unvisited="uniform"), ShrinkageKernel(random_state=0),
                                   ShrinkageKernel(concentrations=(2.0, 5.0, 10.0, 1.0))],
                         ids=["counts", "counts-uniform", "shrinkage-cv", "shrinkage-fixed"])
def test_held_out_by_fold_statistics_equals_refits(model):
    """A fold's counts are the total less the held-out fold's: the held-out probabilities equal
    those of refits on each fold's training moves, bit for bit."""
    rng = np.random.default_rng(0)
    moves = draw_moves(random_kernel(12, 3, rng, termination=0.1), 500, rng)
    folds = moves.folds(5, 0)
    fitted = type(model)(**model.get_params())
    fast = fitted._fit_held_out(moves, folds)  # shrinkage-cv: from its cross-validation's tables (the same folds)
    slow = KernelModel._fit_held_out(type(model)(**model.get_params()), moves, folds)
    np.testing.assert_array_equal(fast, slow)
    assert not {"_cv_tables", "_keep_tables"} & set(vars(fitted))  # nothing of the comparison kept on the model
    other = moves.folds(4, 1)  # folds not its cross-validation's: built afresh
    np.testing.assert_array_equal(fitted._fit_held_out(moves, other),
                                  KernelModel._fit_held_out(type(model)(**model.get_params()), moves, other))


def test_fold_counts_are_the_training_moves_counts():
    rng = np.random.default_rng(1)
    moves = draw_moves(random_kernel(9, 2, rng, termination=0.2), 300, rng)
    folds = moves.folds(3, 4)
    for (train, _), counts in zip(folds, moves.fold_counts(folds)):
        np.testing.assert_array_equal(counts.toarray(), moves.subset(train).counts().toarray())


# ---------------------------------------------------------------------------- the EM on observed cells
@pytest.mark.parametrize("n_groups, tilt, concentration", [(0, True, 5.0), (4, True, 10.0), (0, False, 2.0),
                                                           (0, True, 0.0)])
def test_low_rank_em_with_unobserved_cells_matches_the_plain_reference(n_groups, tilt, concentration):
    """Half the cells never observed: their weights, filled in after the last iteration from the
    prior, equal those of the plain EM over every cell."""
    rng = np.random.default_rng(11)
    S, K = 25, 4
    P = random_kernel(S, K, rng, termination=0.1)
    full = draw_moves(P, 3000, rng)
    keep = (full.states * K + full.actions) % 2 == 0
    moves = full.subset(np.flatnonzero(keep))
    model = LowRankKernel(rank=4, concentration=concentration, n_groups=n_groups, action_tilt=tilt,
                          random_state=7).fit(moves)
    assert np.count_nonzero(model.visits_) <= S * K // 2
    phi, psi, n_iter = reference_low_rank(model.counts_.toarray(), S, K, 4, concentration, tilt, True, n_groups, 7)
    assert model.n_iter_ == n_iter
    np.testing.assert_allclose(model.phi_, phi, atol=1e-10)
    np.testing.assert_allclose(model.psi_, psi, atol=1e-10)


def test_denominators_by_one_sparse_product_are_the_gathered_dot_products():
    """``_Ratios.update``: each non-zero's ``phi[row] . psi[:, col]`` from one product with the
    gathered profiles, equal to the gathered rows' dot products up to the order of the sum."""
    rng = np.random.default_rng(3)
    moves = low_rank_moves(S=20, K=4, n=1500, seed=2)
    counts = moves.counts()
    cells = counts[np.flatnonzero(np.diff(counts.indptr) > 0)]
    for rank in (1, 3, 7):
        ratios = lowrank._Ratios(cells, rank)
        phi = rng.dirichlet(np.ones(rank), size=cells.shape[0])
        psiT = rng.dirichlet(np.ones(counts.shape[1]), size=rank).T.copy()
        denom = ratios.update(phi, psiT)
        reference = np.einsum("jk,jk->j", phi[ratios.rows], psiT[ratios.cols])
        np.testing.assert_allclose(denom, reference, rtol=1e-14, atol=0)
        np.testing.assert_allclose(ratios.R.data, ratios.n / reference, rtol=1e-14)


@pytest.mark.parametrize("kind", ["ones", "integers", "large integers", "weights", "tiny"])
def test_the_em_log_likelihood_with_fewer_logarithms_is_the_weighted_sum(kind):
    """``_WeightedLogSum``: ``sum_j n_j log d_j`` by levels of products of LOG_PRODUCT terms
    equals ``n @ log(d)`` to rounding; non-integer counts, and terms whose products would
    underflow, are summed term by term (the same figure)."""
    rng = np.random.default_rng(0)
    n = {"ones": np.ones(1001), "integers": rng.geometric(0.6, 5003).astype(float),
         "large integers": rng.integers(1, 4000, 997).astype(float), "weights": rng.uniform(0.2, 3.0, 1000),
         "tiny": np.ones(1000)}[kind]
    d = rng.uniform(1e-6, 1.0, n.size)
    if kind == "tiny":
        d[::7] = 1e-90  # four of these multiply to below the floor of a double's normal range
    total = lowrank._WeightedLogSum(n)
    assert (total.plan is None) == (kind == "weights")
    expected = float(n @ np.log(d))
    assert total(d) == pytest.approx(expected, rel=1e-13)
    assert total(d) == total(d)  # its buffers do not carry over between calls


def test_pooled_count_tables_are_the_kronecker_products():
    """The shrinkage levels' pooled tables and the low-rank EM's initial profiles pool counts
    without a Kronecker product: the same values, exactly."""
    import scipy.sparse as sp
    from genpqr.stage2._transition_models import _pooled

    rng = np.random.default_rng(5)
    S, K = 14, 3
    moves = draw_moves(random_kernel(S, K, rng, termination=0.1), 700, rng)
    counts = moves.counts()
    by_state = sp.csr_matrix(sp.kron(sp.eye(S), np.ones((1, K))) @ counts).toarray()
    by_action = sp.csr_matrix(sp.kron(np.ones((1, S)), sp.eye(K)) @ counts).toarray()
    np.testing.assert_array_equal(_pooled(counts, S, K, 0).toarray(), by_state)
    np.testing.assert_array_equal(_pooled(counts, S, K, 1).toarray(), by_action)
    pick = np.array([3, 0, 3, 13])
    np.testing.assert_array_equal(lowrank._pooled_rows(counts, pick, K), by_state[pick])


def test_low_rank_dense_kernel_is_its_rows():
    moves = low_rank_moves(S=15, K=3, n=600)
    model = LowRankKernel(rank=3, concentration=5.0, n_groups=0, random_state=0).fit(moves)
    np.testing.assert_allclose(model.to_dense(), KernelModel.to_dense(model), atol=1e-14)
    with pytest.raises(ValueError, match="max_bytes"):
        model.to_dense(max_bytes=10)


# ---------------------------------------------------------------------------- the grids: climbed and raced
@settings(max_examples=60, deadline=None)
@given(peak=st.integers(0, 7), size=st.integers(1, 8), start=st.integers(0, 7), data=st.data())
def test_climb_finds_the_peak_of_a_unimodal_grid_and_stops_past_it(peak, size, start, data):
    peak, start = min(peak, size - 1), min(start, size - 1)
    rises = data.draw(st.lists(st.floats(0.01, 10), min_size=size, max_size=size))
    values = [-sum(rises[min(i, peak):max(i, peak)]) for i in range(size)]  # unimodal, its top at ``peak``
    tried = []

    def score(i, best):
        tried.append(i)
        assert best is None or best in tried
        return values[i]

    assert lowrank._climb(list(range(size)), score, start) == peak
    assert set(tried) <= set(range(min(start, peak) - 1, max(start, peak) + 2))  # none beyond a step past it


def test_a_trailing_setting_is_dropped_after_a_fold(monkeypatch):
    """A concentration that pools every cell into its state's row (1e5) trails the others by far
    on a kernel whose actions differ: it is dropped after its first fold, and the choice is the
    one the full grid makes."""
    moves = low_rank_moves()
    grid = dict(ranks=(3,), concentrations=(0.5, 5.0, 1e5), group_counts=(0,), random_state=0)
    raced = LowRankKernel(**grid).fit(moves)
    assert raced.cv_stopped_.get((3, 1e5, 0)) == 1
    monkeypatch.setattr(lowrank, "RACE_Z", np.inf)
    full = LowRankKernel(**grid).fit(moves)
    assert not full.cv_stopped_ and (3, 1e5, 0) in full.cv_scores_
    assert (raced.rank_, raced.concentration_, raced.n_groups_) == (full.rank_, full.concentration_, full.n_groups_)
    np.testing.assert_array_equal(raced.phi_, full.phi_)
    assert all(raced.cv_scores_[k] == full.cv_scores_[k] for k in raced.cv_scores_)


def test_warm_started_fits_of_the_cross_validation_are_capped(monkeypatch):
    """The group counts start from the fit without groups and run at most WARM_MAX_ITER
    iterations; the cold fits and the final fit keep ``max_iter``."""
    calls = []
    original = lowrank._EM.run

    def spy(self, max_iter, tol):
        out = original(self, max_iter, tol)
        calls.append((not self.cold, max_iter, self.it))
        return out

    monkeypatch.setattr(lowrank._EM, "run", spy)
    model = LowRankKernel(ranks=(3,), concentrations=(5.0,), group_counts=(0, 4), max_iter=300,
                          random_state=0).fit(low_rank_moves(n=2000))
    warm = [c for c in calls if c[0]]
    assert warm and all(m == lowrank.WARM_MAX_ITER and it <= m for _, m, it in warm)
    assert all(m == 300 for started, m, _ in calls if not started)
    assert model.n_iter_ <= 300


def test_an_em_stopped_early_and_continued_is_the_em_run_at_once():
    """``_EM`` run to a loose tolerance and then to ``tol`` gives the fit run to ``tol`` at once,
    to the last bit (cold and grouped; one that met ``tol`` already is left as it is)."""
    moves = low_rank_moves(n=2000)
    counts = moves.counts()
    S, K = moves.n_states, moves.n_actions
    for groups in (None, 4):
        kw = dict(tilt=True, smoothing=0.1, termination=True, n_groups=groups, random_state=3, start=None)
        at_once = lowrank.fit_low_rank(counts, S, K, 3, 5.0, max_iter=300, tol=1e-6, **kw)
        em = lowrank._EM(counts, S, K, 3, 5.0, **kw).run(300, 1e-4)
        loose = em.it
        em.run(300, 1e-6)
        assert loose < em.it == at_once[2]
        for a, b in zip(em.result(), at_once):
            np.testing.assert_array_equal(a, b)
        again = em.it
        em.run(300, 1e-5)  # looser than where it stopped: nothing to do
        assert em.it == again


def test_fits_sharing_their_cells_are_the_fits_on_their_own():
    """Fits on the same counts at one rank may share their ``_Cells`` (the cross-validation's fits
    of a fold): a grouped fit run between the steps of an ungrouped one, and an ungrouped fit
    after a grouped one, give the fits made on cells of their own, to the last bit."""
    moves = low_rank_moves(n=2000)
    counts = moves.counts()
    S, K = moves.n_states, moves.n_actions
    kw = dict(tilt=True, smoothing=0.1, termination=True, random_state=3, start=None)
    alone = {groups: lowrank.fit_low_rank(counts, S, K, 3, 5.0, max_iter=300, tol=1e-6, n_groups=groups, **kw)
             for groups in (None, 4)}
    plain = lowrank._EM(counts, S, K, 3, 5.0, n_groups=None, **kw).run(300, 1e-4)
    grouped = lowrank._EM(counts, S, K, 3, 5.0, n_groups=4, cells=plain.cells, **kw).run(300, 1e-6)
    assert grouped.cells is plain.cells and plain.cells.groups is not None
    plain.run(300, 1e-6)  # continued on the shared cells after the grouped fit set its groups
    after = lowrank._EM(counts, S, K, 3, 5.0, n_groups=None, cells=plain.cells, **kw).run(300, 1e-6)
    for em, groups in ((plain, None), (grouped, 4), (after, None)):
        for a, b in zip(em.result(), alone[groups]):
            np.testing.assert_array_equal(a, b)


def test_the_cross_validation_continues_its_chosen_setting_to_tol(monkeypatch):
    """The cross-validation's cold fits stop at CV_TOL_FACTOR x tol; the chosen setting's are
    continued to tol: its held-out score, the group counts' (started from it) and the fit are
    those of a cross-validation whose fits all run to tol, to the last bit."""
    moves = low_rank_moves(n=3000)
    kw = dict(ranks=(2, 3, 5), concentrations=(1.0, 10.0), group_counts=(0, 4), random_state=0)
    fast = LowRankKernel(**kw).fit(moves)
    monkeypatch.setattr(lowrank, "CV_TOL_FACTOR", 1.0)
    exact = LowRankKernel(**kw).fit(moves)
    chosen = (fast.rank_, fast.concentration_)
    assert (exact.rank_, exact.concentration_, exact.n_groups_) == (*chosen, fast.n_groups_)
    for setting, value in exact.cv_scores_.items():
        if setting[:2] == chosen:
            assert fast.cv_scores_[setting] == value
        else:
            assert fast.cv_scores_.get(setting, value) == pytest.approx(value, abs=0.01)
    np.testing.assert_array_equal(fast.phi_, exact.phi_)
    np.testing.assert_array_equal(fast.psi_, exact.psi_)


# ---------------------------------------------------------------------------- the selection
def test_low_rank_refits_are_skipped_where_its_own_folds_decide(monkeypatch):
    """The low-rank model wins by far on its own 3-fold score (a lower bound of its score on the
    selection's 5 folds): no refits, and the summary says where its score comes from. Without
    the shortcut the choice is the same, with a higher score for it."""
    moves = low_rank_moves(n=4000)
    calls = []
    original = LowRankKernel._refit_held_out
    monkeypatch.setattr(LowRankKernel, "_refit_held_out", lambda self, m, f: calls.append(1) or original(self, m, f))
    fast = select_transition_model(moves, random_state=0)
    assert fast.chosen == "lowrank" and not calls, fast.summary()
    rows = {r["name"]: r for r in fast.scores}
    assert (rows["lowrank"]["n_splits"], rows["lowrank"]["folds"]) == (3, "fewer")
    assert (rows["shrinkage"]["n_splits"], rows["shrinkage"]["folds"]) == (5, "selection")
    assert "held out over its own 3 episode folds" in fast.summary()
    monkeypatch.setattr(selection_module, "_settled_on_own_folds", lambda *a: False)
    slow = select_transition_model(moves, random_state=0)
    assert calls and slow.chosen == "lowrank"
    low = {r["name"]: r for r in slow.scores}["lowrank"]
    assert (low["n_splits"], low["folds"]) == (5, "selection")
    assert low["log_likelihood"] > rows["lowrank"]["log_likelihood"]
    assert "its own" not in slow.summary()


def docs_moves():
    """The small problem of docs/choosing_a_transition_model.md (120 states in 6 groups, 6 actions)."""
    from genpqr.envs._tabular import simulate_tabular
    from genpqr.stage2 import TabularMDP, soft_optimal_policy

    rng = np.random.default_rng(0)
    S, K, groups, gamma = 120, 6, 6, 0.9
    P = 0.95 * rng.dirichlet(np.full(S, 0.05), size=(groups, K))[np.arange(S) % groups]
    reward = rng.normal(size=(S, K))
    mdp = TabularMDP.create(P, gamma, reward)
    data = simulate_tabular(mdp, soft_optimal_policy(reward, mdp.kernel, gamma), n_episodes=400, horizon=10,
                            random_state=0)
    return TransitionMoves.from_transitions(data, S)


def held_out_refits(model, moves, n_splits=5, floor=1e-4):
    """The mean held-out log-likelihood of fixed copies refitted on the selection's folds, by hand."""
    p = np.empty(moves.n)
    for train, test in moves.folds(n_splits, 0):
        p[test] = model.fixed_copy().fit(moves.subset(train)).move_proba(moves.subset(test))
    return np.mean(np.log((1 - floor) * p + floor / (moves.n_states + 1)))


def test_low_rank_refits_where_its_own_folds_do_not_decide():
    """On the docs page's problem the low-rank model trails shrinkage on its own 3 folds, and its
    in-sample fit is above shrinkage's held-out score: it is refitted on the selection's folds
    (fixed copies on each fold's training moves) and then wins, as before."""
    moves = docs_moves()
    result = select_transition_model(moves, random_state=0)
    rows = {r["name"]: r for r in result.scores}
    assert result.chosen == "lowrank" and rows["lowrank"]["folds"] == "selection", result.summary()
    assert result.models["lowrank"].cv_scores_[(20, 100.0, 0)] < rows["shrinkage"]["log_likelihood"]
    assert rows["lowrank"]["log_likelihood"] == pytest.approx(held_out_refits(result.models["lowrank"], moves),
                                                              rel=1e-12)
    assert "its own" not in result.summary()


def test_low_rank_not_refitted_where_even_in_sample_it_loses(monkeypatch):
    """Rows pooled by state, as shrinkage assumes: the low-rank model's in-sample log-likelihood on
    every move is below shrinkage's held-out one, so refits on the selection's folds (held out:
    below the in-sample score) cannot make it the choice. Made anyway, they do not."""
    rng = np.random.default_rng(7)
    S, K = 40, 5
    moves = draw_moves(np.repeat(random_kernel(S, 1, rng, alpha=0.3), K, axis=1), 1500, rng)
    fast = select_transition_model(moves, random_state=0)
    rows = {r["name"]: r for r in fast.scores}
    assert fast.chosen == "shrinkage" and rows["lowrank"]["folds"] == "fewer", fast.summary()
    assert rows["lowrank"]["in_sample"] < rows["shrinkage"]["log_likelihood"]
    assert "even in-sample" in fast.summary()
    monkeypatch.setattr(selection_module, "_settled_on_own_folds", lambda *a: False)
    slow = select_transition_model(moves, random_state=0)
    low = {r["name"]: r for r in slow.scores}["lowrank"]
    assert slow.chosen == "shrinkage" and low["folds"] == "selection"
    assert low["log_likelihood"] < rows["lowrank"]["in_sample"]
    assert low["log_likelihood"] == pytest.approx(rows["lowrank"]["log_likelihood"], abs=0.05)  # 5 folds or 3


@pytest.mark.parametrize("n_splits, refits", [(5, 0), (8, 1)])
def test_low_rank_on_the_selection_folds_or_more_is_not_a_lower_bound(monkeypatch, n_splits, refits):
    """A low-rank model given the selection's folds (5, the same seed) is scored on them as they
    are; one with more folds than the selection's (fits on more episodes) is refitted even when
    it wins: its own score is no lower bound."""
    moves = low_rank_moves(n=2000)
    calls = []
    original = LowRankKernel._refit_held_out
    monkeypatch.setattr(LowRankKernel, "_refit_held_out", lambda self, m, f: calls.append(1) or original(self, m, f))
    candidates = {"counts": CountKernel(), "lowrank": LowRankKernel(ranks=(2, 3), concentrations=(5.0,),
                                                                    group_counts=(0,), n_splits=n_splits,
                                                                    random_state=0)}
    result = select_transition_model(moves, candidates, random_state=0)
    row = {r["name"]: r for r in result.scores}["lowrank"]
    assert result.chosen == "lowrank" and len(calls) == refits
    assert (row["n_splits"], row["folds"]) == (5, "selection")


def test_progress_bar_only_when_asked(monkeypatch, capsys):
    monkeypatch.setattr(selection_module, "PROGRESS_DELAY", 0.0)
    rng = np.random.default_rng(7)
    moves = draw_moves(np.repeat(random_kernel(30, 1, rng, alpha=0.3), 4, axis=1), 600, rng)
    candidates = {"counts": CountKernel(), "shrinkage": ShrinkageKernel(random_state=0)}
    select_transition_model(moves, candidates, random_state=0, progress=False)
    assert capsys.readouterr().err == ""
    select_transition_model(moves, candidates, random_state=0, progress=True)
    assert "transition selection" in capsys.readouterr().err


def test_progress_names_the_low_rank_setting_and_fold(monkeypatch, capsys):
    """The low-rank candidate's own cross-validation (most of the comparison's time) says on the
    selection's bar which rank and fold it fits; the note does not stay on the fitted model."""
    monkeypatch.setattr(selection_module, "PROGRESS_DELAY", 0.0)
    moves = low_rank_moves(n=1500)
    candidates = {"counts": CountKernel(), "lowrank": LowRankKernel(ranks=(2, 3), concentrations=(5.0,),
                                                                    group_counts=(0,), n_splits=3, random_state=0)}
    result = select_transition_model(moves, candidates, random_state=0, progress=True)
    err = capsys.readouterr().err
    assert "transition selection: 1/2 [" in err  # counts done
    assert "lowrank: rank 2, concentration 5, fold 1/3]" in err and "lowrank: rank 3, concentration 5, fold 3/3]" in err
    assert "_progress_note" not in vars(result.models["lowrank"])
    select_transition_model(moves, candidates, random_state=0, progress=False)
    assert capsys.readouterr().err == ""


def test_moves_keep_their_type_through_the_selection():
    """The selection does not modify the moves it is given."""
    moves = low_rank_moves(S=15, K=3, n=500)
    before = [getattr(moves, k).copy() for k in ("states", "actions", "outcomes", "episodes")]
    select_transition_model(moves, random_state=0)
    for k, b in zip(("states", "actions", "outcomes", "episodes"), before):
        np.testing.assert_array_equal(getattr(moves, k), b)
    assert isinstance(moves, TransitionMoves)


# ---------------------------------------------------------------------------- the state groups' k-means
@pytest.mark.parametrize("seed", range(4))
def test_the_state_groups_k_means_is_scikit_learns_partition(seed):
    """``_kmeans`` (written out so that a fit does not import scikit-learn) gives the partition of
    ``KMeans(n_clusters, n_init=3, random_state=...).fit(X, sample_weight=w)``: weighted profiles
    on the simplex as the low-rank fit groups them, with duplicated rows (states never visited
    share the uniform profile) and more clusters than distinct rows."""
    import warnings

    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    for case in range(12):
        n, d = int(rng.integers(20, 700)), int(rng.integers(2, 21))
        k = int(rng.integers(2, min(40, n)))
        X = rng.dirichlet(np.full(d, rng.uniform(0.1, 3.0)), size=n)
        if case % 3 == 0:
            X[rng.integers(0, n, n // 3)] = 1.0 / d
        if case == 1:  # fewer distinct rows than clusters: empty clusters, nothing to relocate
            X = X[rng.integers(0, 3, n)]
        w = rng.gamma(0.5, size=n) + 1e-3
        state = int(rng.integers(0, 2**31 - 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = KMeans(n_clusters=k, n_init=3, random_state=state).fit(X, sample_weight=w).labels_
        labels = lowrank._kmeans(X, k, w, state)
        assert labels.shape == (n,)
        assert lowrank._same_partition(labels, reference, k) and lowrank._same_partition(reference, labels, k), case


def test_same_partition_is_up_to_renaming():
    assert lowrank._same_partition(np.array([0, 0, 1, 2]), np.array([2, 2, 0, 1]), 3)
    assert not lowrank._same_partition(np.array([0, 0, 1, 2]), np.array([2, 1, 0, 1]), 3)


# ---------------------------------------------------------------------------- the low-rank kernel, factored
def test_the_low_rank_kernel_stays_factored_and_solves_as_its_dense_array():
    """``kernel()`` is a matrix-free kernel on the model (a fit given it keeps and saves the
    factors, not the (S, K, S) array, and does not fit the model again); its ``P_mu`` is the dense
    array's, and the exact fit with it is the fit with the dense array to rounding."""
    from genpqr import GenPQR, normalization as N
    from genpqr.stage2._kernels import as_kernel

    moves = low_rank_moves(n=3000)
    model = LowRankKernel(rank=3, concentration=5.0, n_groups=0, random_state=0).fit(moves)
    from genpqr.stage2._kernels import KernelOperator

    assert isinstance(model.kernel(), KernelOperator) and model.kernel().model is model
    S, K = moves.n_states, moves.n_actions
    mu = np.random.default_rng(1).dirichlet(np.ones(K), size=S)
    dense = model.to_dense()
    np.testing.assert_allclose(as_kernel(model).under(mu), np.einsum("sa,sat->st", mu, dense), rtol=0, atol=1e-14)
    np.testing.assert_allclose(as_kernel(dense).under(mu), as_kernel(model).under(mu), rtol=0, atol=1e-14)
    rng = np.random.default_rng(2)
    from genpqr.envs import simulate_tabular
    from genpqr.stage2 import TabularMDP, soft_optimal_policy

    mdp = TabularMDP.create(dense, 0.9, rng.normal(size=(S, K)))
    data = simulate_tabular(mdp, soft_optimal_policy(mdp.reward, mdp.kernel, 0.9), n_episodes=300, horizon=10,
                            random_state=0)
    fits = [GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=S, transition_model=kernel,
                   random_state=0, progress=False).fit(data) for kernel in (dense, model.kernel())]
    np.testing.assert_allclose(fits[0].reward_table(), fits[1].reward_table(), rtol=1e-10, atol=1e-10)


def test_the_low_rank_note_wraps_at_word_boundaries():
    """The note of a low-rank model scored on its own folds is one sentence wrapped at word
    boundaries into lines of at most 100 columns under a hanging indent (once two fixed lines, the
    first too long, which the console broke into "not refitted: even" / "in-sample, -2.3499," / "it
    is below ..."); the console leaves it as it is."""
    from genpqr.app.console import fit_width
    from genpqr.stage2._transition_selection import TransitionSelection

    settings = "; rank 12, concentration 1e+03, 40 state groups (EM stopped at max_iter=200 before its tol=1e-06)"
    rows = [dict(name="counts", log_likelihood=-2.1234, difference=0.0, standard_error=np.nan, unexplained=0.1,
                 settings=""),
            dict(name="lowrank", log_likelihood=-2.4567, difference=-0.3333, standard_error=0.0123, unexplained=0.0,
                 settings=settings, folds="fewer", n_splits=3, in_sample=-2.3499)]
    text = TransitionSelection("counts", None, scores=rows, reason="the default", n_moves=1500, n_episodes=100,
                               n_splits=5).summary()
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), text
    assert fit_width(text) == text
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("(held out over its own 3"))
    note = lines[start:]
    assert note[0].startswith(" " * 15 + "(") and len(note) >= 2
    assert all(line.startswith(" " * 19) and not line.startswith(" " * 20) for line in note[1:]), text
    assert " ".join(line.strip() for line in note) == (
        "(held out over its own 3 episode folds, fits on fewer episodes; not refitted: even in-sample, -2.3499, it is "
        "below the choice's held-out score)")
    assert all(len(line) > 60 for line in note[:-1])  # filled to the width, not broken early


def test_low_rank_search_stops_racing_a_leader_far_ahead(monkeypatch):
    """Rows pooled by state: shrinkage leads by far. After two ranks the last step's gain, times
    RACE_STEPS and the ranks left, is below the low-rank model's gap to shrinkage on its own folds
    (less RACE_Z standard errors): the search stops there, skips the concentration and group
    searches, and the summary says why. Without the race the choice is the same."""
    rng = np.random.default_rng(7)
    S, K = 40, 5
    moves = draw_moves(np.repeat(random_kernel(S, 1, rng, alpha=0.3), K, axis=1), 1500, rng)

    def candidates():
        return {"counts": CountKernel(), "shrinkage": ShrinkageKernel(random_state=0),
                "lowrank": LowRankKernel(ranks=(1, 2, 3, 4, 6, 8), random_state=0)}

    fast = select_transition_model(moves, candidates(), random_state=0)
    low = fast.models["lowrank"]
    raced = low.cv_raced_
    assert fast.chosen == "shrinkage" and raced["leader"] == "shrinkage" and raced["rank"] == low.rank_ == 2
    assert set(low.cv_scores_) == {(1, 10.0, 0), (2, 10.0, 0)} and (low.concentration_, low.n_groups_) == (10.0, 0)
    assert raced["gain"] == pytest.approx(low.cv_scores_[(2, 10.0, 0)] - low.cv_scores_[(1, 10.0, 0)], rel=1e-12)
    assert raced["ranks_left"] == 4
    assert raced["gap"] - lowrank.RACE_Z * raced["standard_error"] > lowrank.RACE_STEPS * 4 * raced["gain"]
    text = fast.summary()
    assert "its search stopped at rank 2" in text and max(map(len, text.splitlines()[1:])) <= 100, text  # the
    # first line, the reason, is wrapped by the console (genpqr.app.console.fit_width)
    assert {r["name"]: r for r in fast.scores}["lowrank"]["raced"] == raced
    monkeypatch.setattr(lowrank, "RACE_STEPS", np.inf)
    slow = select_transition_model(moves, candidates(), random_state=0)
    assert slow.chosen == "shrinkage" and not slow.models["lowrank"].cv_raced_
    assert len(slow.models["lowrank"].cv_scores_) > 2 and "stopped at rank" not in slow.summary()
    shrink = [{r["name"]: r for r in result.scores}["shrinkage"] for result in (fast, slow)]
    assert shrink[0] == shrink[1]
    off = select_transition_model(moves, candidates(), random_state=0, race=False)  # a model asked for by name
    assert not off.models["lowrank"].cv_raced_ and off.models["lowrank"].cv_scores_ == slow.models["lowrank"].cv_scores_


def test_low_rank_search_does_not_race_alone_or_when_it_leads():
    """No leader to race (a low-rank model fitted alone), or the low-rank model is the choice: no
    early stop."""
    moves = low_rank_moves(n=4000)
    assert LowRankKernel(ranks=(1, 2, 3, 4), random_state=0).fit(moves).cv_raced_ == {}
    result = select_transition_model(moves, random_state=0)
    assert result.chosen == "lowrank" and result.models["lowrank"].cv_raced_ == {}


# ---------------------------------------------------------------------------- fold statistics shared
def test_moves_build_their_counts_folds_and_fold_counts_once():
    """The selection's candidates read the same counts, folds and fold counts: built once per
    moves and handed out as copies, equal to a fresh computation (a copy's change leaves them)."""
    from genpqr.data._transitions import group_folds

    rng = np.random.default_rng(4)
    moves = draw_moves(random_kernel(10, 3, rng, termination=0.1), 400, rng)
    fresh = TransitionMoves(moves.states, moves.actions, np.where(moves.outcomes == 10, 0, moves.outcomes), 10, 3,
                            terminated=moves.outcomes == 10, episodes=moves.episodes)
    first = moves.counts()
    first.data[:] = -1.0  # a copy: the cached counts do not change
    np.testing.assert_array_equal(moves.counts().toarray(), fresh.counts().toarray())
    for seed in (0, 3):
        folds = moves.folds(4, seed)
        expected = group_folds(moves.episodes, 4, seed)
        assert len(folds) == len(expected)
        for (a, b), (c, d) in zip(folds, expected):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
        folds[0][1][:] = 0  # a copy
        np.testing.assert_array_equal(moves.folds(4, seed)[0][1], expected[0][1])
        cached = moves.fold_counts(expected)
        again = moves.fold_counts(expected)
        for a, b, (train, _) in zip(cached, again, expected):
            assert a is not b
            np.testing.assert_array_equal(a.toarray(), fresh.subset(train).counts().toarray())
            np.testing.assert_array_equal(b.toarray(), a.toarray())
    assert set(moves._folds) == {(4, 0), (4, 3)}  # only integer seeds are kept
    moves.folds(4, None)
    assert set(moves._folds) == {(4, 0), (4, 3)}
