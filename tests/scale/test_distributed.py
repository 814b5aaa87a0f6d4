"""Distributed fits (genpqr.scale.fit_dask) on a local Dask cluster of worker processes:
episode-whole partitions, and results equal to the single-machine streamed fit
(genpqr.scale.fit_parquet) and to the in-memory fit."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from ..doc_warnings import check_warnings, recording
from .test_stream import COLS, panel, prefit_closed_form_case, write_folder

from genpqr import GenPQR
from genpqr.data import from_pandas
from genpqr.stage2 import LSTDQ
from genpqr.normalization import anchor_action, mean_zero
from genpqr.scale import ParquetSource, fit_parquet
from genpqr.scale._statistics import RowDraws, concatenate_chunks

distributed = pytest.importorskip("distributed")
from genpqr.scale import fit_dask
from genpqr.scale._distributed import plan_partitions

CONT = dict(state=["x0", "x1"], terminated="done", **COLS)


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client


# ------------------------------------------------------------------------------ partitions (no cluster)
@settings(max_examples=8, deadline=None)
@given(row_group_size=st.integers(1, 60), npartitions=st.integers(1, 30), chunk_rows=st.integers(1, 200))
def test_partitions_are_episode_whole_and_cover_the_rows(tmp_path_factory, row_group_size, npartitions, chunk_rows):
    frame = panel(n_episodes=25, seed=12)
    folder = write_folder(frame, tmp_path_factory.mktemp("p") / "d", row_group_size=row_group_size)
    whole = from_pandas(frame, state="s", terminated="done", **COLS)
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=chunk_rows, **COLS)
    parts = source.partitions(npartitions)
    assert 1 <= len(parts) <= npartitions
    per_part = [list(source.chunks(whole.encoder.labels, partition=p)) for p in parts]
    joined = concatenate_chunks([c for chunks in per_part for c in chunks])
    for name in ("states", "actions", "terminated", "truncated", "next_observed", "timesteps"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name), err_msg=name)
    np.testing.assert_array_equal(np.nan_to_num(joined.next_states, nan=-1), np.nan_to_num(whole.next_states, nan=-1))
    assert [p.n_rows for p in parts] == [sum(c.n for c in chunks) for chunks in per_part]
    assert [p.offset for p in parts] == list(np.concatenate([[0], np.cumsum([p.n_rows for p in parts])[:-1]]))


def test_no_episode_straddles_two_partitions(tmp_path):
    frame = panel(n_episodes=40, seed=2)
    folder = write_folder(frame, tmp_path / "d", row_group_size=7)
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=20, **COLS)
    parts = source.partitions(9)
    assert sum(bool(p.skip) for p in parts) > 3 and sum(len(p.tail) for p in parts) > 3  # episodes were cut
    owners = {}
    for p in parts:
        for frame_part in source.frames(False, partition=p):
            for ep in frame_part["ep"].unique():
                assert owners.setdefault(ep, p.index) == p.index
    assert sorted(owners) == sorted(frame["ep"].unique())


def test_unsorted_row_groups_are_refused_by_the_plan(tmp_path):
    frame = panel(n_episodes=20, seed=9)
    folder = tmp_path / "d"
    folder.mkdir()
    half = len(frame) // 2
    frame.iloc[half:].to_parquet(folder / "part-0.parquet")  # later episodes in the first file
    frame.iloc[:half].to_parquet(folder / "part-1.parquet")
    source = ParquetSource(folder, state="s", terminated="done", **COLS)
    with pytest.raises(ValueError, match="sorted by the episode column 'ep'"):
        source.partitions(2)


def test_source_pickles_without_its_dataset(tmp_path):
    folder = write_folder(panel(n_episodes=10, seed=1), tmp_path / "d")
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=30, **COLS)
    copy = pickle.loads(pickle.dumps(source))
    assert copy._dataset is None and copy.count_rows() == source.count_rows()
    part = source.partitions(2)[1]
    labels = source.action_labels(False)
    a = concatenate_chunks(list(source.chunks(labels, partition=part)))
    b = concatenate_chunks(list(copy.chunks(labels, partition=part)))
    np.testing.assert_array_equal(a.states, b.states)


def test_row_draws_jump_to_any_row():
    full = np.random.default_rng(11).random(500)
    draws = RowDraws(11)
    np.testing.assert_array_equal(draws.generator(0).random(500), full)
    np.testing.assert_array_equal(draws.generator(123).random(377), full[123:])
    gen = np.random.default_rng(4)
    np.testing.assert_array_equal(RowDraws(gen).generator(7).random(3), np.random.default_rng(4).random(10)[7:])
    with pytest.raises(ValueError, match="PCG64"):
        RowDraws(np.random.Generator(np.random.MT19937(0)))


# ------------------------------------------------------------------------------ fits on the cluster
@pytest.mark.parametrize("normalization", [mean_zero(), anchor_action("stay")])
def test_tabular_dask_equals_streamed_and_in_memory(tmp_path, client, normalization):
    frame = panel(n_episodes=150, seed=5)
    folder = write_folder(frame, tmp_path / "d", n_files=4, row_group_size=53)
    est = GenPQR(q_model="exact", gamma=0.9, normalization=normalization, progress=False)
    kw = dict(state="s", terminated="done", chunk_rows=70, **COLS)
    ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, state="s", terminated="done", **COLS))
    streamed = fit_parquet(est, folder, progress=False, **kw)
    got = fit_dask(est, folder, client=client, npartitions=5, **kw)
    assert not hasattr(est, "stage2_")
    for other in (streamed, ref):
        np.testing.assert_allclose(got.reward_table().to_numpy(), other.reward_table().to_numpy(), atol=1e-10, rtol=0)
        grid = np.arange(ref.n_states_)[:, None]
        np.testing.assert_allclose(got.continuation(grid), other.continuation(grid), atol=1e-10, rtol=0)
        d, r = got.diagnostics_, other.diagnostics_
        assert (d.n_transitions, d.n_episodes, d.n_last_choices, d.support_count, d.action_counts, d.clip) == \
            (r.n_transitions, r.n_episodes, r.n_last_choices, r.support_count, r.action_counts, r.clip)
        assert d.policy_log_loss == pytest.approx(r.policy_log_loss, abs=1e-12)
    np.testing.assert_array_equal(got.visited_states_, ref.visited_states_)


def test_tabular_dask_with_single_row_partitions(tmp_path, client):
    """Row groups of one row and more partitions than episodes: empty partitions and
    partitions whose episodes are single choices (no transition) still add up."""
    frame = panel(n_episodes=12, seed=3)
    lone = pd.DataFrame({"s": [1, 2, 3, 4], "ep": [1, 2, 3, 4], "t": 5, "a": ["go", "stay", "go", "wait"],
                         "done": False})
    frame = pd.concat([lone, frame], ignore_index=True)
    folder = write_folder(frame, tmp_path / "d", n_files=2, row_group_size=1, shuffle_within=False)
    est = GenPQR(q_model="exact", gamma=0.9, n_states=7, progress=False)
    kw = dict(state="s", terminated="done", chunk_rows=3, **COLS)
    streamed = fit_parquet(est, folder, progress=False, **kw)
    got = fit_dask(est, folder, client=client, npartitions=60, **kw)
    assert len(plan_partitions(ParquetSource(folder, **kw), client, 60)[0]) == 60
    np.testing.assert_allclose(got.reward_table().to_numpy(), streamed.reward_table().to_numpy(), atol=1e-10, rtol=0)
    assert got.diagnostics_.n_last_choices == streamed.diagnostics_.n_last_choices


@pytest.mark.parametrize("keep_last", [True, False])
def test_closed_form_dask_equals_streamed_with_the_same_sample(tmp_path, client, keep_last):
    """Sampled logistic stage 1 (same rows drawn per partition), auto clip, LSTD statistics."""
    frame = panel(n_episodes=150, seed=7, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=41)
    est = GenPQR(q_model=LSTDQ(chunk_size=100), gamma=0.9, normalization=anchor_action("stay"), random_state=3,
                 progress=False)
    kw = dict(chunk_rows=90, sample_rows=700, keep_last=keep_last, **CONT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        streamed = fit_parquet(est, folder, progress=False, **kw)
        got = fit_dask(est, folder, client=client, npartitions=6, **kw)
    X = np.random.default_rng(0).normal(size=(200, 2))
    np.testing.assert_allclose(got.reward(X), streamed.reward(X), atol=1e-8, rtol=0)
    np.testing.assert_allclose(got.q(X), streamed.q(X), atol=1e-8, rtol=0)
    np.testing.assert_allclose(got.log_policy(X), streamed.log_policy(X), atol=1e-12, rtol=0)
    a, b = got.stage2_.fqe.statistics_, streamed.stage2_.fqe.statistics_
    assert a.n_rows == b.n_rows
    np.testing.assert_allclose(a.A, b.A, atol=1e-8 * np.abs(b.A).max())
    assert got.policy_.clip == streamed.policy_.clip and got.policy_.clip_rule == streamed.policy_.clip_rule
    d, r = got.diagnostics_, streamed.diagnostics_
    assert (d.n_transitions, d.n_episodes, d.n_last_choices, d.action_counts) == \
        (r.n_transitions, r.n_episodes, r.n_last_choices, r.action_counts)
    assert d.policy_log_loss == pytest.approx(r.policy_log_loss, abs=1e-12)


def test_closed_form_dask_with_a_prefitted_policy_equals_in_memory(tmp_path, client):
    est, ref, folder = prefit_closed_form_case(tmp_path)
    source = ParquetSource(folder, chunk_rows=90, **CONT)
    got = fit_dask(est, source, client=client, npartitions=4)
    X = np.random.default_rng(0).normal(size=(200, 2))
    np.testing.assert_allclose(got.reward(X), ref.reward(X), atol=1e-8, rtol=0)
    np.testing.assert_allclose(got.q(X), ref.q(X), atol=1e-8, rtol=0)
    assert got.diagnostics_.n_transitions == ref.diagnostics_.n_transitions


def test_lightgbm_stage1_on_the_cluster(tmp_path, client):
    lightgbm = pytest.importorskip("lightgbm")
    frame = panel(n_episodes=150, seed=7, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=41)
    data = from_pandas(frame, state=["x0", "x1"], terminated="done", **COLS)
    est = GenPQR(q_model="lstd", gamma=0.9, normalization=anchor_action("stay"), random_state=0, clip=(1e-3, 1.0),
                 progress=False)
    params = dict(n_estimators=15, num_leaves=7, min_child_samples=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fit_dask(est, folder, client=client, npartitions=4, policy="lightgbm", lightgbm_params=params,
                       chunk_rows=200, **CONT)
    model = got.policy_.models[0]
    assert isinstance(model, lightgbm.LGBMClassifier) and model.n_estimators == 15
    local = lightgbm.LGBMClassifier(verbose=-1, **params).fit(data.states, data.actions)
    proba = np.clip(local.predict_proba(data.states), 1e-3, 1.0)
    proba /= proba.sum(axis=1, keepdims=True)
    local_loss = -np.mean(np.log(proba[np.arange(data.n), data.actions]))
    uniform = np.log(data.n_actions)
    assert got.diagnostics_.policy_log_loss < uniform - 0.1  # it learned the logit policy
    assert got.diagnostics_.policy_log_loss == pytest.approx(local_loss, abs=0.05)  # as a one-machine LightGBM
    assert np.all(np.isfinite(got.reward(np.zeros((3, 2)))))


def test_worker_errors_and_bad_arguments(tmp_path, client):
    frame = panel(n_episodes=20, seed=9)
    folder = tmp_path / "d"
    folder.mkdir()
    frame.iloc[::-1].to_parquet(folder / "part.parquet", row_group_size=50)
    kw = dict(state="s", terminated="done", **COLS)
    with pytest.raises(ValueError, match="sorted by the episode column 'ep'"):  # raised on a worker
        fit_dask(GenPQR(q_model="exact"), folder, client=client, **kw)
    good = write_folder(panel(n_episodes=10, seed=1), tmp_path / "g")
    with pytest.raises(TypeError, match="distributed.Client"):
        fit_dask(GenPQR(q_model="exact"), good, client="tcp://127.0.0.1:8786", **kw)
    with pytest.raises(ValueError, match="policy must be one of"):
        fit_dask(GenPQR(q_model="lstd"), good, client=client, policy="boosted", **kw)
    with pytest.raises(ValueError, match="policy='lightgbm'"):
        fit_dask(GenPQR(q_model="exact"), good, client=client, policy="lightgbm", **kw)
    with pytest.raises(ValueError, match="npartitions"):
        fit_dask(GenPQR(q_model="exact"), good, client=client, npartitions=0, **kw)
    with pytest.raises(ValueError, match="episode, time"):
        fit_dask(GenPQR(q_model="exact"), good, client=client, state="s", action="a")
    with pytest.raises(ValueError, match="q_model='exact'"):
        fit_dask(GenPQR(), good, client=client, **kw)
    partitions, labels = plan_partitions(ParquetSource(good, **kw), client, 3)
    assert len(partitions) <= 3 and labels.tolist() == ["go", "stay", "wait"]


@pytest.mark.usefixtures("checkout_unchanged")
def test_docs_page_python_example_runs(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "distributed.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "__main__"}
    with recording() as found:
        exec(compile(blocks[0], "distributed.md", "exec"), scope)
    check_warnings("docs/distributed.md", "python", found)
    ref = fit_parquet(GenPQR(q_model="exact", normalization=anchor_action("stay"), gamma=0.9), tmp_path / "dask-logs",
                      episode="episode", time="t", state="s", action="a", progress=False)
    np.testing.assert_allclose(scope["model"].reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10)


# ------------------------------------------------------------------------------ the command line
def test_cli_dask_scheduler_local_cluster_equals_single_machine(tmp_path, capsys):
    """``genpqr fit FOLDER --dask-scheduler local:2`` starts two worker processes, fits on
    them and writes the single-machine streamed rewards (to 1e-10)."""
    from genpqr.app.cli import main

    frame = panel(n_episodes=80, seed=21)
    folder = write_folder(frame, tmp_path / "d")
    args = ["fit", str(folder), "--episode", "ep", "--time", "t", "--state", "s", "--action", "a", "--terminated",
            "done", "--gamma", "0.9", "--normalization", "anchor:stay", "--chunk-rows", "60", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "one")]) == 0, capsys.readouterr().err
    assert main(args + ["--dask-scheduler", "local:2", "--out", str(tmp_path / "two")]) == 0, capsys.readouterr().err
    one = pd.read_csv(tmp_path / "one" / "rewards.csv")
    two = pd.read_csv(tmp_path / "two" / "rewards.csv")
    np.testing.assert_allclose(two.filter(like="reward_").to_numpy(), one.filter(like="reward_").to_numpy(),
                               atol=1e-10, rtol=0)


@pytest.mark.parametrize("address", ["local", "local:0", "local:x", " "])
def test_cli_bad_dask_scheduler_is_named(tmp_path, capsys, address):
    from genpqr.app.cli import main

    code = main(["fit", str(tmp_path), "--episode", "ep", "--time", "t", "--state", "s", "--action", "a",
                 "--gamma", "0.9", "--normalization", "anchor:stay", "--dask-scheduler", address,
                 "--out", str(tmp_path / "out")])
    assert code == 2 and "--dask-scheduler" in capsys.readouterr().err
