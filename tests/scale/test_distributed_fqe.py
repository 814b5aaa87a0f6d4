"""Boosted FQE on a Dask cluster (genpqr.scale.fit_dask with a BoostedQModel, trained by
lightgbm.DaskLGBMRegressor; genpqr.scale), on a local cluster of worker processes:
against the in-memory boosted FQE of GenPQR and against the exact tabular answer."""

import warnings

import numpy as np
import pytest
from .test_stream import COLS, panel, write_folder

from genpqr import GenPQR, load
from genpqr.data import from_pandas
from genpqr.normalization import anchor_action

distributed = pytest.importorskip("distributed")
pytest.importorskip("lightgbm")
from genpqr.scale import fit_dask  # noqa: E402
from genpqr.scale import ClusterBoostedQ
from genpqr.scale._distributed_fqe import advance_block, bellman_block_pass
from genpqr.models._boosting import BoostedQModel  # noqa: E402
from genpqr.stage2 import FQE

CONT = dict(state=["x0", "x1"], terminated="done", **COLS)


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client


def _tabular_policy(data):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    return make_pipeline(OneHotEncoder(), LogisticRegression(max_iter=1000)).fit(data.states, data.actions)


@pytest.mark.slow
@pytest.mark.parametrize("structure, stop", [("continuation", 19), ("direct", 20)])
def test_boosted_dask_on_tabular_states_equals_in_memory_and_the_exact_answer(tmp_path, client, structure, stop):
    """States are one feature with 7 values, so the distributed bin boundaries are the
    one-machine ones and only the order of the histogram sums differs: the fit equals the
    in-memory BoostedQModel FQE to 1e-7 (LightGBM keeps labels in float32, 6e-8 relative,
    so a label may round the other way when its target differs in the last double bits).
    With one tree of 32 leaves per iteration, learning rate 1 and one row per leaf, each
    iteration fits every (s, a) cell mean exactly: FQE is then value iteration on the
    empirical model, which converges at rate gamma to the exact tabular solution. ``tol`` lies
    between two successive target changes (1.8e-6 and 9.1e-7 in-memory, against differences
    of 3e-8 between the fits), so both stop after the same iteration (the 20th). Regressing the
    continuation ``f = P mu Q``, the k-th target change is the direct iteration's (k + 1)-th
    (``f_k = P mu Q_k``), so both stop one iteration earlier."""
    frame = panel(n_episodes=150, seed=5)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=53)
    data = from_pandas(frame, state="s", terminated="done", **COLS)
    est = GenPQR(q_model=FQE(BoostedQModel(learning_rate=1.0, num_leaves=32, min_child_samples=1), n_iterations=40,
                             tol=1.3e-6, structure=structure),
                 policy_model=_tabular_policy(data), policy_prefit=True, gamma=0.5, normalization=anchor_action("stay"),
                 clip=(1e-3, 1.0), progress=False)
    ref = GenPQR(**est.get_params(deep=False)).fit(data)
    exact = GenPQR(**{**est.get_params(deep=False), "q_model": "exact"}).fit(data)
    got = fit_dask(est, folder, client=client, npartitions=5, state="s", terminated="done", chunk_rows=70, **COLS)
    assert not hasattr(est, "stage2_")
    grid = np.arange(7.0)[:, None]
    np.testing.assert_allclose(got.q(grid), ref.q(grid), atol=1e-7, rtol=0)
    np.testing.assert_allclose(got.reward(grid), ref.reward(grid), atol=1e-7, rtol=0)
    # distance to the fixed point after a last target change c <= tol: about gamma / (1 - gamma) c,
    # plus 2e-7 from the float32 labels (rewards of order 0.3)
    np.testing.assert_allclose(got.reward(grid), exact.reward(grid), atol=5e-6, rtol=0)
    np.testing.assert_allclose(got.continuation(grid), exact.continuation(grid), atol=5e-6, rtol=0)
    d, r = got.diagnostics_, ref.diagnostics_
    assert d.converged and d.n_iterations == r.n_iterations == got.stage2_.fqe.model_.n_trees_ == stop
    np.testing.assert_allclose(d.bellman_residuals, r.bellman_residuals, atol=1e-7, rtol=0)
    np.testing.assert_allclose(d.target_changes, r.target_changes, atol=1e-7, rtol=0)
    assert (d.n_transitions, d.n_episodes, d.n_last_choices, d.action_counts) == \
        (r.n_transitions, r.n_episodes, r.n_last_choices, r.action_counts)
    assert d.policy_log_loss == pytest.approx(r.policy_log_loss, abs=1e-12)


@pytest.mark.slow
def test_boosted_dask_on_continuous_states_within_the_sampling_error(tmp_path, client):
    """Continuous states: LightGBM's data-parallel learner takes the bin boundaries of each
    feature from one worker's rows, so the trees differ from the one-machine ones. Tolerance:
    per action, the RMS over the data's states of (distributed - in-memory) reward is at most
    half the RMS difference between the in-memory fits on the odd and on the even episodes --
    that half is about one standard deviation of the full-data fit's own sampling error
    (each half has twice the variance), so the distributed fit moves the estimate by less than
    its statistical noise (measured: 0.18 to 0.35 of the halves' difference, over partitionings
    and runs)."""
    frame = panel(n_episodes=600, seed=7, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=301)
    data = from_pandas(frame, **CONT)
    from sklearn.linear_model import LogisticRegression

    est = GenPQR(q_model=FQE(BoostedQModel(random_state=0), n_iterations=12, tol=None),
                 policy_model=LogisticRegression().fit(data.states, data.actions), policy_prefit=True, gamma=0.9,
                 normalization=anchor_action("stay"), clip=(1e-3, 1.0), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 12 iterations, in both fits
        ref = GenPQR(**est.get_params(deep=False)).fit(data)
        episodes = np.unique(data.episode_ids)
        halves = [GenPQR(**est.get_params(deep=False)).fit(data.subset(np.isin(data.episode_ids, episodes[i::2])))
                  for i in (0, 1)]
        got = fit_dask(est, folder, client=client, npartitions=4, chunk_rows=500, **CONT)

    def rms(a, b):
        return np.sqrt(np.mean((a - b) ** 2, axis=0))

    X = data.states
    noise = rms(halves[0].reward(X), halves[1].reward(X))
    moved = [k for k in range(3) if noise[k] > 0]  # the anchor's reward is 0 in every fit
    assert moved == [0, 2] and np.all(rms(got.reward(X), ref.reward(X))[moved] <= 0.5 * noise[moved])
    assert np.all(rms(got.q(X), ref.q(X)) <= 0.5 * rms(halves[0].q(X), halves[1].q(X)))
    model = got.stage2_.fqe.model_
    assert isinstance(model, ClusterBoostedQ) and len(model.boosters_) == 12 == got.diagnostics_.n_iterations
    assert got.diagnostics_.n_transitions == ref.diagnostics_.n_transitions


def test_boosted_dask_in_one_partition_equals_in_memory(tmp_path, client):
    """One partition: LightGBM's Dask interface trains on one worker, on the rows of the
    in-memory fit, so the whole path (the read into a block, the targets from the added trees,
    init_score boosting, the sum of boosters) gives the in-memory BoostedQModel FQE to rounding."""
    frame = panel(n_episodes=150, seed=7, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=41)
    data = from_pandas(frame, **CONT)
    from sklearn.linear_model import LogisticRegression

    est = GenPQR(q_model=FQE(BoostedQModel(num_leaves=8, trees_per_iteration=2), n_iterations=4, tol=None),
                 policy_model=LogisticRegression().fit(data.states, data.actions), policy_prefit=True, gamma=0.9,
                 normalization=anchor_action("stay"), clip=(1e-3, 1.0), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 4 iterations, in both fits
        ref = GenPQR(**est.get_params(deep=False)).fit(data)
        got = fit_dask(est, folder, client=client, npartitions=1, chunk_rows=90, **CONT)
    X = np.random.default_rng(0).normal(size=(200, 2))
    np.testing.assert_allclose(got.q(X), ref.q(X), atol=1e-10, rtol=0)
    np.testing.assert_allclose(got.reward(X), ref.reward(X), atol=1e-10, rtol=0)
    d, r = got.diagnostics_, ref.diagnostics_
    np.testing.assert_allclose(d.bellman_residuals, r.bellman_residuals, atol=1e-10, rtol=0)
    np.testing.assert_allclose(d.target_changes, r.target_changes, atol=1e-10, rtol=0)
    assert got.stage2_.fqe.model_.n_trees_ == 8 and d.solver == "boosted fqe (dask)"
    got.save(tmp_path / "model.joblib")
    np.testing.assert_array_equal(load(tmp_path / "model.joblib").reward(X), got.reward(X))


@pytest.mark.slow
def test_boosted_dask_with_lightgbm_stage1_on_the_cluster(tmp_path, client):
    """policy='lightgbm': stage 1 by DaskLGBMClassifier on every choice, then boosted FQE; in
    one partition stage 2 is the in-memory fit with that classifier as a prefitted policy."""
    import lightgbm

    frame = panel(n_episodes=120, seed=11, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=2, row_group_size=500)
    data = from_pandas(frame, **CONT)
    est = GenPQR(q_model=FQE(BoostedQModel(num_leaves=8), n_iterations=3, tol=None), gamma=0.9, random_state=0,
                 normalization=anchor_action("stay"), clip=(1e-3, 1.0), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fit_dask(est, folder, client=client, npartitions=1, policy="lightgbm",
                       lightgbm_params=dict(n_estimators=10, num_leaves=7), chunk_rows=400, **CONT)
        policy = got.policy_.models[0]
        assert isinstance(policy, lightgbm.LGBMClassifier) and policy.n_estimators == 10
        ref = GenPQR(**{**est.get_params(deep=False), "policy_model": policy, "policy_prefit": True}).fit(data)
    X = np.random.default_rng(1).normal(size=(100, 2))
    np.testing.assert_allclose(got.reward(X), ref.reward(X), atol=1e-10, rtol=0)
    assert len(got.stage2_.fqe.model_.boosters_) == 3


def test_a_block_advances_by_the_new_trees_only(tmp_path):
    """``advance_block`` adds the new booster's predictions to the running Q (no re-prediction
    of the ensemble) and computes the FQE targets and sums as the definition says."""
    lightgbm = pytest.importorskip("lightgbm")
    from genpqr.stage1._policy import FittedPolicy
    from genpqr.scale import ParquetSource

    frame = panel(n_episodes=40, seed=3, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=1, row_group_size=1000)
    data = from_pandas(frame, **CONT)
    from sklearn.linear_model import LogisticRegression

    policy = FittedPolicy([LogisticRegression().fit(data.states, data.actions)], None, 3, (1e-3, 1.0))
    norm = anchor_action("stay").bind(data.encoder.encode)
    source = ParquetSource(folder, **CONT)
    block = bellman_block_pass(source, data.encoder.labels, policy, norm, 0.9)
    assert block.n == int(np.sum(data.next_observed)) and np.array_equal(block.targets, block.reward)
    X = np.column_stack([block.states, np.eye(3)[block.actions]])
    boosters = [lightgbm.train({"verbose": -1, "num_leaves": 4}, lightgbm.Dataset(X, label=y), num_boost_round=1)
                for y in (block.reward, np.sin(block.reward))]
    for booster in boosters:
        block = advance_block(block, booster.model_to_string())
    q = ClusterBoostedQ(boosters, 3, 2)
    np.testing.assert_allclose(block.q, q.predict_q_at(block.states, block.actions), atol=1e-12)
    y = block.reward + block.bootstrap * np.sum(block.next_mu * q.predict_q(block.next_states), axis=1)
    np.testing.assert_allclose(block.targets, y, atol=1e-12)
    assert block.sums[0] == block.n and block.sums[1] == pytest.approx(np.sum((block.q - y) ** 2))


def test_boosted_dask_bad_inputs_are_named(tmp_path, client):
    from sklearn.ensemble import HistGradientBoostingRegressor

    from genpqr.stage2 import TabularQModel

    folder = write_folder(panel(n_episodes=10, seed=1, continuous=True), tmp_path / "g")
    with pytest.raises(ValueError, match="TabularQModel.*fit_parquet.*BoostedQModel"):
        fit_dask(GenPQR(q_model=TabularQModel(n_states=7)), folder, client=client, **CONT)
    with pytest.raises(ValueError, match="HistGradientBoostingRegressor.*BoostedQModel"):
        fit_dask(GenPQR(q_model=HistGradientBoostingRegressor()), folder, client=client, **CONT)
    with pytest.raises(ValueError, match="validation_fraction"):
        fit_dask(GenPQR(q_model=FQE(BoostedQModel(), validation_fraction=0.2)), folder, client=client, **CONT)
    with pytest.raises(ValueError, match="q_model.trees_per_iteration must be an integer >= 1"):
        fit_dask(GenPQR(q_model=BoostedQModel(trees_per_iteration=0)), folder, client=client, **CONT)
    with pytest.raises(ValueError, match="q_model.learning_rate must be a number > 0"):
        fit_dask(GenPQR(q_model=BoostedQModel(learning_rate=0)), folder, client=client, **CONT)
    with pytest.raises(ValueError, match="n_iterations must be a positive int"):
        fit_dask(GenPQR(q_model=FQE(BoostedQModel(), n_iterations=0)), folder, client=client, **CONT)


@pytest.mark.slow
def test_cli_lightgbm_q_model_on_a_local_cluster(tmp_path, capsys):
    """``genpqr fit FOLDER --q-model lightgbm --dask-scheduler local:2``: sampled logistic stage 1,
    then boosted FQE on two worker processes; without a cluster the choice is refused."""
    from genpqr.app.cli import main

    folder = write_folder(panel(n_episodes=80, seed=21, continuous=True), tmp_path / "d")
    args = ["fit", str(folder), "--episode", "ep", "--time", "t", "--state", "x0,x1", "--action", "a",
            "--terminated", "done", "--gamma", "0.9", "--normalization", "anchor:stay", "--q-model", "lightgbm",
            "--n-iterations", "4", "--chunk-rows", "300", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "no")]) == 2
    assert "--q-model lightgbm out of core needs --dask-scheduler" in capsys.readouterr().err
    assert main(args + ["--dask-scheduler", "local:2", "--out", str(tmp_path / "two")]) == 0, capsys.readouterr().err
    assert "boosted FQE on the Dask cluster" in capsys.readouterr().out
    model = load(tmp_path / "two" / "model.joblib")
    assert isinstance(model.stage2_.fqe.model_, ClusterBoostedQ)
    assert model.diagnostics_.n_iterations == 4 and model.diagnostics_.solver == "boosted fqe (dask)"
    assert np.all(np.isfinite(model.reward(np.zeros((3, 2)))))
