"""Bad inputs of the newer features (issue 33), table-driven as in ``tests/estimator/test_bad_inputs.py``:
latent types, kernel files, action features, interrupted runs, files that change while read.

Every case states the kind of outcome it expects: ``Err(phrases)`` (exit code 2, one line on
stderr holding every phrase: the input's name and what was expected, no traceback) or
``Ok(check)`` (exit code 0 and ``check(out_dir, stdout, stderr)`` holds: the correct result, or
the warning naming the input and the output in doubt).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import pytest

from genpqr import stage2
from genpqr.app.cli import main
from genpqr.envs import random_mdp, simulate_tabular

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

S, GAMMA, LABELS = 6, 0.9, np.array(["a", "b", "c"])


@dataclass
class Err:
    phrases: tuple

    def __init__(self, *phrases):
        self.phrases = phrases


@dataclass
class Ok:
    check: Callable


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_outcome(case, expected, code, out, stdout, stderr):
    assert "Traceback" not in stderr, stderr
    if isinstance(expected, Err):
        assert code == 2, (case, stdout, stderr)
        message = stderr.strip().splitlines()[-1]
        assert message.startswith(("genpqr fit: error: ", "genpqr: error: ", "genpqr counterfactual: error: ")), \
            stderr
        for phrase in expected.phrases:
            assert phrase in message, (case, message)
        assert len(message) < 900, f"{case}: {len(message)} characters"
    else:
        assert code == 0, (case, stderr)
        assert expected.check(out, stdout, stderr), (case, stdout, stderr)


# ----------------------------------------------------------------------------- latent types: the user's episode ids
@pytest.fixture(scope="module")
def two_types(tmp_path_factory):
    """Two types of 90 and 60 episodes of a 6-state, 3-action MDP (opposite rewards)."""
    mdp = random_mdp(S, 3, n_next=3, gamma=GAMMA, random_state=1, reward_scale=1.5)
    frames, offset = [], 0
    for j, (m, n) in enumerate(zip([mdp, dataclasses.replace(mdp, reward=-mdp.reward)], (90, 60))):
        data = simulate_tabular(m, stage2.soft_optimal_policy(m.reward, m.kernel, GAMMA), n_episodes=n, horizon=12,
                                random_state=20 + j)
        frames.append(pd.DataFrame({"episode": data.episode_ids + offset, "type": j,
                                    "time": data.timesteps.astype(int), "state": data.states[:, 0].astype(int),
                                    "action": LABELS[data.actions]}))
        offset += n
    return pd.concat(frames, ignore_index=True)


def _ids(frame, kind):
    """The episode ids 0..89 and 1000..1059 (numbers), or text ids ``ep_0000``.. in another order."""
    e = frame.episode.to_numpy()
    if kind == "numbers":
        return frame.assign(episode=np.where(e < 90, e, e - 90 + 1000))
    return frame.assign(episode=[f"ep_{(149 - i) * 7 % 150:04d}" for i in e])  # sorted order != the data's


def _features_file(path):
    """``--features``: one indicator per (state, non-anchor action), a structural model of the
    6-state tabular data (every reward free but the anchor's)."""
    rows = []
    for s in range(S):
        row = {"state_index": s}
        for k, label in enumerate(LABELS):
            rows.append({**row, "action": label, **{f"r{t}_{b}": float(t == s and b == label)
                                                     for t in range(S) for b in LABELS[1:]}})
    pd.DataFrame(rows).to_csv(path, index=False)


ROUTES = {"tabular": [], "continuous states": ["--q-model", "linear"],
          "structural": ["--features", "{tmp}/features.csv", "--policy-model", "frequency"]}


def _typed_fit(frame, route, tmp_path, capsys):
    frame.drop(columns="type").to_csv(tmp_path / "data.csv", index=False)
    _features_file(tmp_path / "features.csv")
    out = tmp_path / "out"
    argv = ["fit", tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--state", "state",
            "--action", "action", "--gamma", GAMMA, "--normalization", "anchor:a", "--types", "2", "--quiet",
            "--out", out, *[a.replace("{tmp}", str(tmp_path)) for a in ROUTES[route]]]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0, stderr
    return out


@pytest.fixture(scope="module")
def structural_typed(two_types, tmp_path_factory):
    """``--features --types 2`` on the data with episode ids 0..89 and 1000..1059."""
    frame = _ids(two_types, "numbers")
    folder = tmp_path_factory.mktemp("structural_typed")
    frame.drop(columns="type").to_csv(folder / "data.csv", index=False)
    _features_file(folder / "features.csv")
    argv = ["fit", folder / "data.csv", "--episode", "episode", "--time", "time", "--state", "state",
            "--action", "action", "--gamma", GAMMA, "--normalization", "anchor:a", "--types", "2", "--quiet",
            "--out", folder / "out", "--features", folder / "features.csv", "--policy-model", "frequency"]
    assert main([str(a) for a in argv]) == 0
    return folder / "out"


@pytest.mark.parametrize("route, ids", [("tabular", "numbers"), ("tabular", "text"), ("continuous states", "text"),
                                        ("structural", "numbers")])
def test_types_csv_joins_with_the_data(two_types, structural_typed, route, ids, tmp_path, capsys):
    frame = _ids(two_types, ids)
    out = structural_typed if route == "structural" else _typed_fit(frame, route, tmp_path, capsys)
    types = pd.read_csv(out / "types.csv", dtype={"episode": frame.episode.dtype})
    assert len(types) == frame.episode.nunique() and types.episode.is_unique
    truth = frame.groupby("episode")["type"].first()
    joined = types.join(truth, on="episode", how="inner")
    assert len(joined) == len(types)  # every row of types.csv is an episode of the data, by its own id
    best = types.filter(like="posterior_type_").to_numpy().argmax(axis=1)
    agree = np.mean(best[joined.index] == joined["type"].to_numpy())
    # the types found are the simulated ones, episode by episode (a linear Q of the state number is a
    # coarser model of these tabular choices: fewer episodes are told apart)
    assert max(agree, 1 - agree) > (0.7 if route == "continuous states" else 0.9), agree
    if route == "structural":  # the mixing proportions' intervals stay in [0, 1] and hold the estimate
        params = pd.read_csv(out / "parameters.csv")
        props = params[params.parameter.str.startswith("mixing proportion[")]
        assert len(props) == 2 and props.estimate.sum() == pytest.approx(1.0)
        assert (props.ci_low > 0).all() and (props.ci_high < 1).all()
        assert (props.ci_low < props.estimate).all() and (props.estimate < props.ci_high).all()
        assert props.ci_kind.str.contains("logit scale").all()


def test_proportion_interval_is_the_logit_wald_interval():
    from scipy.special import expit, logit

    from genpqr.app.structural import proportion_interval

    p, se, z = np.array([0.05, 0.5, 0.97, 0.0, 1.0]), np.array([0.08, 0.1, 0.05, 0.1, 0.1]), 1.96
    low, high = proportion_interval(p, se, z)
    half = z * se[:3] / (p[:3] * (1 - p[:3]))
    np.testing.assert_allclose(low[:3], expit(logit(p[:3]) - half), rtol=1e-12)
    np.testing.assert_allclose(high[:3], expit(logit(p[:3]) + half), rtol=1e-12)
    assert np.all((low[:3] > 0) & (high[:3] < 1)) and p[0] - z * se[0] < 0  # the plain Wald one leaves [0, 1]
    assert np.isnan(low[3:]).all() and np.isnan(high[3:]).all()  # at 0 or 1: no interval, not a zero-width one


def test_counterfactual_on_a_typed_structural_fit_names_the_python_route(structural_typed, tmp_path, capsys):
    argv = ["counterfactual", structural_typed, "--parameter-change", "r0_b=*2", "--out", tmp_path / "cf", "--quiet"]
    code, stdout, stderr = _run(argv, capsys)
    _assert_outcome("typed counterfactual", Err("2 latent types", "--types 2", "genpqr.structural.type_counterfactuals",
                                                "model.joblib"), code, None, stdout, stderr)
    assert not (tmp_path / "cf").exists()
    # the route it names answers, per type and averaged
    import genpqr
    from genpqr.structural import type_counterfactuals

    table = type_counterfactuals(genpqr.load(structural_typed / "model.joblib").structural_,
                                 parameter_change={"r0_b": "*2"})
    assert set(table["type"].astype(str)) == {"0", "1", "mixture"}


# ----------------------------------------------------------------------------- the table: genpqr fit
def _base():
    from tests.estimator.test_bad_inputs import base_frame

    return base_frame()  # 30 episodes x 6 steps, states 0..3, actions a, b


def _kernel(values, dtype=np.float64):
    """A (4, 2, 4) kernel file maker: ``values`` is a function of the uniform kernel."""
    def write(tmp):
        np.save(tmp / "kernel.npy", np.asarray(values(np.full((4, 2, 4), 0.25)), dtype=dtype))
    return write


def _negative(P):
    P[1, 0, 2], P[1, 0, 3] = -0.25, 0.75
    return P


def _cell(P, index, value):
    P[index] = value
    return P


def _warned(*phrases, absent=()):
    return lambda out, so, se: all(p in so for p in phrases) and not any(p in so for p in absent)


KERNEL = ["--transition", "{tmp}/kernel.npy"]
ITEMS = ["--action-features", "{tmp}/items.csv"]


def _items(**columns):
    """``items.csv``: the actions a, b (taken) and c (never taken) with the given feature columns."""
    def write(tmp):
        pd.DataFrame({"action": ["a", "b", "c"], **columns}).to_csv(tmp / "items.csv", index=False)
    return write

# name: (input maker (tmp -> None; writes beside data.csv) or None, data maker or None, extra argv, outcome)
CLI = {
    # --- kernel files: checked as a kernel, then against the data -------------------------------------
    "kernel with a negative entry": (_kernel(_negative), None, KERNEL,
                                     Err("kernel.npy", "(--transition)", "P[1, 0, 2] = -0.25 is negative")),
    "kernel rows summing to 2": (_kernel(lambda P: 2 * P), None, KERNEL,
                                 Err("kernel.npy", "(--transition)", "P[0, 0, :] sums to 2, not 1", "8 of 8 rows")),
    "kernel with a NaN": (_kernel(lambda P: _cell(P, (2, 1, 0), np.nan)), None, KERNEL,
                          Err("kernel.npy", "(--transition)", "P[2, 1, 0] = nan is not a number")),
    "kernel of integer ones": (_kernel(lambda P: P * 0 + 1, dtype=np.int64), None, KERNEL,
                               Err("kernel.npy", "(--transition)", "holds integers", "as floats")),
    "kernel of 0/1 booleans": (_kernel(lambda P: np.broadcast_to(np.eye(4)[:, None, :], P.shape), dtype=bool), None,
                               KERNEL, Err("kernel.npy", "(--transition)", "holds booleans")),
    "kernel in float32, rows off by rounding": (_kernel(lambda P: P / 3 * 3, dtype=np.float32), None, KERNEL,
                                                Ok(_warned(absent=("KernelDataWarning",)))),
    "identity kernel against the data": (
        _kernel(lambda P: np.broadcast_to(np.eye(4)[:, None, :], P.shape)), None, KERNEL,
        Ok(_warned("KernelDataWarning", "kernel.npy", "(--transition)", "gives probability zero to", "of the observed",
                   "rewards.csv", "P["))),
    # --- action features that do not tell the actions apart ----------------------------------------------
    "only feature constant": (_items(size=[1.0, 1.0, 1.0]), None, ITEMS,
                              Err("--action-features", "items.csv", "no feature column varies", "['size']",
                                  "same reward")),
    "a constant feature beside a varying one": (
        _items(size=[1.0, 1.0, 1.0], price=[1.0, 2.0, 3.0]), None, ITEMS,
        Ok(_warned("ActionFeaturesWarning", "items.csv", "['size'] are constant", absent=("share their",)))),
    "two actions with the same features": (
        _items(price=[1.0, 2.0, 1.0], quality=[0.5, 1.0, 0.5]), None, ITEMS,
        Ok(_warned("ActionFeaturesWarning", "--action-features", "2 actions share their feature row", "['a', 'c']",
                   "rewards.csv", "equal by construction"))),
    "linearly dependent features": (
        _items(price=[1.0, 2.0, 4.0], quality=[0.5, 1.0, 0.0], total=[1.5, 3.0, 4.0]), None, ITEMS,
        Ok(_warned("ActionFeaturesWarning", "linearly dependent", "(rank 2)", "not identified"))),
    "features that separate the actions": (_items(price=[1.0, 2.0, 4.0], quality=[0.5, 1.0, 0.0]), None, ITEMS,
                                           Ok(_warned(absent=("ActionFeaturesWarning",)))),
}


@pytest.mark.parametrize("case", list(CLI))
def test_fit_bad_input(case, tmp_path, capsys):
    make_input, make_data, extra, expected = CLI[case]
    frame = _base() if make_data is None else make_data(_base())
    frame.to_csv(tmp_path / "data.csv", index=False)
    if make_input is not None:
        make_input(tmp_path)
    out = tmp_path / "out"
    argv = ["fit", tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--state", "state", "--action",
            "action", "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--verbose", "--out", out]
    argv += [str(a).replace("{tmp}", str(tmp_path)) for a in extra]
    code, stdout, stderr = _run(argv, capsys)
    stdout = " ".join(stdout.split())  # --verbose: every warning in full; lines wrapped at 100 characters
    _assert_outcome(case, expected, code, out, stdout, stderr)
    if isinstance(expected, Err):
        assert not out.exists(), case


# ----------------------------------------------------------------------------- Ctrl-C, killed runs
def _fit_args(tmp_path, *extra):
    return ["fit", tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--state", "state", "--action",
            "action", "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--quiet",
            "--out", tmp_path / "out", *extra]


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _default_sigint():
    """In the child before it runs: Ctrl-C as a terminal delivers it. A process inherits an
    ignored SIGINT (a library in the test process may ignore it), and Python then keeps ignoring
    it; the tests are about the command, not about what the test process inherited."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_fit_one_line_exit_130_earlier_output_kept(tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    _base().to_csv(tmp_path / "data.csv", index=False)
    assert _run(_fit_args(tmp_path), capsys)[0] == 0
    before = _files(tmp_path / "out")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    start = ("import sys; from genpqr.app.cli import main; print('imported', flush=True); "
             "sys.exit(main(sys.argv[1:]))")  # the console script's steps, saying when the imports are done
    argv = [sys.executable, "-c", start, *map(str, _fit_args(tmp_path, "--bootstrap", "100000"))]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    assert proc.stdout.readline().strip() == "imported"
    time.sleep(1.5)  # fitting (the bootstrap's replicates take minutes): then Ctrl-C
    assert proc.poll() is None
    ignored = next((l for l in open(f"/proc/{proc.pid}/status") if l.startswith("SigIgn")), "")
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()  # a fit that ran on (the interrupt lost) must not outlive the test
    assert proc.returncode == 130, (stderr, ignored)
    assert stderr.strip() == f"genpqr fit: interrupted; the earlier output in {tmp_path / 'out'} is unchanged"
    assert _files(tmp_path / "out") == before
    assert not list(tmp_path.glob(".out.*"))  # its staging folder removed


def test_ctrl_c_while_writing_leaves_the_earlier_output(tmp_path, capsys, monkeypatch):
    from genpqr.estimator import _folder_ops as folder_ops

    _base().to_csv(tmp_path / "data.csv", index=False)
    assert _run(_fit_args(tmp_path), capsys)[0] == 0
    before = _files(tmp_path / "out")

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(folder_ops, "write_each", stop)
    code, stdout, stderr = _run(_fit_args(tmp_path, "--gamma", "0.8"), capsys)
    assert code == 130 and "Traceback" not in stderr
    assert stderr.strip().splitlines() == [f"genpqr fit: interrupted; the earlier output in {tmp_path / 'out'} is "
                                           f"unchanged"]
    assert _files(tmp_path / "out") == before and not list(tmp_path.glob(".out.*"))


def test_leftover_staging_folders_removed_by_the_next_successful_run(tmp_path, capsys):
    import os

    _base().to_csv(tmp_path / "data.csv", index=False)
    dead, old, alive = (tmp_path / ".out.999999999-x1.partial", tmp_path / ".out.k2j3.partial",
                        tmp_path / f".out.{os.getppid()}-x3.partial")
    other = tmp_path / ".other.999999999-x4.partial"  # another output's: not this run's business
    for folder in (dead, old, alive, other):
        folder.mkdir()
        (folder / "rewards.csv").write_text("x")
    code, _, stderr = _run(_fit_args(tmp_path), capsys)
    assert code == 0, stderr
    assert not dead.exists() and not old.exists()  # killed runs' (SIGTERM, SIGKILL) staging folders
    assert alive.exists() and other.exists()  # a run still going keeps its own


# ----------------------------------------------------------------------------- a data file that changes while read
@pytest.mark.parametrize("change", ["append", "rewrite same size"])
def test_data_file_changed_while_read_is_refused(change, tmp_path, capsys, monkeypatch):
    import os

    _base().to_csv(tmp_path / "data.csv", index=False)
    real = pd.read_csv

    def read_then_change(path, *args, **kwargs):  # another process writes the file during the read
        frame = real(path, *args, **kwargs)
        if str(path).endswith("data.csv"):
            if change == "append":
                with open(path, "a") as fh:
                    fh.write("99,0,1,a,0.0,a,0.1\n")
            else:
                st = os.stat(path)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        return frame

    monkeypatch.setattr(pd, "read_csv", read_then_change)
    code, stdout, stderr = _run(_fit_args(tmp_path), capsys)
    _assert_outcome(change, Err("data file", "data.csv", "changed while it was read",
                                "went from" if change == "append" else "modified or replaced", "run again"),
                    code, None, stdout, stderr)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- genpqr counterfactual
@pytest.mark.parametrize("dangling", [False, True])
def test_counterfactual_names_a_symlinked_model_file(dangling, tmp_path, capsys):
    import shutil

    _base().to_csv(tmp_path / "data.csv", index=False)
    assert _run(_fit_args(tmp_path), capsys)[0] == 0
    model = tmp_path / "out" / "model.joblib"
    shutil.move(model, tmp_path / "elsewhere.joblib")
    model.symlink_to(tmp_path / ("missing.joblib" if dangling else "elsewhere.joblib"))
    code, stdout, stderr = _run(["counterfactual", tmp_path / "out", "--reward-change", "b=1", "--out",
                                 tmp_path / "cf", "--quiet"], capsys)
    _assert_outcome("symlinked model", Err("model.joblib is a symbolic link", "elsewhere" if not dangling else
                                           "missing.joblib", "plain files"), code, None, stdout, stderr)
    assert not (tmp_path / "cf").exists()


# ----------------------------------------------------------------------------- --types: the flag the user typed
@pytest.mark.parametrize("route", ["tabular", "structural"])
def test_more_types_than_episodes_refused_naming_types(route, tmp_path, capsys):
    _base().to_csv(tmp_path / "data.csv", index=False)
    pd.DataFrame([{"state_index": s, "action": a, "x": float(a == "b") * s} for s in range(4) for a in "ab"]).to_csv(
        tmp_path / "features.csv", index=False)
    extra = ["--features", tmp_path / "features.csv", "--policy-model", "frequency"] if route == "structural" else []
    code, stdout, stderr = _run(_fit_args(tmp_path, "--types", "31", *extra), capsys)
    _assert_outcome(route, Err("--types 31 needs at least 31 episodes", "the data has 30"), code, None, stdout, stderr)
    assert "n_types" not in stderr


# ----------------------------------------------------------------------------- API: latent types' covariates
@pytest.mark.parametrize("value, phrases", [(np.nan, ("type_covariates", "missing or infinite", "episode 3")),
                                            ("x", ("type_covariates must be numbers", "'x'"))])
def test_type_covariates_with_nan_or_text_named(value, phrases):
    from genpqr import GenPQR, from_pandas, normalization as N
    from genpqr.estimator import TypeOptions

    data = from_pandas(_base(), episode="episode", time="time", state="state", action="action")
    z = np.arange(30, dtype=float).astype(object)
    z[3] = value
    with pytest.raises(ValueError) as info:
        GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_types=2, types=TypeOptions(covariates=z),
               cross_fit=0).fit(data)
    for phrase in phrases:
        assert phrase in str(info.value), str(info.value)


def test_transition_model_overridden_on_one_episode_says_so(tmp_path, capsys):
    frame = _base()
    frame.assign(episode=0, time=np.arange(len(frame))).to_csv(tmp_path / "data.csv", index=False)
    args = [a for a in _fit_args(tmp_path, "--transition", "shrinkage") if a != "--quiet"]
    code, stdout, stderr = _run(args, capsys)
    assert code == 0, stderr
    assert "counts, overriding the requested --transition shrinkage (one episode" in " ".join(stdout.split())


# ----------------------------------------------------------------------------- a time column of timestamps
@pytest.mark.parametrize("clock, expected", [
    ("daily", Ok(lambda out, so, se: (out / "rewards.csv").exists())),
    ("hourly, from a later start per episode", Ok(lambda out, so, se: (out / "rewards.csv").exists())),
    ("daily with a missing day", Err("time gap inside an episode", "episode 0", "--time-gaps split")),
    ("month starts", Err("time column 'time'", "not whole multiples", "31 days", "months since the start"))])
def test_parquet_timestamp_time_column(clock, expected, tmp_path, capsys):
    frame = _base()
    if clock == "daily":
        frame["time"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame.time, "D")
    elif clock.startswith("hourly"):
        frame["time"] = (pd.Timestamp("2026-01-01") + pd.to_timedelta(frame.episode * 7, "D")
                         + pd.to_timedelta(frame.time, "h"))
    elif clock == "daily with a missing day":
        frame = frame.drop(index=frame.index[(frame.episode == 0) & (frame.time == 3)])
        frame["time"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame.time, "D")
    else:  # steps of 31, 28, 31, 30 and 31 days
        frame["time"] = [pd.Timestamp("2026-01-01") + pd.DateOffset(months=int(t)) for t in frame.time]
    frame.to_parquet(tmp_path / "data.parquet", index=False)
    args = _fit_args(tmp_path)
    args[1] = tmp_path / "data.parquet"
    code, stdout, stderr = _run(args, capsys)
    _assert_outcome(clock, expected, code, tmp_path / "out", stdout, stderr)


def test_ctrl_c_before_a_command_starts_is_one_line(monkeypatch, capsys):
    """Ctrl-C while genpqr imports its modules or parses the flags (before a command's own
    handler): one line and exit 130, no traceback."""
    from genpqr.app import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["fit", "--help"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "genpqr: interrupted; nothing was written" and "Traceback" not in err


# ----------------------------------------------------------------------------- timestamps everywhere (item 8)
def _dated(frame, kind, shuffle=False):
    """``frame`` with its time column (step numbers 0..5) as timestamps of ``kind``; ``shuffle``:
    the rows in random order (an episode's rows ordered by their time, not by the file)."""
    t = frame.time.to_numpy()
    start = pd.Timestamp("2024-01-05") + pd.to_timedelta(frame.episode.to_numpy() * 3, "D")
    if kind == "dates":
        time = (start + pd.to_timedelta(t, "D")).strftime("%Y-%m-%d")
    elif kind == "ISO datetimes, hourly":
        time = (start + pd.Timedelta("09:30:00") + pd.to_timedelta(t, "h")).strftime("%Y-%m-%dT%H:%M:%S")
    elif kind == "ISO datetimes with a UTC offset":  # 10:00+01:00 is 09:00 UTC: a step of 15 minutes
        time = [f"{(s + pd.Timedelta(minutes=15 * int(k))).isoformat()}+01:00" for s, k in zip(start, t)]
    else:  # a date, a date with a time: the file's text is not in time order
        time = [(s + pd.Timedelta(days=int(k))).strftime("%Y-%m-%d" if k % 2 else "%Y-%m-%dT00:00:00")
                for s, k in zip(start, t)]
    out = frame.assign(time=list(time))
    return out.sample(frac=1.0, random_state=3) if shuffle else out


def _reward_columns(out):
    table = pd.read_csv(out / "rewards.csv")
    return table[[c for c in table.columns if c.startswith("reward_")]].to_numpy()


@pytest.mark.parametrize("kind", ["dates", "ISO datetimes, hourly", "ISO datetimes with a UTC offset",
                                  "dates and datetimes mixed"])
def test_csv_text_dates_give_the_rewards_of_integer_times(kind, tmp_path, capsys):
    """A CSV time column of ISO 8601 text (dates, datetimes) is numbered in the data's own unit
    and ordered within episodes by time, not by the file's rows: the rewards of the step numbers."""
    frame = _base()
    frame.to_csv(tmp_path / "data.csv", index=False)
    assert _run(_fit_args(tmp_path), capsys)[0] == 0
    expected = _reward_columns(tmp_path / "out")
    dated = tmp_path / "dated"
    dated.mkdir()
    _dated(frame, kind, shuffle=True).to_csv(dated / "data.csv", index=False)
    code, stdout, stderr = _run(_fit_args(dated), capsys)
    assert code == 0, stderr
    np.testing.assert_allclose(_reward_columns(dated / "out"), expected, rtol=0, atol=1e-12)


def test_text_dates_in_memory_give_the_transitions_of_integer_times():
    from genpqr import from_pandas

    frame = _base()
    cols = dict(episode="episode", time="time", state="state", action="action")
    ref = from_pandas(frame, **cols)
    for kind in ("dates", "ISO datetimes, hourly", "dates and datetimes mixed"):
        for dated in (_dated(frame, kind, shuffle=True), _dated(frame, kind).assign(
                time=lambda f: pd.to_datetime(f.time, format="ISO8601"))):  # text, and datetime64
            got = from_pandas(dated, **cols)
            np.testing.assert_array_equal(got.states, ref.states)
            np.testing.assert_array_equal(got.actions, ref.actions)
            np.testing.assert_array_equal(got.next_states, ref.next_states)
            same = got.episode_ids[1:] == got.episode_ids[:-1]  # episodes start 3 days apart
            np.testing.assert_array_equal(np.diff(got.timesteps)[same], np.diff(ref.timesteps)[same])
    assert frame.time.dtype.kind == "i"  # the input is not modified


@pytest.mark.parametrize("time, expected", [
    ("yesterday", Err("time column 'time' must be numeric (step numbers) or hold ISO 8601 dates", "2024-01-05",
                      "got 'yesterday' at data row 8", "neither a number nor a date")),
    ("01/12/2024", Err("time column 'time'", "ISO 8601", "got '01/12/2024'", "day/month orders are ambiguous")),
    ("", Err("time column 'time' has 1 missing timestamp(s)", "data row 8")),
    ("2024-01-09", Err("time gap inside an episode", "episode 1 jumps from time 2024-01-09 to 2024-01-11",
                       "a step of 2 days where 1 day", "--time-gaps split")),
    ("2024-01-08T12:00:00", Err("time column 'time'", "not whole multiples", "1 day", "12 hours"))])
def test_csv_text_times_refused_naming_the_column_and_value(time, expected, tmp_path, capsys):
    """Row 8 of the data (episode 1, step 1: 2024-01-09) replaced: text that is no date, an
    ambiguous day/month order, a missing date, a date that leaves a gap (2024-01-10 missing
    after it: the step 2024-01-09 -> 2024-01-11 is two days), a step of half a day."""
    frame = _dated(_base(), "dates")
    if time == "2024-01-09":
        frame = frame.drop(index=8)
    else:
        frame.loc[7, "time"] = time if time else None
    frame.to_csv(tmp_path / "data.csv", index=False)
    code, stdout, stderr = _run(_fit_args(tmp_path), capsys)
    _assert_outcome(time, expected, code, None, stdout, stderr)


def _parquet_folder(frame, folder, parts=3, as_dates=False):
    """``frame`` (sorted by episode) in ``parts`` Parquet files; ``as_dates``: a date32 time column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    frame = frame.sort_values(["episode", "time"]).reset_index(drop=True)
    for i, part in enumerate(np.array_split(np.arange(len(frame)), parts)):
        table = pa.Table.from_pandas(frame.iloc[part], preserve_index=False)
        if as_dates:
            table = table.set_column(table.schema.get_field_index("time"), "time",
                                     table.column("time").cast(pa.timestamp("s")).cast(pa.date32()))
        pq.write_table(table, folder / f"part-{i}.parquet")
    return folder


@pytest.mark.parametrize("as_dates", [False, True])
@pytest.mark.parametrize("chunk_rows", [7, 50])
def test_parquet_timestamp_folder_out_of_core_equals_in_memory(as_dates, chunk_rows, tmp_path):
    """A Parquet folder whose time column is datetime64 (or date32), streamed in chunks smaller
    than an episode or holding several: the in-memory fit of integer steps; the numbering is the
    whole data's (a later start per episode, hourly readings)."""
    from genpqr import GenPQR, from_pandas
    from genpqr.normalization import anchor_action
    from genpqr.scale import ParquetSource, fit_parquet

    frame = _base()
    cols = dict(episode="episode", time="time", state="state", action="action")
    unit = "D" if as_dates else "h"
    stamped = frame.assign(time=pd.Timestamp("2024-01-05 00:00" if as_dates else "2024-01-05 09:30")
                           + pd.to_timedelta(frame.episode * 2, "D") + pd.to_timedelta(frame.time, unit))
    folder = _parquet_folder(stamped, tmp_path / "d", as_dates=as_dates)
    est = GenPQR(q_model="exact", gamma=0.9, normalization=anchor_action("a"), progress=False,
                 transition_model="counts")  # streamed fits use the counts
    ref = GenPQR(**est.get_params(deep=False)).fit(from_pandas(frame, **cols))
    in_memory = GenPQR(**est.get_params(deep=False)).fit(from_pandas(stamped, **cols))
    source = ParquetSource(folder, chunk_rows=chunk_rows, **cols)
    got = fit_parquet(est, source, progress=False)
    assert source.clock.unit == pd.Timedelta(1, unit).value and source.expected_step == 1.0
    for model in (in_memory, got):
        np.testing.assert_allclose(model.reward_table().to_numpy(), ref.reward_table().to_numpy(), atol=1e-10, rtol=0)
        assert model.diagnostics_.n_transitions == ref.diagnostics_.n_transitions


@pytest.mark.parametrize("case, expected", [
    ("hourly", Ok(lambda out, so, se: (out / "rewards.csv").exists())),
    ("a gap only the whole data shows", Err("time gap inside an episode", "episode 15",
                                            "from time 2024-01-05T09:30:00 to 2024-01-05T11:30:00",
                                            "a step of 2 hours where 1 hour", "--time-gaps split")),
    ("month starts", Err("time column 'time'", "not whole multiples", "31 days", "28 days",
                         "months since the start")),
    ("text that is no date", Err("time column 'time'", "ISO 8601", "got 'soon' at data row 180"))])
def test_parquet_timestamp_folder_through_the_cli(case, expected, tmp_path, capsys):
    """``genpqr fit FOLDER``: timestamps accepted, and refused as in memory, naming the unit; the
    gap is in episodes 15.. whose clock ticks by two hours, which a chunk of them alone would
    take for its unit."""
    frame = _base()
    if case == "month starts":
        frame["time"] = [pd.Timestamp("2026-01-01") + pd.DateOffset(months=int(t)) for t in frame.time]
    elif case == "text that is no date":
        frame["time"] = (pd.Timestamp("2024-01-05") + pd.to_timedelta(frame.time, "D")).dt.strftime("%Y-%m-%d")
        frame.loc[len(frame) - 1, "time"] = "soon"
    else:
        ticks = frame.time * np.where((frame.episode >= 15) & (case != "hourly"), 2, 1)
        frame["time"] = pd.Timestamp("2024-01-05 09:30") + pd.to_timedelta(ticks, "h")
    folder = _parquet_folder(frame, tmp_path / "d")
    args = _fit_args(tmp_path, "--chunk-rows", "40")
    args[1] = folder
    code, stdout, stderr = _run(args, capsys)
    _assert_outcome(case, expected, code, tmp_path / "out", stdout, stderr)


# ----------------------------------------------------------------------------- typed structural: no standard error
def test_typed_structural_fit_names_the_parameters_without_a_standard_error(two_types, tmp_path, capsys):
    """``--features F --types 2`` where F has a column ``dup`` equal to ``r0_b``: the two move no
    episode's likelihood apart in either type, so the information matrix is singular in their
    directions. The console, the warning and parameters.csv say which parameters have no
    standard error, why, and what to do; the identified combinations have theirs."""
    from genpqr.app.console import unwrap

    frame = _ids(two_types, "numbers")
    frame.drop(columns="type").to_csv(tmp_path / "data.csv", index=False)
    _features_file(tmp_path / "features.csv")
    features = pd.read_csv(tmp_path / "features.csv")
    features.assign(dup=features.r0_b).to_csv(tmp_path / "features.csv", index=False)
    argv = ["fit", tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--state", "state",
            "--action", "action", "--gamma", GAMMA, "--normalization", "anchor:a", "--types", "2", "--verbose",
            "--out", tmp_path / "out", "--features", tmp_path / "features.csv", "--policy-model", "frequency",
            "--estimator", "nfxp"]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0, stderr
    printed = " ".join(unwrap(stdout).split())
    for phrase in ("parameters of the nfxp fit with 2 latent types have no standard error: r0_b[type 0], "
                   "r0_b[type 1]", "dup[type 0], dup[type 1]", "is singular in their directions",
                   "the data identify r0_b[type 0] + dup[type 0]", "Fit fewer types (--types), more episodes",
                   "dup[type 1]: not identified by the choices (no estimate or standard error"):
        assert phrase in printed, (phrase, printed)
    params = pd.read_csv(tmp_path / "out" / "parameters.csv").set_index("parameter")
    flat = ["r0_b[type 0]", "r0_b[type 1]", "dup[type 0]", "dup[type 1]"]
    assert not params.loc[flat, "identified"].any()
    assert params.loc[flat, ["estimate", "std_error", "ci_low", "ci_high"]].isna().all().all()
    combos = params.loc[["r0_b[type 0] + dup[type 0]", "r0_b[type 1] + dup[type 1]"]]
    assert combos.identified.all() and np.isfinite(combos.std_error).all() and (combos.std_error > 0).all()
    others = params.drop(index=flat)
    assert np.isfinite(others.loc[others.identified.astype(bool), "std_error"]).all()


def test_an_interrupt_python_drops_is_raised_again(tmp_path):
    """Ctrl-C that arrives inside a ``__del__`` (where Python prints the KeyboardInterrupt and
    drops it) still ends the command: the handler raises it again until the command has taken it,
    and the fit ends with its one line and 130 instead of running on."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    _base().to_csv(tmp_path / "data.csv", index=False)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    start = ("import sys, time\nfrom genpqr.app import workflow\nfrom genpqr.app.cli import main\n"
             "class Slow:\n    def __del__(self):\n        print('inside', flush=True)\n        t = time.time()\n"
             "        while time.time() - t < 2.0: pass\n"  # the interrupt lands here and is dropped
             "fit = workflow.run_fit\n"
             "def run_fit(config):\n    Slow()\n    return fit(config)\n"
             "workflow.run_fit = run_fit\nsys.exit(main(sys.argv[1:]))")
    argv = [sys.executable, "-c", start, *map(str, _fit_args(tmp_path, "--bootstrap", "100000"))]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    assert proc.stdout.readline().strip() == "inside"  # in Slow.__del__ (two seconds), before the bootstrap
    time.sleep(0.2)
    ignored = next((l for l in open(f"/proc/{proc.pid}/status") if l.startswith("SigIgn")), "")
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a fit that ran on (the interrupt lost) must not outlive the test
    assert proc.returncode == 130, (stderr, ignored)
    assert stderr.strip().splitlines()[-1] == f"genpqr fit: interrupted; nothing was written to {tmp_path / 'out'}"


# ----------------------------------------------------------------------------- genpqr counterfactual: kernel files, corners
@pytest.fixture(scope="module")
def structural_fit(tmp_path_factory):
    """A single-type structural fit folder of the 4-state data (features ``x`` and ``bonus``)."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("structural_fit")
    _base().to_csv(tmp / "data.csv", index=False)
    pd.DataFrame([{"state_index": s, "action": a, "x": float(a == "b") * s, "bonus": float(a == "b")}
                  for s in range(4) for a in "ab"]).to_csv(tmp / "features.csv", index=False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([str(a) for a in _fit_args(tmp, "--features", tmp / "features.csv", "--policy-model",
                                               "frequency")]) == 0
    return tmp / "out"


def _no_point_interval(out, stdout, stderr):
    """The corner is said (console and warning), and no interval of the counterfactual collapses to
    a point, on the console or in summary.csv (the rates at the corner have none). The two routes
    agree there, and the note says so (it used to say they disagree with route_gap 0)."""
    summary = pd.read_csv(out / "summary.csv")
    widths = (summary.counterfactual_hi - summary.counterfactual_lo).to_numpy()
    corner = summary.statistic.str.startswith("rate[").to_numpy()
    return ("pushes the model to a corner" in stdout and "ExtrapolationWarning" in stderr
            and "route agrees" in " ".join(stdout.split()) and "disagree" not in stdout
            and "0.0000 0.0000" not in stdout and not np.any(np.abs(widths[np.isfinite(widths)]) <= 1e-9)
            and summary.loc[corner, ["counterfactual_se", "difference_lo", "difference_hi"]].isna().all().all())


COUNTERFACTUAL = {
    "kernel file with a negative entry": (_kernel(_negative), ["--transitions", "{tmp}/kernel.npy"],
                                          Err("kernel.npy", "(--transitions)", "P[1, 0, 2] = -0.25 is negative")),
    "kernel file with rows summing to 2": (_kernel(lambda P: 2 * P), ["--transitions", "{tmp}/kernel.npy"],
                                           Err("kernel.npy", "(--transitions)", "sums to 2, not 1")),
    "kernel file with a NaN": (_kernel(lambda P: _cell(P, (2, 1, 0), np.nan)), ["--transitions", "{tmp}/kernel.npy"],
                               Err("kernel.npy", "(--transitions)", "P[2, 1, 0] = nan is not a number")),
    "kernel file of integer ones": (_kernel(lambda P: P * 0 + 1, dtype=np.int64), ["--transitions", "{tmp}/kernel.npy"],
                                    Err("kernel.npy", "(--transitions)", "holds integers", "as floats")),
    "a parameter change that pushes a rate to a corner": (None, ["--parameter-change", "bonus=*1e10"],
                                                          Ok(_no_point_interval)),
}


@pytest.mark.parametrize("case", list(COUNTERFACTUAL))
def test_counterfactual_bad_input(case, structural_fit, tmp_path, capsys):
    make_input, extra, expected = COUNTERFACTUAL[case]
    if make_input is not None:
        make_input(tmp_path)
    out = tmp_path / "cf"
    argv = ["counterfactual", structural_fit, "--out", out, "--verbose",
            *[str(a).replace("{tmp}", str(tmp_path)) for a in extra]]
    code, stdout, stderr = _run(argv, capsys)
    _assert_outcome(case, expected, code, out, " ".join(stdout.split()), stderr)
    if isinstance(expected, Err):
        assert not out.exists(), case


# ----------------------------------------------------------------------------- API: latent types' arguments
API = {
    "n_types=True": (dict(n_types=True), ("n_types must be an int >= 1", "True")),
    "n_types=2.0": (dict(n_types=2.0), ("n_types must be an int >= 1", "2.0")),
    "n_types=0": (dict(n_types=0), ("n_types must be an int >= 1", "0")),
}


@pytest.mark.parametrize("case", list(API))
def test_api_bad_input(case):
    from genpqr import GenPQR, from_pandas, normalization as N

    kwargs, phrases = API[case]
    data = from_pandas(_base(), episode="episode", time="time", state="state", action="action")
    with pytest.raises(ValueError) as info:
        GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", cross_fit=0, **kwargs).fit(data)
    for phrase in phrases:
        assert phrase in str(info.value), (case, str(info.value))


# ----------------------------------------------------------------------------- many actions, few rows
def test_many_actions_few_rows_stay_fast_and_bounded(tmp_path, capsys):
    """2,000 items with action features and 10 logged choices (issue 33: 1e5 items once gave no
    output for 180 s, 1e4 drew a 25 MiB report.html with one tick label per item): the fit ends
    (label checks linear in the items), rewards.csv has every item, and the report's per-action
    figures show the most visited items only (``TOP_ACTIONS``)."""
    import re
    import time

    from genpqr.app.report_discrete import TOP_ACTIONS

    rng = np.random.default_rng(0)
    n_items = 2000
    items = pd.DataFrame(rng.normal(size=(n_items, 3)), columns=["f0", "f1", "f2"])
    items.insert(0, "action", [f"item{i:04d}" for i in range(n_items)])
    items.to_csv(tmp_path / "items.csv", index=False)
    taken = rng.choice(items.action.to_numpy()[:8], 10)
    pd.DataFrame({"episode": np.arange(10) // 2, "time": np.arange(10) % 2, "state": rng.integers(0, 3, 10),
                  "action": taken}).to_csv(tmp_path / "data.csv", index=False)
    out = tmp_path / "out"
    start = time.perf_counter()
    code, stdout, stderr = _run(["fit", tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--state",
                                 "state", "--action", "action", "--gamma", "0.9", "--normalization",
                                 f"anchor:{taken[0]}", "--action-features", tmp_path / "items.csv", "--cross-fit",
                                 "0", "--quiet", "--out", out], capsys)
    seconds = time.perf_counter() - start
    _assert_outcome("many actions", Ok(lambda o, so, se: (o / "rewards.csv").exists()), code, out, stdout, stderr)
    assert seconds < 120, seconds
    rewards = pd.read_csv(out / "rewards.csv")
    assert sum(c.startswith("reward_item") or c.startswith("reward[item") for c in rewards.columns) == n_items, \
        list(rewards.columns)[:10]
    html = (out / "report.html").read_text()
    assert (out / "report.html").stat().st_size < 2_000_000
    for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S):
        assert len(set(re.findall(r"item\d{4}", svg))) <= TOP_ACTIONS
