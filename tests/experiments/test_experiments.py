"""Experiment runner, configurations, methods, report and the `genpqr experiment/report` CLI.

The end-to-end runs use the tiny variants (seconds); the resume and failure logic is tested
with fake methods (an estimator that returns the true reward plus noise).
"""

import csv
import json
from functools import partial
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from genpqr.app.cli import main, split_methods
from genpqr.experiments import ExperimentConfig, Setting, get_config, run_experiment
from genpqr.experiments._configs import EXPERIMENTS
from genpqr.experiments._methods import Method
from genpqr.experiments import _methods as methods_mod
from genpqr.experiments._report import write_report
from genpqr.experiments._runner import RESULT_COLUMNS, ResultsFile

EXP2_METHODS = ["GenPQR (BC, NN)", "GenPQR (AIRL, NN)", "GenPQR (BC, GBT)", "GenPQR (AIRL, GBT)", "DeepPQR (AIRL)",
                "MaxEnt-IRL", "AIRL state reward", "Log-policy pseudo-reward (AIRL)", "GenPQR (BC, NN, paper 8x4)",
                "Linear reward (supervised oracle)"]


def _rows(out):
    with open(out / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


# ------------------------------------------------------------------------------ fake methods
class _TruthPlusNoise:
    """Reward = truth + N(0, scale^2); raises in fit for the seeds in ``fail_seeds``."""

    def __init__(self, data, seed, scale, fail_seeds):
        self.data, self.seed, self.scale, self.fail_seeds = data, seed, scale, fail_seeds

    def fit(self, train):
        if self.seed in self.fail_seeds:
            raise RuntimeError(f"simulated crash on seed {self.seed}")
        return self

    def reward(self, states, actions):
        noise = np.random.default_rng(self.seed).normal(0.0, self.scale, size=len(states))
        return self.data.env.true_reward(states, actions) + noise

    def log_policy(self, states):
        return self.data.env.log_policy(states)


def _fake_build(data, seed, options, fail_seeds=()):
    return _TruthPlusNoise(data, seed, options["noise"]["scale"], fail_seeds)


def _fake(name, fail_seeds=()):
    return Method(name, partial(_fake_build, fail_seeds=tuple(fail_seeds)), defaults={"noise": {"scale": 0.1}})


def _fake_config():
    return ExperimentConfig(name="fake", settings=(Setting(10, 0.0, n_test=5), Setting(10, -1.0, n_test=5)),
                            methods=("good", "noisy"), layout="matched", notes=("fake methods",),
                            options={"noisy": {"noise": {"scale": 1.0}}})


# ------------------------------------------------------------------------------ configs
def test_paper_configurations():
    exp1, exp2, many = EXPERIMENTS["exp1"], EXPERIMENTS["exp2"], EXPERIMENTS["many-actions"]
    assert [(s.n_train, s.anchor_shift, s.n_test) for s in exp1.settings] == [(200, -1.0, 300), (1000, -1.0, 300),
                                                                              (2500, 0.0, 300)]
    assert set(exp1.methods) == {"DeepPQR (AIRL)", "GenPQR (AIRL, NN)", "DeepPQR", "GenPQR (BC, NN)"}
    assert any("AIRL" in n and "identical policy estimate" in n for n in exp1.notes)
    assert [(s.n_train, s.anchor_shift) for s in exp2.settings] == [(1000, 0.0)]
    assert list(exp2.methods) == EXP2_METHODS
    assert any("supervised oracle" in n for n in exp2.notes)
    assert [s.n_actions for s in many.settings] == [5, 10, 20, 40]
    assert all(s.n_train == 2500 and s.anchor_shift == 0.0 for s in many.settings)
    for config in EXPERIMENTS.values():
        assert all(m in methods_mod.METHODS for m in config.methods)
        tiny = get_config(config.name, tiny=True)
        assert tiny.tiny and tiny.name == f"{config.name}-tiny" and len(tiny.settings) == len(config.settings)
        assert all(s.n_test == 20 and s.n_train <= 62 for s in tiny.settings)
        assert ExperimentConfig.from_dict(json.loads(json.dumps(tiny.to_dict()))) == tiny
    with pytest.raises(ValueError, match="unknown experiment 'exp9'"):
        get_config("exp9")
    with pytest.raises(ValueError, match="Setting.n_train must be a positive integer"):
        Setting(0, 0.0)
    with pytest.raises(ValueError, match="layout must be one of"):
        ExperimentConfig("x", (Setting(10, 0.0),), ("a",), layout="wide")


def test_method_options_merge_and_reject_unknown_groups():
    m = methods_mod.get_method("GenPQR (BC, NN)")
    full = m.resolve()
    assert full["fqe"] == {"n_iterations": 16, "tol": None, "structure": "direct"}
    assert full["q_model"]["epochs_per_iteration"] == 1 and full["q_model"]["batch_size"] == 512
    assert full["bc"]["max_epochs"] == 40
    paper = methods_mod.get_method("GenPQR (BC, NN, paper 8x4)").resolve()
    assert paper["fqe"] == {"n_iterations": 8, "tol": None, "structure": "direct"} and paper["q_model"]["epochs_per_iteration"] == 4
    assert paper["bc"] == full["bc"]
    fast = m.resolve({"fqe": {"n_iterations": 4}, "q_model": {"batch_size": 1024}}, tiny=True)
    assert fast["fqe"]["n_iterations"] == 4 and fast["q_model"]["batch_size"] == 1024
    assert fast["q_model"]["epochs_per_iteration"] == 1 and fast["bc"]["max_epochs"] == 2  # tiny kept
    assert m.resolve()["fqe"]["n_iterations"] == 16  # defaults untouched
    with pytest.raises(ValueError, match="has no option group"):
        m.resolve({"schedule": {}})
    with pytest.raises(ValueError, match="unknown method 'AIRL'"):
        methods_mod.get_method("AIRL")
    with pytest.raises(ValueError, match="already registered"):
        methods_mod.register(m)


@pytest.mark.parametrize("tiny", [False, True])
def test_every_policy_using_method_of_an_experiment_fits_the_same_behaviour_cloning(tiny):
    """The 'shared policy estimate': within a policy source (BC or AIRL), every row of an experiment
    resolves to one seeded configuration of that source."""
    for name in EXPERIMENTS:
        config = get_config(name, tiny=tiny)
        resolved = [methods_mod.get_method(m).resolve(config.method_options(m), tiny=tiny) for m in config.methods]
        for kind, group in (("bc", "bc"), ("airl", "airl")):
            same = [o[group] for o in resolved if o.get("policy", {}).get("kind") == kind]
            assert len(same) >= 1 and all(o == same[0] for o in same), (name, kind)


def test_split_methods_keeps_commas_inside_parentheses():
    assert split_methods("GenPQR (BC, NN), DeepPQR,Log-policy pseudo-reward") == [
        "GenPQR (BC, NN)", "DeepPQR", "Log-policy pseudo-reward"]


# ------------------------------------------------------------------------------ end to end
def test_cli_experiment_and_report_exp2_tiny(tmp_path, capsys):
    out = tmp_path / "exp2"
    assert main(["experiment", "exp2", "--seeds", "2", "--tiny", "--n-jobs", "2", "--out", str(out), "--quiet"]) == 0
    rows = _rows(out)
    assert sorted((int(r["seed"]), r["method"]) for r in rows) == sorted(
        (s, m) for s in (0, 1) for m in EXP2_METHODS)
    assert list(rows[0]) == list(RESULT_COLUMNS)
    df = pd.read_csv(out / "results.csv")
    assert (df["fit_time"] > 0).all() and np.isfinite(df["reward_mse"]).all()
    assert (df["anchor_count"] == df.groupby("seed")["anchor_count"].transform("first")).all()
    # one seeded estimate per policy source (BC rows, AIRL rows) shared by its rows; the oracle has no policy
    for source in ("BC", "AIRL"):
        rows_ = df[df["method"].str.contains(source)]
        assert len(rows_) and (rows_.groupby("seed")["policy_nll"].nunique() == 1).all(), source
    assert df.loc[df["method"] == "Linear reward (supervised oracle)", "policy_nll"].isna().all()
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["name"] == "exp2-tiny" and config["seeds"] == [0, 1]

    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    md = (out / "results.md").read_text()
    for method in EXP2_METHODS:
        assert f"| {method} |" in md
    assert "mean ± 95% CI" in md and "supervised oracle" in md and "TINY" in md
    assert "| Method | MSE ↓ | Corr. ↑ | NLL ↓ | Time (s) ↓ | Seeds |" in md
    png = out / "exp2-tiny_methods.png"
    assert png.exists() and png.stat().st_size > 10_000


def test_report_rebuilds_every_layout_from_the_file_alone(tmp_path):
    """A results.csv without config.json: the layout comes from the experiment name."""
    rng = np.random.default_rng(0)
    rows = []
    for name in ("exp1", "many-actions"):
        for seed in range(3):
            for s in EXPERIMENTS[name].settings:
                for m in EXPERIMENTS[name].methods:
                    rows.append({"experiment": name, "setting": s.key, "seed": seed, "method": m,
                                 "n_train": s.n_train, "anchor_shift": s.anchor_shift, "n_actions": s.n_actions,
                                 "n_test": s.n_test, "reward_mse": rng.uniform(0.3, 2), "reward_corr": rng.uniform(),
                                 "policy_nll": 1.55, "fit_time": 1.0, "anchor_count": 100 + seed,
                                 "anchor_fraction": 0.2, "true_reward_var": 1.0, "warnings": "", "extra": "",
                                 "finished_at": "", "worker": ""})
    pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(tmp_path / "results.csv", index=False)
    paths = write_report(tmp_path)
    md = (tmp_path / "results.md").read_text()
    assert "| Setting | Method | Anchor ct. (frac.) | MSE ↓ | Corr. ↑ | Time (s) ↓ | Seeds |" in md
    assert "| 200 / shift -1 | DeepPQR | 101 (0.20) |" in md
    assert "| |A| | Method | Anchor ct. (frac.) |" in md and "| 40 | GenPQR (BC, NN) |" in md
    for name in ("exp1_reward.png", "many-actions_actions.png"):
        assert (tmp_path / name).stat().st_size > 10_000 and tmp_path / name in paths
    # the CI of the table is 1.96 sd / sqrt(n) of the file's values
    df = pd.DataFrame(rows)
    v = df[(df.experiment == "exp1") & (df.method == "DeepPQR") & (df.n_train == 200)]["reward_mse"]
    assert f"{v.mean():.2f} ± {1.96 * v.std(ddof=1) / np.sqrt(3):.2f}" in md


# ------------------------------------------------------------------------------ resume, failures
def test_resume_runs_only_missing_tasks(tmp_path):
    registry = {"good": _fake("good"), "noisy": _fake("noisy")}
    config = _fake_config()
    first = run_experiment(config, [0], tmp_path, methods=registry, progress=False)
    assert len(first.executed) == 4 and not first.skipped and first.ok
    before = _rows(tmp_path)

    second = run_experiment(config, [0, 1], tmp_path, methods=registry, progress=False)
    assert len(second.skipped) == 4 and len(second.executed) == 4
    assert {t.seed for t in second.executed} == {1}
    after = _rows(tmp_path)
    assert after[:4] == before  # finished rows untouched (same timestamps)
    keys = [(r["setting"], r["seed"], r["method"]) for r in after]
    assert len(keys) == len(set(keys)) == 8

    again = run_experiment(config, [0, 1], tmp_path, methods=registry, progress=False)
    assert not again.executed and len(again.skipped) == 8
    df = pd.read_csv(tmp_path / "results.csv")
    by_method = df.groupby("method")["reward_mse"].mean()
    assert by_method["good"] < by_method["noisy"]  # the per-method options reached the methods
    assert json.loads((tmp_path / "config.json").read_text())["seeds"] == [0, 1]


def test_a_failing_task_keeps_the_sweep_going_and_a_rerun_completes_it(tmp_path):
    config = _fake_config()
    crashing = {"good": _fake("good"), "noisy": _fake("noisy", fail_seeds=(1,))}
    summary = run_experiment(config, [0, 1, 2], tmp_path, methods=crashing, progress=False)
    assert not summary.ok and len(summary.failures) == 2
    assert all(f.task.seed == 1 and f.task.method == "noisy" for f in summary.failures)
    assert "simulated crash on seed 1" in summary.failures[0].short()
    assert len(_rows(tmp_path)) == 10  # every finished task was written

    fixed = {"good": _fake("good"), "noisy": _fake("noisy")}
    rerun = run_experiment(config, [0, 1, 2], tmp_path, methods=fixed, progress=False)
    assert rerun.ok and len(rerun.executed) == 2 and {(t.seed, t.method) for t in rerun.executed} == {(1, "noisy")}
    assert len(_rows(tmp_path)) == 12


def test_partial_last_line_of_a_killed_run_is_dropped(tmp_path):
    config = _fake_config()
    registry = {"good": _fake("good"), "noisy": _fake("noisy")}
    run_experiment(config, [0], tmp_path, methods=registry, progress=False)
    path = tmp_path / "results.csv"
    text = path.read_text()
    path.write_text(text + text.splitlines()[-1][:25])  # killed while writing a row
    assert len(ResultsFile(path).completed_keys()) == 4
    summary = run_experiment(config, [0, 1], tmp_path, methods=registry, progress=False)
    assert len(summary.executed) == 4 and len(_rows(tmp_path)) == 8


def test_refuses_a_folder_of_another_configuration(tmp_path):
    registry = {"good": _fake("good"), "noisy": _fake("noisy")}
    run_experiment(_fake_config(), [0], tmp_path, methods=registry, progress=False)
    other = ExperimentConfig(name="fake", settings=(Setting(12, 0.0, n_test=5),), methods=("good",), layout="matched")
    with pytest.raises(ValueError, match="different configuration"):
        run_experiment(other, [0], tmp_path, methods=registry, progress=False)
    with pytest.raises(ValueError, match="unknown method"):
        run_experiment(_fake_config().with_methods(["good", "bad"]), [0], tmp_path, methods=registry)
    with pytest.raises(ValueError, match="needs scheduler"):
        run_experiment(_fake_config(), [0], tmp_path, methods=registry, backend="dask")


def test_cli_exits_nonzero_when_a_task_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(methods_mod.METHODS, "DeepPQR", _fake("DeepPQR", fail_seeds=(0,)))
    code = main(["experiment", "exp2", "--tiny", "--seeds", "2", "--methods", "DeepPQR", "--n-jobs", "1",
                 "--out", str(tmp_path), "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "FAILED seed 0" in err and "simulated crash on seed 0" in err
    assert [r["seed"] for r in _rows(tmp_path)] == ["1"]
    assert main(["experiment", "exp2", "--tiny", "--seeds", "1", "--methods", "AIRL", "--out", str(tmp_path)]) == 2


# ------------------------------------------------------------------------------ Dask
def test_dask_backend_on_a_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                                  host="127.0.0.1", scheduler_port=0, dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        code = main(["experiment", "exp2", "--seeds", "1", "--tiny", "--backend", "dask", "--scheduler",
                     cluster.scheduler_address, "--out", str(tmp_path), "--quiet"])
        assert code == 0
        assert cluster.scheduler.transition_counter > 0  # the tasks went through the scheduler
    rows = _rows(tmp_path)
    assert sorted(r["method"] for r in rows) == sorted(EXP2_METHODS)
    assert all(r["seed"] == "0" for r in rows)


def test_dask_runner_on_worker_processes_writes_the_joblib_results(tmp_path):
    """client.map + as_completed on a process cluster: the same rows as the in-process run."""
    import os

    distributed = pytest.importorskip("distributed")
    registry = {"good": _fake("good"), "noisy": _fake("noisy")}
    local = run_experiment(_fake_config(), [0, 1], tmp_path / "joblib", methods=registry, progress=False)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        remote = run_experiment(_fake_config(), [0, 1], tmp_path / "dask", methods=registry, backend="dask",
                                client=client, progress=False)
        assert client.status == "running"  # a given client is left open
    assert remote.ok and len(remote.executed) == len(local.executed) == 8

    def table(folder):
        frame = pd.read_csv(folder / "results.csv").sort_values(["setting", "seed", "method"], ignore_index=True)
        return frame.drop(columns=["fit_time", "finished_at", "worker"]), frame["worker"]

    (a, _), (b, workers) = table(tmp_path / "joblib"), table(tmp_path / "dask")
    pd.testing.assert_frame_equal(a, b)
    assert a["reward_mse"].notna().all()
    pids = {w.rsplit(":", 1)[1] for w in workers}
    assert str(os.getpid()) not in pids  # the tasks ran in the worker processes
    with pytest.raises(ValueError, match="backend='dask' only"):
        run_experiment(_fake_config(), [0], tmp_path / "x", methods=registry, client=client)


def test_min_updates_per_iteration_scales_the_fqe_epochs_to_the_sample_size():
    """Experiment 1's GenPQR rows run >= 32 updates per Bellman iteration: 8 epochs of 4 batches at
    200 trajectories, 2 at 1000, the tuned 1 epoch at 2500; other experiments are untouched."""
    sched = methods_mod.updates_schedule
    q = {"batch_size": 512, "epochs_per_iteration": 1, "min_updates_per_iteration": 32}
    assert [sched(q, n)["epochs_per_iteration"] for n in (2000, 10000, 25000, 100)] == [8, 2, 1, 32]
    assert "min_updates_per_iteration" not in sched(q, 2000)
    assert sched({"batch_size": 512, "epochs_per_iteration": 3}, 2000) == {"batch_size": 512, "epochs_per_iteration": 3}
    assert sched({**q, "epochs_per_iteration": 10}, 2000)["epochs_per_iteration"] == 10  # a floor, not a cap
    for bad in (0, -3, 2.5, True, "32"):
        with pytest.raises(ValueError, match="min_updates_per_iteration"):
            sched({**q, "min_updates_per_iteration": bad}, 2000)
    exp1 = EXPERIMENTS["exp1"]
    for name in ("GenPQR (AIRL, NN)", "GenPQR (BC, NN)"):
        opts = methods_mod.get_method(name).resolve(exp1.method_options(name))
        assert opts["q_model"]["min_updates_per_iteration"] == 32
        for n_traj, epochs in ((200, 8), (1000, 2), (2500, 1)):
            data = SimpleNamespace(train=SimpleNamespace(n=10 * n_traj))  # 10 steps per trajectory
            if name == "GenPQR (BC, NN)":
                network = methods_mod.build_genpqr_nn(data, 0, opts).q_model.regressor  # in an FQE
                assert network.epochs_per_iteration == epochs and network.batch_size == 512
    assert EXPERIMENTS["exp2"].options == {}
    assert all("min_updates_per_iteration" not in o.get("q_model", {})
               for o in EXPERIMENTS["many-actions"].options.values())


def test_many_actions_bc_rows_share_a_weight_decayed_policy_and_genpqr_runs_4_fqe_epochs():
    """Many actions: both BC rows fit the identical (weight-decayed) behaviour cloning; GenPQR (BC, NN)
    runs 16 Bellman iterations x 4 epochs; the AIRL rows and the other experiments keep the defaults."""
    many = EXPERIMENTS["many-actions"]
    data = SimpleNamespace(train=SimpleNamespace(n=25000))
    opts = {m: methods_mod.get_method(m).resolve(many.method_options(m)) for m in many.methods}
    assert opts["DeepPQR"]["bc"] == opts["GenPQR (BC, NN)"]["bc"] == {**methods_mod.BC_DEFAULTS, "weight_decay": 1e-3}
    for name in ("DeepPQR", "GenPQR (BC, NN)"):
        policy = methods_mod.behaviour_cloning(7, opts[name])
        assert policy.weight_decay == 1e-3 and policy.max_epochs == 40 and policy.random_state == 7
    est = methods_mod.build_genpqr_nn(data, 0, opts["GenPQR (BC, NN)"])
    fqe = est.q_model  # FQE(network, n_iterations=16)
    assert fqe.regressor.epochs_per_iteration == 4 and fqe.regressor.batch_size == 512 and fqe.n_iterations == 16
    assert est.policy_model.weight_decay == 1e-3
    for name in ("DeepPQR (AIRL)", "GenPQR (AIRL, NN)"):
        assert many.method_options(name) == {} and "bc" not in opts[name]
    exp1_bc = methods_mod.get_method("GenPQR (BC, NN)").resolve(EXPERIMENTS["exp1"].method_options("GenPQR (BC, NN)"))
    assert exp1_bc["bc"] == methods_mod.BC_DEFAULTS and "weight_decay" not in methods_mod.BC_DEFAULTS
    tiny = get_config("many-actions", tiny=True)
    tiny_opts = methods_mod.get_method("GenPQR (BC, NN)").resolve(tiny.method_options("GenPQR (BC, NN)"), tiny=True)
    assert tiny_opts["bc"]["weight_decay"] == 1e-3 and tiny_opts["bc"]["max_epochs"] == 2


def test_default_path_method_is_genpqr_as_users_call_it():
    """'GenPQR (default path)' is ``GenPQR()`` with only the benchmark's normalization, gamma and
    seed: its own first and second stage (the basis logit, LSTD on its basis), its own clip; no
    torch; a tiny run gives finite metrics."""
    from genpqr.envs import make_synthetic_data
    from genpqr.experiments._methods import build_genpqr_default, get_method
    from genpqr.stage1 import StateBasis
    from genpqr.stage2 import LSTDQ

    method = get_method("GenPQR (default path)")
    assert method.resolve() == {"estimator": {}} and method.preload == ()
    data = make_synthetic_data(0, 40, n_test=20)
    est = build_genpqr_default(data, 3, method.resolve())
    assert est.policy_model is None and est.q_model is None and est.clip == "auto" and est.random_state == 3
    est.fit(data.train)
    assert est.first_stage_.name == "basis-logit"
    assert isinstance(est.q_model_, LSTDQ) and isinstance(est.q_model_.features, StateBasis)
    row = method(data, 0, method.resolve(tiny=True))
    assert np.isfinite(row["reward_mse"]) and np.isfinite(row["reward_corr"]) and row["fit_time"] > 0


def test_bc_wd_lstd_rff_method_settings_and_tiny_run():
    """'GenPQR (BC wd, LSTD, RFF)' (the experiment's fast path before GenPQR's defaults took its
    place): behaviour cloning with weight decay 1e-3 and 10 epochs (the specification's
    otherwise), then the LSTD fixed point in splines + 100 random Fourier features; a tiny run
    gives finite metrics."""
    pytest.importorskip("torch")
    from genpqr.envs import make_synthetic_data
    from genpqr.experiments._methods import BC_DEFAULTS, get_method

    method = get_method("GenPQR (BC wd, LSTD, RFF)")
    options = method.resolve()
    assert options["bc"] == {**BC_DEFAULTS, "weight_decay": 1e-3, "max_epochs": 10}
    assert options["q_model"] == {"features": "spline+rff", "n_components": 100, "alpha": 1e-4}
    row = method(make_synthetic_data(0, 40, n_test=20), 0, method.resolve(tiny=True))
    assert np.isfinite(row["reward_mse"]) and np.isfinite(row["reward_corr"]) and row["fit_time"] > 0
