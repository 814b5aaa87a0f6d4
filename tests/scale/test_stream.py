"""Out-of-core fits from Parquet folders (genpqr.scale, genpqr.scale): chunked reading
pairs next states as from_pandas does, and both statistics-based paths equal the in-memory fit."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from genpqr import GenPQR
from genpqr.data import from_pandas
from genpqr.normalization import anchor_action, mean_zero
from genpqr.scale import ParquetSource, fit_parquet
from genpqr.scale._statistics import TabularCounts, concatenate_chunks, tabular_chunk_counts

from genpqr.exceptions import CoverageWarning
from genpqr.stage2 import FQE, LSTDQ
from ..doc_warnings import check_warnings, printed, recording

COLS = dict(episode="ep", time="t", action="a")


def panel(n_episodes=120, n_states=7, seed=0, continuous=False, labels=("stay", "go", "wait")):
    """A long-format panel sorted by episode: random lengths (1..25), random dynamics, some
    episodes terminated, labels as strings; ``continuous``: a 2-d state with a logit policy."""
    rng = np.random.default_rng(seed)
    K = len(labels)
    P = rng.dirichlet(np.ones(n_states) * 0.5, size=(n_states, K))
    frames = []
    for e in range(n_episodes):
        T = int(rng.integers(1, 26))
        if continuous:
            x = np.empty((T, 2))
            x[0] = rng.normal(size=2)
            a = np.empty(T, dtype=int)
            for t in range(T):
                logits = np.array([0.0, x[t, 0], -x[t, 1]])[:K]
                p = np.exp(logits - logits.max())
                a[t] = rng.choice(K, p=p / p.sum())
                if t + 1 < T:
                    x[t + 1] = 0.8 * x[t] + 0.3 * (a[t] - 1) + 0.5 * rng.normal(size=2)
            df = pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1]})
        else:
            s = np.empty(T, dtype=int)
            a = rng.integers(0, K, size=T)
            s[0] = rng.integers(n_states)
            for t in range(T - 1):
                s[t + 1] = rng.choice(n_states, p=P[s[t], a[t]])
            df = pd.DataFrame({"s": s})
        df["ep"] = 1000 + 3 * e  # sorted, not consecutive
        df["t"] = np.arange(T) + 5
        df["a"] = np.asarray(labels)[a]
        df["done"] = False
        if rng.random() < 0.2:
            df.loc[T - 1, "done"] = True
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def write_folder(frame, folder, n_files=3, row_group_size=37, shuffle_within=True, seed=1):
    """Several files, small row groups; rows of an episode shuffled in time (allowed)."""
    folder.mkdir()
    rng = np.random.default_rng(seed)
    if shuffle_within:  # time order inside an episode is free: shuffle it, keep episodes contiguous
        key = rng.random(len(frame))
        frame = frame.assign(_k=key).sort_values(["ep", "_k"]).drop(columns="_k")
    bounds = np.linspace(0, len(frame), n_files + 1).astype(int)
    for i in range(n_files):
        frame.iloc[bounds[i]:bounds[i + 1]].to_parquet(folder / f"part-{i:02d}.parquet", row_group_size=row_group_size)
    return folder


def test_chunks_pair_next_states_like_from_pandas(tmp_path):
    frame = panel(n_episodes=60, seed=3)
    folder = write_folder(frame, tmp_path / "d")
    whole = from_pandas(frame, state="s", terminated="done", **COLS)
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=50, **COLS)
    chunks = list(source.chunks(whole.encoder.labels))
    assert len(chunks) > 5  # episodes did cross batch and file boundaries
    joined = concatenate_chunks(chunks)
    for name in ("states", "actions", "terminated", "truncated", "next_observed", "timesteps"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name), err_msg=name)
    np.testing.assert_array_equal(np.isnan(joined.next_states), np.isnan(whole.next_states))
    np.testing.assert_array_equal(np.nan_to_num(joined.next_states), np.nan_to_num(whole.next_states))
    assert joined.n_episodes == whole.n_episodes


@settings(max_examples=15, deadline=None)
@given(chunk_rows=st.integers(1, 400), row_group_size=st.integers(1, 97))
def test_any_chunk_size_gives_the_in_memory_rows(tmp_path_factory, chunk_rows, row_group_size):
    frame = panel(n_episodes=25, seed=12)
    folder = write_folder(frame, tmp_path_factory.mktemp("h") / "d", row_group_size=row_group_size)
    whole = from_pandas(frame, state="s", terminated="done", **COLS)
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=chunk_rows, **COLS)
    chunks = list(source.chunks(whole.encoder.labels))
    joined = concatenate_chunks(chunks)
    np.testing.assert_array_equal(joined.states, whole.states)
    np.testing.assert_array_equal(joined.actions, whole.actions)
    np.testing.assert_array_equal(joined.next_observed, whole.next_observed)
    np.testing.assert_array_equal(np.nan_to_num(joined.next_states, nan=-1), np.nan_to_num(whole.next_states, nan=-1))
    summed = tabular_chunk_counts(chunks[0])
    for c in chunks[1:]:
        summed = summed + tabular_chunk_counts(c)
    total = tabular_chunk_counts(whole)
    np.testing.assert_array_equal(summed.choices, total.choices)
    assert (summed.moves != total.moves).nnz == 0


def test_counts_add_up_over_any_split(tmp_path):
    frame = panel(n_episodes=40, seed=4)
    whole = from_pandas(frame, state="s", terminated="done", **COLS)
    total = tabular_chunk_counts(whole)
    source = ParquetSource(write_folder(frame, tmp_path / "d"), state="s", terminated="done", chunk_rows=30, **COLS)
    parts = [tabular_chunk_counts(c) for c in source.chunks(whole.encoder.labels)]
    summed = parts[0]
    for p in parts[1:]:
        summed = summed + p
    assert isinstance(summed, TabularCounts) and summed.n_states == total.n_states
    np.testing.assert_array_equal(summed.choices, total.choices)
    np.testing.assert_array_equal(summed.visits, total.visits)
    assert (summed.moves != total.moves).nnz == 0
    assert summed.n_rows == whole.n and summed.n_episodes == whole.n_episodes


@pytest.mark.parametrize("normalization", [mean_zero(), anchor_action("stay")])
def test_tabular_out_of_core_equals_in_memory(tmp_path, normalization):
    frame = panel(n_episodes=150, seed=5)
    folder = write_folder(frame, tmp_path / "d", n_files=4, row_group_size=53)
    est = GenPQR(q_model="exact", gamma=0.9, normalization=normalization, progress=False)
    ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, state="s", terminated="done", **COLS))
    got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=70, progress=False, **COLS)
    assert not hasattr(est, "stage2_")  # the argument is not fitted in place
    np.testing.assert_allclose(got.reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10, rtol=0)
    grid = np.arange(ref.n_states_)[:, None]
    np.testing.assert_allclose(got.continuation(grid), ref.continuation(grid), atol=1e-10, rtol=0)
    np.testing.assert_allclose(got.log_policy(grid), ref.log_policy(grid), atol=1e-12, rtol=0)
    np.testing.assert_array_equal(got.visited_states_, ref.visited_states_)
    d, r = got.diagnostics_, ref.diagnostics_
    assert (d.n_transitions, d.n_episodes, d.n_last_choices, d.support_count, d.action_counts) == \
        (r.n_transitions, r.n_episodes, r.n_last_choices, r.support_count, r.action_counts)
    assert d.policy_log_loss == pytest.approx(r.policy_log_loss, abs=1e-12)
    assert d.clip == r.clip and d.clip_rule == r.clip_rule
    assert d.max_mu_over_pi == pytest.approx(r.max_mu_over_pi, rel=1e-10)
    assert d.coverage_share == pytest.approx(r.coverage_share, abs=1e-12)  # summed over chunks
    assert list(got.reward_table().columns) == ["go", "stay", "wait"]


def test_streamed_coverage_share_equals_in_memory(tmp_path):
    """The share of rows behind the coverage check adds up over chunks: an anchor ("go") made
    rare at states 0-2 flags their rows in both fits alike."""
    frame = panel(n_episodes=150, seed=5)
    rare = (frame.s < 3) & (frame.a == "go") & (np.random.default_rng(0).random(len(frame)) < 0.95)
    frame.loc[rare, "a"] = "stay"
    folder = write_folder(frame, tmp_path / "d", n_files=4, row_group_size=53)
    est = GenPQR(q_model="exact", gamma=0.9, normalization=anchor_action("go"), progress=False)
    with pytest.warns(CoverageWarning, match="rests on rarely taken actions"):
        ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, state="s", terminated="done", **COLS))
    with pytest.warns(CoverageWarning, match="rests on rarely taken actions"):
        got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=70, progress=False, **COLS)
    share = np.mean(frame.s < 3)  # frequencies: "go" below 1/20 at exactly these states
    assert ref.diagnostics_.coverage_share == pytest.approx(share, abs=1e-12)
    assert got.diagnostics_.coverage_share == pytest.approx(share, abs=1e-12)


def test_tabular_auto_clip_from_counts_matches(tmp_path):
    """A rare action never chosen at some states: the auto clip floors, from counts as from rows."""
    frame = panel(n_episodes=40, seed=6)
    rare = frame["a"].eq("wait") & frame["s"].ge(3)
    frame.loc[rare, "a"] = "go"
    folder = write_folder(frame, tmp_path / "d")
    est = GenPQR(q_model="exact", progress=False, transition_model="counts")  # streamed fits use the counts
    with pytest.warns(Warning):
        ref = GenPQR(**est.get_params()).fit(from_pandas(frame, state="s", terminated="done", **COLS))
    with pytest.warns(Warning):
        got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=40, progress=False, **COLS)
    assert got.policy_.clip == ref.policy_.clip and got.policy_.clip[0] > 0
    assert got.diagnostics_.fraction_floored == pytest.approx(ref.diagnostics_.fraction_floored, abs=1e-12)
    np.testing.assert_allclose(got.reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10, rtol=0)


def prefit_closed_form_case(tmp_path):
    """A continuous panel as a Parquet folder, the closed-form estimator with a prefitted
    logistic stage 1, and its in-memory fit: ``(est, ref, folder)``."""
    from sklearn.linear_model import LogisticRegression

    frame = panel(n_episodes=150, seed=7, continuous=True)
    folder = write_folder(frame, tmp_path / "d", n_files=3, row_group_size=41)
    data = from_pandas(frame, state=["x0", "x1"], terminated="done", **COLS)
    policy = LogisticRegression(max_iter=1000).fit(data.states, data.actions)
    est = GenPQR(q_model=LSTDQ(alpha=1e-6, chunk_size=100), policy_model=policy, policy_prefit=True, gamma=0.9,
                 normalization=anchor_action("stay"), progress=False)
    return est, GenPQR(**est.get_params(deep=False)).fit(data), folder


def test_closed_form_out_of_core_equals_in_memory(tmp_path):
    est, ref, folder = prefit_closed_form_case(tmp_path)
    got = fit_parquet(est, folder, state=["x0", "x1"], terminated="done", chunk_rows=90, progress=False, **COLS)
    X = np.random.default_rng(0).normal(size=(200, 2))
    np.testing.assert_allclose(got.reward(X), ref.reward(X), atol=1e-8, rtol=0)
    np.testing.assert_allclose(got.q(X), ref.q(X), atol=1e-8, rtol=0)
    np.testing.assert_allclose(got.stage2_.fqe.statistics_.A, ref.stage2_.fqe.statistics_.A, atol=1e-8)
    assert got.diagnostics_.n_transitions == ref.diagnostics_.n_transitions
    assert got.diagnostics_.policy_log_loss == pytest.approx(ref.diagnostics_.policy_log_loss, abs=1e-12)


@pytest.mark.filterwarnings("ignore::genpqr.exceptions.CoverageWarning")
def test_closed_form_sampled_stage1_is_seeded_and_saves(tmp_path):
    frame = panel(n_episodes=100, seed=8, continuous=True)
    folder = write_folder(frame, tmp_path / "d")
    kw = dict(state=["x0", "x1"], terminated="done", chunk_rows=200, sample_rows=300, progress=False, **COLS)
    est = GenPQR(q_model="lstd", random_state=0, progress=False)
    a, b = fit_parquet(est, folder, **kw), fit_parquet(est, folder, **kw)
    X = np.random.default_rng(1).normal(size=(50, 2))
    np.testing.assert_array_equal(a.reward(X), b.reward(X))
    assert not hasattr(a, "training_data_")
    a.save(tmp_path / "m.joblib")
    from genpqr import load

    np.testing.assert_array_equal(load(tmp_path / "m.joblib").reward(X), a.reward(X))


def test_unsorted_dataset_is_refused(tmp_path):
    frame = panel(n_episodes=20, seed=9)
    folder = tmp_path / "d"
    folder.mkdir()
    frame.iloc[::-1].to_parquet(folder / "part.parquet")  # episodes in decreasing order
    with pytest.raises(ValueError, match="sorted by the episode column 'ep'"):
        fit_parquet(GenPQR(q_model="exact"), folder, state="s", terminated="done", progress=False, **COLS)


def test_bad_arguments_are_named(tmp_path):
    frame = panel(n_episodes=10, seed=10)
    folder = write_folder(frame, tmp_path / "d")
    with pytest.raises(ValueError, match="missing column"):
        fit_parquet(GenPQR(q_model="exact"), folder, state="nope", **COLS)
    with pytest.raises(ValueError, match="q_model='exact'"):
        fit_parquet(GenPQR(), folder, state="s", **COLS)
    with pytest.raises(ValueError, match="cross_fit"):
        fit_parquet(GenPQR(q_model="exact", cross_fit=2), folder, state="s", **COLS)
    with pytest.raises(FileNotFoundError):
        fit_parquet(GenPQR(q_model="exact"), tmp_path / "missing", state="s", **COLS)
    with pytest.raises(TypeError, match="GenPQR"):
        fit_parquet(object(), folder, state="s", **COLS)


def test_cli_fits_a_parquet_folder_out_of_core(tmp_path, capsys):
    from genpqr import load
    from genpqr.app.cli import main

    frame = panel(n_episodes=80, seed=11)
    folder = write_folder(frame, tmp_path / "d")
    out = tmp_path / "out"
    code = main(["fit", str(folder), "--episode", "ep", "--time", "t", "--state", "s", "--action", "a",
                 "--terminated", "done", "--gamma", "0.9", "--normalization", "anchor:stay", "--chunk-rows", "60",
                 "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert "out of core" in capsys.readouterr().out
    ref = GenPQR(q_model="exact", gamma=0.9, normalization=anchor_action("stay")).fit(
        from_pandas(frame, state="s", terminated="done", **COLS))
    rewards = pd.read_csv(out / "rewards.csv")
    np.testing.assert_allclose(rewards[["reward_go", "reward_stay", "reward_wait"]].to_numpy(),
                               ref.reward_table().to_numpy(), atol=1e-10)
    np.testing.assert_allclose(load(out / "model.joblib").reward_table().to_numpy(), ref.reward_table().to_numpy(),
                               atol=1e-10)
    bad = main(["fit", str(folder), "--episode", "ep", "--time", "t", "--state", "s", "--action", "a", "--gamma",
                "0.9", "--normalization", "anchor:stay", "--bootstrap", "5", "--out", str(out), "--quiet"])
    assert bad == 2 and "cannot be used out of core" in capsys.readouterr().err


@pytest.mark.usefixtures("checkout_unchanged")
def test_docs_page_python_example_runs(tmp_path, monkeypatch, capsys):
    """docs/out_of_core.md: its python blocks and its genpqr command run, with the warnings the page explains."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "out_of_core.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    with recording() as found:
        for block in blocks:
            exec(compile(block, "out_of_core.md", "exec"), {})
    assert (tmp_path / "model.joblib").exists()
    check_warnings("docs/out_of_core.md", "python", found)
    # the page's command, on the folder the first block wrote
    from genpqr.app.cli import main

    command = re.search(r"```\n(genpqr fit logs/.*?)```", text, flags=re.S).group(1).replace("\\\n", " ")
    with recording() as found:
        assert main(shlex.split(command)[1:] + ["--quiet"]) == 0
    console = capsys.readouterr()
    assert (tmp_path / "fit-out" / "rewards.csv").exists()
    check_warnings("docs/out_of_core.md", "shell", found + printed(console.out + console.err))


def test_tabular_with_a_given_kernel_equals_in_memory(tmp_path):
    frame = panel(n_episodes=60, seed=13)
    folder = write_folder(frame, tmp_path / "d")
    P = np.random.default_rng(2).dirichlet(np.ones(7), size=(7, 3))
    est = GenPQR(q_model="exact", transition_model=P, n_states=7, progress=False)
    ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, state="s", terminated="done", **COLS))
    got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=64, progress=False, **COLS)
    np.testing.assert_allclose(got.reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="callable transition_model"):
        fit_parquet(GenPQR(q_model="exact", transition_model=lambda *a: P), folder, state="s", progress=False, **COLS)


def test_cli_closed_form_mode_for_continuous_states(tmp_path, capsys):
    from genpqr import load
    from genpqr.app.cli import main

    frame = panel(n_episodes=60, seed=14, continuous=True)
    path = tmp_path / "logs.parquet"
    frame.to_parquet(path, row_group_size=100)
    out = tmp_path / "out"
    code = main(["fit", str(path), "--episode", "ep", "--time", "t", "--state", "x0,x1", "--action", "a",
                 "--gamma", "0.9", "--normalization", "mean-zero", "--chunk-rows", "150", "--out", str(out),
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert "closed-form LSTD" in capsys.readouterr().out
    model = load(out / "model.joblib")
    assert model.reward(np.zeros((3, 2))).shape == (3, 3) and not (out / "rewards.csv").exists()


# ============================================================================ streamed FQE
class RunningCellMeans:
    """A native Q-model that *accumulates*: ``Q(s, a)`` is the mean of every target ever given
    for cell (s, a), over all ``fit_q`` calls. Its table after a sequence of calls depends only
    on the multiset of (cell, target) pairs, not on how the rows are split into calls, so
    streamed FQE over many chunks must equal in-memory FQE (one call per iteration) exactly.
    ``calls`` records the rows of every call (a spy shared by all copies)."""

    calls: list = []

    def __init__(self, n_states=7):
        self.n_states = n_states

    def get_params(self, deep=False):
        return {"n_states": self.n_states}

    def fit_q(self, states, actions, targets, n_actions):
        RunningCellMeans.calls.append(len(targets))
        cells = np.asarray(states, dtype=np.int64).reshape(-1) * n_actions + np.asarray(actions)
        size = self.n_states * n_actions
        if not hasattr(self, "sums_"):
            self.sums_, self.counts_, self.n_actions_ = np.zeros(size), np.zeros(size), n_actions
        self.sums_ += np.bincount(cells, weights=targets, minlength=size)
        self.counts_ += np.bincount(cells, minlength=size)
        return self

    def predict_q(self, states):
        table = np.divide(self.sums_, self.counts_, out=np.zeros_like(self.sums_), where=self.counts_ > 0)
        return table.reshape(self.n_states, self.n_actions_)[np.asarray(states, dtype=np.int64).reshape(-1)]


def _fqe_setup(tmp_path, q_model, n_iterations=6, tol=None, **params):
    from sklearn.linear_model import LogisticRegression

    frame = panel(n_episodes=80, seed=21)
    folder = write_folder(frame, tmp_path / "d")
    data = from_pandas(frame, state="s", terminated="done", **COLS)
    policy = LogisticRegression(max_iter=1000).fit(data.states, data.actions)
    est = GenPQR(q_model=FQE(q_model, n_iterations=n_iterations, tol=tol, **params), policy_model=policy,
                 policy_prefit=True, gamma=0.9, normalization=anchor_action("stay"), progress=False)
    return est, GenPQR(**est.get_params(deep=False)).fit(data), folder, len(frame)


def _assert_same_fqe(got, ref):
    grid = np.arange(7.0)[:, None]
    np.testing.assert_allclose(got.q(grid), ref.q(grid), atol=1e-10, rtol=0)
    np.testing.assert_allclose(got.reward(grid), ref.reward(grid), atol=1e-10, rtol=0)
    d, r = got.diagnostics_, ref.diagnostics_
    assert d.n_iterations == r.n_iterations and d.converged == r.converged
    np.testing.assert_allclose(d.bellman_residuals, r.bellman_residuals, atol=1e-10, rtol=0)
    np.testing.assert_allclose(d.target_changes, r.target_changes, atol=1e-10, rtol=0)
    assert d.n_transitions == r.n_transitions and d.policy_log_loss == pytest.approx(r.policy_log_loss, abs=1e-12)


@pytest.mark.parametrize("tol, structure", [(None, "continuation"), (1e-3, "continuation"), (1e-3, "direct")])
@pytest.mark.filterwarnings("ignore::genpqr.exceptions.ConvergenceWarning")
def test_streamed_fqe_one_chunk_equals_in_memory_fqe(tmp_path, tol, structure):
    """TabularQModel fits cell means exactly per call: with one chunk, streamed FQE is the
    in-memory FQE (same prefitted policy), iterations, histories and early stop included, for
    both structures (regress ``P mu Q`` or Q)."""
    from genpqr.stage2 import TabularQModel

    est, ref, folder, n = _fqe_setup(tmp_path, TabularQModel(7), tol=tol, n_iterations=6 if tol is None else 300,
                                     structure=structure)
    assert ref.stage2_.fqe.continuation_ == (structure == "continuation")
    got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=10 * n, progress=False, **COLS)
    _assert_same_fqe(got, ref)
    assert got.diagnostics_.solver == "fqe (out of core)" and not hasattr(got, "training_data_")
    assert got.diagnostics_.n_iterations == (6 if tol is None else ref.stage2_.fqe.n_iter_) < 300
    assert got.diagnostics_.converged == (tol is not None)
    assert len(got.stage2_.fqe.mean_square_changes_) == got.diagnostics_.n_iterations
    got.save(tmp_path / "m.joblib")
    from genpqr import load

    grid = np.arange(7.0)[:, None]
    np.testing.assert_array_equal(load(tmp_path / "m.joblib").q(grid), got.q(grid))
    assert "fqe (out of core)" in str(got.summary())


@pytest.mark.filterwarnings("ignore::genpqr.exceptions.ConvergenceWarning")
def test_streamed_fqe_many_chunks_equals_in_memory_for_an_accumulating_model(tmp_path):
    """Chunking does not change the result of a model that accumulates (RunningCellMeans),
    and fit_q never sees more than one chunk's rows (the chunks are never concatenated)."""
    est, ref, folder, n = _fqe_setup(tmp_path, RunningCellMeans(7))
    RunningCellMeans.calls.clear()
    got = fit_parquet(est, folder, state="s", terminated="done", chunk_rows=60, progress=False, **COLS)
    calls = list(RunningCellMeans.calls)
    _assert_same_fqe(got, ref)
    source = ParquetSource(folder, state="s", terminated="done", chunk_rows=60, **COLS)
    per_chunk = [c.n - c.n_choice_only for c in source.chunks(got.encoder_.labels)]
    assert len(per_chunk) > 5 and max(per_chunk) < n / 5
    assert calls == per_chunk * 6  # one fit_q per chunk and iteration, with that chunk's transitions only


@pytest.mark.filterwarnings("ignore::genpqr.exceptions.ConvergenceWarning")
def test_streamed_fqe_network_is_close_to_the_exact_answer(tmp_path):
    """DuelingQNetwork over several chunks (one-hot states, a saturated logit = the cell
    frequencies as stage 1) recovers the exact tabular reward of the same data within 0.1 (sup
    over the 21 cells; measured 0.038, the exact answer's range is 0.55): the network's
    approximation and SGD noise, not sampling error (both sides use the same rows)."""
    pytest.importorskip("torch")
    from genpqr.models._qnetwork import DuelingQNetwork

    frame = panel(n_episodes=200, seed=22)
    onehot = pd.DataFrame(np.eye(7)[frame["s"]], columns=[f"e{i}" for i in range(7)])
    frame = pd.concat([frame, onehot], axis=1)
    folder = write_folder(frame, tmp_path / "d")
    cols = [f"e{i}" for i in range(7)]
    exact = GenPQR(q_model="exact", gamma=0.5, normalization=anchor_action("stay")).fit(
        from_pandas(frame, state="s", terminated="done", **COLS))
    net = DuelingQNetwork(hidden_layer_sizes=(32,), learning_rate=1e-3, batch_size=64, epochs_per_iteration=2,
                          random_state=0)
    from sklearn.linear_model import LogisticRegression

    saturated = LogisticRegression(C=1e8, max_iter=5000)  # on one-hot states: the cell frequencies
    est = GenPQR(q_model=FQE(net, n_iterations=15, tol=None), gamma=0.5, normalization=anchor_action("stay"),
                 policy_model=saturated, progress=False, random_state=0)
    got = fit_parquet(est, folder, state=cols, terminated="done", chunk_rows=300, progress=False, **COLS)
    r_exact = exact.reward_table().to_numpy()
    r_got = got.reward(np.eye(7))
    np.testing.assert_allclose(r_got, r_exact, atol=0.1)
    assert got.diagnostics_.n_iterations == 15 and len(got.diagnostics_.bellman_residuals) == 15


def test_streamed_fqe_refuses_a_q_model_without_fit_q(tmp_path):
    from sklearn.linear_model import Ridge

    folder = write_folder(panel(n_episodes=10, seed=23), tmp_path / "d")
    with pytest.raises(ValueError, match=r"q_model=Ridge\(\).*no fit_q/predict_q"):
        fit_parquet(GenPQR(q_model=Ridge()), folder, state="s", progress=False, **COLS)
    with pytest.raises(ValueError, match="validation_fraction"):
        fit_parquet(GenPQR(q_model=FQE(RunningCellMeans(), validation_fraction=0.2)), folder, state="s", **COLS)


def test_cli_neural_fqe_out_of_core(tmp_path, capsys):
    """``--q-model mlp`` out of core: stage 1 on the sample, neural FQE one pass per iteration."""
    pytest.importorskip("torch")
    from genpqr import load
    from genpqr.app.cli import main

    frame = panel(n_episodes=60, seed=15, continuous=True)
    path = tmp_path / "logs.parquet"
    frame.to_parquet(path, row_group_size=100)
    out = tmp_path / "out"
    code = main(["fit", str(path), "--episode", "ep", "--time", "t", "--state", "x0,x1", "--action", "a",
                 "--gamma", "0.9", "--normalization", "anchor:stay", "--q-model", "mlp", "--n-iterations", "3",
                 "--chunk-rows", "150", "--out", str(out), "--quiet", "--verbose"])  # internals: stage 2
    assert code == 0, capsys.readouterr().err
    printed = " ".join(capsys.readouterr().out.split())  # lines wrapped at 100 characters
    assert "neural FQE streamed by chunk" in printed and "fqe (out of core)" in printed
    model = load(out / "model.joblib")
    assert model.diagnostics_.n_iterations == 3 and np.isfinite(model.reward(np.zeros((4, 2)))).all()
    bad = main(["fit", str(path), "--episode", "ep", "--time", "t", "--state", "x0,x1", "--action", "a",
                "--gamma", "0.9", "--normalization", "anchor:stay", "--q-model", "hgb", "--chunk-rows", "150",
                "--out", str(out), "--quiet"])
    assert bad == 2 and "mlp (neural FQE streamed by chunk)" in capsys.readouterr().err


# ============================================================================ the validation pass
def _two_clocks(n_episodes=40):
    """A quarter of the episodes tick by 2 (each of those has gaps under the modal step 1)."""
    frame = panel(n_episodes=n_episodes, seed=31)
    slow = frame.ep >= frame.ep.quantile(0.75)
    return frame.assign(t=np.where(slow, 2 * frame.t, frame.t))


def test_scan_sees_the_whole_data(tmp_path):
    """The validation pass gives the whole frame's labels and time steps at any chunk size, so a
    chunk is judged by the whole data's gap rule (a chunk of slow episodes alone has modal step 2)."""
    from genpqr.data._long_format import time_steps

    frame = _two_clocks()
    folder = write_folder(frame, tmp_path / "d")
    whole = time_steps(frame.sort_values(["ep", "t"]), "ep", "t")
    for chunk_rows in (1, 17, 100, 10_000):
        source = ParquetSource(folder, state="s", chunk_rows=chunk_rows, **COLS)
        scan = source.scan(progress=False, states=True)
        assert scan.n_rows == len(frame) and scan.n_episodes == frame.ep.nunique()
        np.testing.assert_array_equal(scan.labels, np.unique(frame.a))
        np.testing.assert_array_equal(scan.state_values, np.unique(frame.s))
        np.testing.assert_array_equal(scan.steps.values, whole.values)
        np.testing.assert_array_equal(scan.steps.counts, whole.counts)
        assert scan.steps.expected == whole.expected == 1.0
        with pytest.raises(ValueError, match="time gap inside an episode"):
            fit_parquet(GenPQR(q_model="exact"), source, progress=False)


@pytest.mark.parametrize("chunk_rows", [1, 17, 100])
def test_split_at_gaps_equals_in_memory_at_any_chunk_size(tmp_path, chunk_rows):
    frame = _two_clocks()
    folder = write_folder(frame, tmp_path / "d")
    est = GenPQR(q_model="exact", gamma=0.9, normalization=anchor_action("stay"), progress=False,
                 transition_model="counts")  # streamed fits use the counts
    ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, state="s", time_gaps="split", **COLS))
    got = fit_parquet(est, folder, state="s", time_gaps="split", chunk_rows=chunk_rows, progress=False, **COLS)
    np.testing.assert_allclose(got.reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10, rtol=0)
    assert got.diagnostics_.n_transitions == ref.diagnostics_.n_transitions
