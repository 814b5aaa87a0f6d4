"""Bad inputs, table-driven: ``genpqr fit``, ``genpqr report`` and the API.

Every case states the exact kind of outcome it expects:

* ``Err(phrases)``: exit code 2 and one line on stderr (``genpqr fit: error: ...`` or argparse's
  usage error) containing every phrase (the argument's name and what was expected), no
  traceback, no numpy reprs (``np.int64(...)``);
* ``Ok(check)``: exit code 0, and ``check(out_dir, stdout)`` holds (the correct result, or
  the warning printed in the summary);
* API cases: ``pytest.raises(Class, match=...)``, ``pytest.warns(Class)`` or a result check.

Small data (30 episodes x 6 steps, 4 states, 2 actions) keeps the whole file fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, from_arrays, from_pandas, normalization as N
from genpqr.data import from_episodes
from genpqr.app.cli import main
from genpqr.exceptions import NotFittedError
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import FQE


# ----------------------------------------------------------------------------- learners without get_params
class NoParamsClassifier:
    """Any probabilistic classifier: ``fit`` / ``predict_proba`` / ``classes_``, no ``get_params``."""

    def __init__(self, inner=None):
        self.inner = inner if inner is not None else FrequencyClassifier()

    def fit(self, X, y):
        self.inner.fit(X, y)
        self.classes_ = self.inner.classes_
        return self

    def predict_proba(self, X):
        return self.inner.predict_proba(X)


class NoParamsRegressor:
    """Least squares with ``fit`` / ``predict`` only."""

    def fit(self, X, y, sample_weight=None):
        A = np.c_[np.ones(len(X)), X]
        self.coef_ = np.linalg.lstsq(A, y, rcond=None)[0]
        return self

    def predict(self, X):
        return np.c_[np.ones(len(X)), X] @ self.coef_


# ----------------------------------------------------------------------------- data
N_EP, T = 30, 6


def base_frame(n_ep: int = N_EP, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_ep * T
    state = rng.integers(0, 4, n)
    return pd.DataFrame({"episode": np.repeat(np.arange(n_ep), T), "time": np.tile(np.arange(T), n_ep),
                         "state": state, "action": rng.choice(["a", "b"], n),
                         "outcome": rng.normal(size=n).round(3), "anchor": np.where(state % 2 == 0, "a", "b"),
                         "h": (state * 0.1).round(2)})


def _drop_row(f, episode=0, time=3):
    return f.drop(index=f.index[(f.episode == episode) & (f.time == time)])


def _float_times_gap(f):
    f = f.assign(time=f.time * 0.5)
    return _drop_row(f, 2, 1.5)


def _many_int_actions(f):
    f = f.assign(action=np.arange(len(f)) % 25)
    f.loc[f.index[T - 1], "action"] = 99  # seen only on the last row of episode 0
    return f


def _mixed(col, value, row=3):
    def make(f):
        f = f.astype({col: object})
        f.loc[row, col] = value
        return f
    return make


def _set(col, value, row=4):
    def make(f):
        f = f.astype({col: float}) if isinstance(value, float) else f.copy()
        f.loc[row, col] = value
        return f
    return make


def _increment_jump(f):
    f = f.copy()
    f["state"] = f["time"]
    f.loc[(f.episode == 3) & (f.time == 2), "state"] = 4  # 1 -> 4: a jump of 3
    return f


def _inconsistent_anchor(f):
    f = f.copy()
    f.loc[f.index[f.state == 0][0], "anchor"] = "b"
    return f


def _value_missing_state(f):
    return f.assign(h=f.h.where(f.state != 3))


def _half_clock_by_two(f):
    """Episodes 15.. tick by 2: as many steps of 2 as of 1, so the modal step (smallest on ties)
    is 1 and each of them has gaps; a chunk holding only them has modal step 2 (no gap)."""
    return f.assign(time=np.where(f.episode >= N_EP // 2, 2 * f.time, f.time))


def _mixed_clocks(f):
    """Episodes 15.. tick by 0.5 (the times are not all integers: each episode's own modal step
    decides), and episode 3 ticks by 2 (no gap by its own step; a gap by the modal step 1 of a
    chunk whose times are all integers)."""
    t = np.where(f.episode >= N_EP // 2, 0.5 * f.time, f.time)
    return f.assign(time=np.where(f.episode == 3, 2 * f.time, t))


def _sparse_ids(f):
    return f.assign(state=f.state * 10**7)


def _shuffled_within_episodes(f):
    key = np.random.default_rng(5).random(len(f))
    return f.assign(_k=key).sort_values(["episode", "_k"]).drop(columns="_k")


def _mathtext_labels(f):
    return f.assign(action=f.action.map({"a": r"$\frac$", "b": "b $"}))


def _mathtext_names(f):
    """Continuous states under a column named like mathtext, labels too."""
    f = _mathtext_labels(f).assign(state=f.state + np.random.default_rng(2).normal(0, 0.1, len(f)))
    return f.rename(columns={"state": "$s_t$"})


@dataclass
class Pq:
    """A folder of Parquet files (read out of core): ``make`` changes the base frame, ``parts``
    splits it into the files' contents (frames, pyarrow tables or bytes), written in order as
    part-0.parquet, part-1.parquet, ..."""

    make: Callable = None
    parts: Callable = None


def _null_part_first(f):
    import pyarrow as pa

    return [pa.table({c: pa.array([], type=pa.null()) for c in f.columns}), f]


def _int_actions_in_second_part(f):
    return [f.iloc[:90], f.iloc[90:].assign(action=(f.iloc[90:].action == "b").astype(int))]


def _damaged_second_part(f):
    return [f.iloc[:90], b"not parquet"]


@dataclass
class Err:
    phrases: tuple

    def __init__(self, *phrases):
        self.phrases = phrases


@dataclass
class Ok:
    check: Callable


def _rewards(out):
    return pd.read_csv(out / "rewards.csv")


def _n_episodes(stdout):
    return int(stdout.split(" episodes (")[0].split()[-1])


ACTIONS = ["--action-features", "{tmp}/items.csv"]


def _action_file(what, tmp):
    """``tmp/items.csv``: the actions a, b (taken) and c (never taken) with features, or a fault."""
    path = tmp / "items.csv"
    if what == "empty":
        path.write_text("")
        return
    f = pd.DataFrame({"action": ["a", "b", "c"], "price": [1.0, 2.0, 3.0], "quality": [2.0, 1.0, 0.5]})
    f = {"ok": f, "missing-label": f[f.action != "b"], "duplicate": f.assign(action=["a", "a", "b"]),
         "nan": f.assign(price=[1.0, 2.0, np.nan]), "text": f.assign(color=["red", "blue", "red"]),
         "nolabel": f.rename(columns={"action": "item"}), "nofeature": f[["action"]]}[what]
    f.to_csv(path, index=False)


# name: (frame maker or None, extra argv (later flags win), expected outcome)
# "{tmp}" in an argv item is replaced by the case's temporary folder.
CLI = {
    # --- silent wrong results (issue 10) ------------------------------------------------
    "time gap": (_drop_row, [], Err("time gap inside an episode", "episode 0", "from time 2 to 4",
                                    "--time-gaps split")),
    "time gap, float times": (_float_times_gap, [], Err("time gap", "episode 2", "0.5 is expected")),
    "time gap split": (_drop_row, ["--time-gaps", "split"], Ok(lambda out, so: _n_episodes(so) == N_EP + 1)),
    "float times without gap": (lambda f: f.assign(time=f.time * 0.25), [],
                                Ok(lambda out, so: _n_episodes(so) == N_EP)),
    "bootstrap with one episode": (lambda f: f[f.episode == 0], ["--bootstrap", "5"],
                                   Err("--bootstrap", "at least 10", "the data has 1")),
    "bootstrap with five episodes": (lambda f: f[f.episode < 5], ["--bootstrap", "5"], Err("at least 10", "has 5")),
    "unvisited states flagged": (None, ["--n-states", "6"],
                                 Ok(lambda out, so: "2 of 6 states have no observed choice" in so
                                    and _rewards(out)["visited"].tolist() == [True] * 4 + [False] * 2)),
    "classifier without get_params": (None, ["--policy-model", "tests.estimator.test_bad_inputs:NoParamsClassifier"],
                                      Ok(lambda out, so: _rewards(out)["visited"].all())),
    # --- late or weak errors --------------------------------------------------------------
    "out is a file": (None, ["--out", "{tmp}/afile"], Err("--out", "is a file")),
    "out below a file": (None, ["--out", "{tmp}/afile/sub"], Err("--out", "cannot be written")),
    "n-jobs 0": (None, ["--n-jobs", "0", "--bootstrap", "3"], Err("--n-jobs", "got 0")),
    "empty file": ("empty", [], Err("data file", "data.csv", "is empty")),
    "header only": ("header", [], Err("has no rows")),
    "semicolon-delimited": ("semicolon", [], Err("';'-delimited", "--sep ';'")),
    "semicolon with --sep": ("semicolon", ["--sep", ";"], Ok(lambda out, so: (out / "rewards.csv").exists())),
    "tab-delimited": ("tab", [], Err("tab", "--sep '\\t'")),
    "one row per episode": (lambda f: f.assign(episode=np.arange(len(f))), [],
                            Err("no transitions", "single row", "'episode' identifies episodes")),
    "continuous-looking actions": (lambda f: f.assign(action=np.random.default_rng(1).normal(size=len(f)).round(3)),
                                   [], Err("distinct real numbers", "--action-type continuous")),
    "many numeric actions, mean-zero": (_many_int_actions, ["--normalization", "mean-zero"],
                                        Err("never occur in the data", "[99]", "--action-type continuous")),
    "kernel of the wrong shape": ("kernel:4,3,4", ["--transition", "{tmp}/kernel.npy"],
                                  Err("(S, K, S) = (4, 2, 4)", "got (4, 3, 4)")),
    "kernel 1-D": ("kernel:8", ["--transition", "{tmp}/kernel.npy"], Err("must have shape", "got (8,)")),
    "kernel (S*K, S) wrong": ("kernel:7,4", ["--transition", "{tmp}/kernel.npy"], Err("(S*K, S)", "got (7, 4)")),
    "kernel file missing": (None, ["--transition", "{tmp}/nope.npy"], Err("transition kernel file", "does not exist")),
    "kernel not numpy": ("kernel:text", ["--transition", "{tmp}/kernel.npy"], Err("cannot read the transition kernel")),
    "increment jump names the time": (_increment_jump, ["--transition", "increment:1"],
                                      Err("outside [0, max_increment=1]", "time 1 of episode number 3")),
    "integer labels in messages": (lambda f: f.assign(action=(f.action == "b").astype(int)),
                                   ["--normalization", "anchor:5"], Err("anchor action '5' is never taken", "[0, 1]")),
    "single integer action": (lambda f: f.assign(action=1), ["--normalization", "mean-zero"],
                              Err("only one action (1)")),
    # --- missing columns and types -------------------------------------------------------
    "missing time column": (lambda f: f.drop(columns=["time"]), [], Err("missing column", "'time' (--time)")),
    "missing state column": (None, ["--state", "stat"], Err("'stat' (--state)")),
    "missing action column": (None, ["--action", "act"], Err("'act' (--action)")),
    "missing outcome column": (None, ["--outcome", "y"], Err("'y' (--outcome)")),
    "missing terminated column": (None, ["--terminated", "done"], Err("'done' (--terminated)")),
    "missing truncated column": (None, ["--truncated", "cut"], Err("'cut' (--truncated)")),
    "missing episode column": (None, ["--episode", "ep"], Err("'ep' (--episode)")),
    "mixed state types": (_mixed("state", "high"), [], Err("'state' mixes numbers and text", "'high'")),
    "mixed action types": (_mixed("action", 7), [], Err("'action' mixes numbers and text")),
    # text labels are tabular states (issue 32): refused where states must be numbers
    "text state column, continuous Q model": (lambda f: f.assign(state=f.state.map("s{}".format)),
                                              ["--q-model", "linear"],
                                              Err("state column 'state' must be numeric", "--q-model exact")),
    "text time column": (lambda f: f.assign(time=f.time.map("t{}".format)), [],
                         Err("time column 'time' must be numeric")),
    "missing state value": (_set("state", np.nan), [], Err("state column 'state' has 1 missing", "data row 5",
                                                          "line 6")),
    "infinite state value": (_set("state", np.inf), [], Err("infinite", "data row 5")),
    "missing time value": (_set("time", np.nan), [], Err("time column 'time' has 1 missing")),
    "missing action value": (_set("action", None), [], Err("action column 'action' has 1 missing")),
    "duplicated (episode, time)": (lambda f: f.assign(time=f.time.where(f.time != 1, 0)), [],
                                   Err("pairs must be unique")),
    "terminal flag mid-episode": (lambda f: f.assign(done=f.time == 2), ["--terminated", "done"],
                                  Err("marks a step as terminal although its episode continues")),
    "terminal flag not boolean": (lambda f: f.assign(done=np.where(f.time == T - 1, "yes", "no")),
                                  ["--terminated", "done"], Err("must be boolean")),
    "data file missing": ("missing", [], Err("data file", "does not exist")),
    "data file of unknown format": ("xlsx", [], Err("unknown data format")),
    "data path is a folder": ("folder", [], Err("is a folder")),
    "damaged Parquet file": ("parquet-bad", [], Err("cannot read data file", "data.parquet")),
    "column names with spaces": (lambda f: f.rename(columns={"time": " time", "state": "state "}), [],
                                 Err("missing column(s) 'time' (--time)", "[' time', 'state '] have surrounding "
                                     "spaces")),
    "episode and time the same column": (None, ["--time", "episode"],
                                         Err("--episode and --time name the same column 'episode'")),
    "action also a state column": (None, ["--state", "state,action"],
                                   Err("--action and --state name the same column 'action'")),
    # --- numbers out of range ------------------------------------------------------------
    "gamma 1": (None, ["--gamma", "1"], Err("gamma must be in [0, 1)")),
    "gamma negative": (None, ["--gamma", "-0.1"], Err("gamma must be in [0, 1)")),
    "gamma text": (None, ["--gamma", "abc"], Err("--gamma", "invalid float value")),
    "level above 1": (None, ["--level", "1.5"], Err("--level must be in (0, 1)")),
    "bootstrap 1": (None, ["--bootstrap", "1"], Err("--bootstrap must be 0")),
    "bootstrap negative": (None, ["--bootstrap", "-3"], Err("--bootstrap must be 0")),
    "cross-fit above episodes": (None, ["--cross-fit", "50"], Err("--cross-fit 50 needs at least 50 episodes")),
    "n-states 0": (None, ["--n-states", "0"], Err("--n-states must be at least 1")),
    "n-states below the data": (None, ["--n-states", "2"], Err("2 states were given", "state 3")),
    "n-iterations 0": (None, ["--n-iterations", "0"], Err("--n-iterations must be at least 1")),
    "n-jobs text": (None, ["--n-jobs", "two"], Err("--n-jobs", "invalid int value")),
    # --- normalization specs ---------------------------------------------------------------
    "unknown normalization": (None, ["--normalization", "anchored:a"], Err("--normalization must be one of")),
    "mean-zero with an argument": (None, ["--normalization", "mean-zero:a"], Err("takes no argument")),
    "anchor without an action": (None, ["--normalization", "anchor:"], Err("needs an argument", "anchor:ACTION")),
    "anchor never taken": (None, ["--normalization", "anchor:z"], Err("anchor action 'z' is never taken",
                                                                        "['a', 'b']")),
    "continuous-only normalization": (None, ["--normalization", "gaussian:0,1"], Err("is for continuous actions")),
    "state-anchor column missing": (None, ["--normalization", "state-anchor:nope"],
                                    Err("'nope' (--normalization state-anchor)")),
    "state-anchor inconsistent": (_inconsistent_anchor, ["--normalization", "state-anchor:anchor"],
                                  Err("different anchor actions at one state")),
    "state-anchor label never taken": (lambda f: f.assign(anchor="z"), ["--normalization", "state-anchor:anchor"],
                                       Err("'z' is never taken")),
    "value column text": (lambda f: f.assign(h="x"), ["--normalization", "value:h"], Err("'h' must be numeric")),
    "value missing at a state": (_value_missing_state, ["--normalization", "value:h"],
                                 Err("has no value for state_index [3]")),
    "behavior outcome conflict": (None, ["--normalization", "behavior:outcome", "--outcome", "h"],
                                  Err("name different outcome columns")),
    "behavior outcome text": (lambda f: f.assign(outcome="x"), ["--normalization", "behavior:outcome"],
                              Err("'outcome' must be numeric")),
    # --- bins, transitions, models ----------------------------------------------------------
    "bins decreasing": (None, ["--bins", "state=3,1"], Err("strictly increasing")),
    "bins not numbers": (None, ["--bins", "state=a,b"], Err("bins for column 'state' must be numbers")),
    "bins of a non-state column": (None, ["--bins", "foo=1,2"], Err("not state columns")),
    "bins without '='": (None, ["--bins", "state"], Err("--bins must look like COLUMN=e1,e2")),
    "bins with a Q model": (None, ["--bins", "state=1,2", "--q-model", "linear"], Err("cannot be combined")),
    "bad transition": (None, ["--transition", "markov"], Err("--transition must be auto, counts")),
    "bad increment": (None, ["--transition", "increment:x"], Err("non-negative integer MAX")),
    "unknown policy model": (None, ["--policy-model", "svm"], Err("--policy-model must be one of")),
    "bad policy import path": (None, ["--policy-model", "no_such_module:Clf"], Err("cannot import policy model")),
    # import paths name learner classes only: checked before anything is made or called (issue 20)
    "policy model a function": (None, ["--policy-model", "os:getcwd"],
                                Err("--policy-model", "'os:getcwd' is a function, not a class",
                                    "fit() and predict_proba()")),
    "policy model a function, config": ('config:{"policy_model": "os:getcwd"}', ["--config", "{tmp}/c.json"],
                                        Err("config key policy_model", "is a function, not a class")),
    "Q model a function": (None, ["--q-model", "os:getcwd"], Err("--q-model (config key q_model)", "not a class",
                                                                 "fit() and predict()")),
    "Q model without predict": (None, ["--q-model", "tests.estimator.test_bad_inputs:NoParamsClassifier"],
                                Err("--q-model", "lacks predict()")),
    "density a function": (lambda f: f.assign(action=np.linspace(0, 1, len(f))),
                           ["--action-type", "continuous", "--normalization", "anchor:0", "--policy-model",
                            "os:getcwd"], Err("--policy-model", "not a class", "log_prob() and sample()")),
    "density as policy model": (None, ["--policy-model", "gaussian"], Err("is a density for continuous actions")),
    "unknown Q model": (None, ["--q-model", "forest"], Err("--q-model must be one of")),
    "features with continuous states": (None, ["--q-model", "linear", "--features", "{tmp}/f.csv"],
                                        Err("need the tabular mode")),
    "features file missing": (None, ["--features", "{tmp}/nope.csv"], Err("features file", "does not exist")),
    "features file empty": ("features:empty", ["--features", "{tmp}/f.csv"], Err("features file", "is empty")),
    "features without action column": ("features:noaction", ["--features", "{tmp}/f.csv"],
                                       Err("features file", "missing column(s) ['action']")),
    "features text column": ("features:text", ["--features", "{tmp}/f.csv"], Err("feature column 'x' must be numeric")),
    "features state_index out of range": ("features:range", ["--features", "{tmp}/f.csv"],
                                          Err("state_index must be in [0, 4)")),
    # --- config and flags -------------------------------------------------------------------
    "config missing": (None, ["--config", "{tmp}/nope.json"], Err("config file", "does not exist")),
    "config not JSON": ("config:{", ["--config", "{tmp}/c.json"], Err("is not valid JSON")),
    "config a list": ("config:[1]", ["--config", "{tmp}/c.json"], Err("must hold a JSON object")),
    "config not text": ("config-bytes", ["--config", "{tmp}/c.json"], Err("config file", "c.json", "is not valid JSON")),
    "config unknown key": ('config:{"gama": 0.9}', ["--config", "{tmp}/c.json"],
                           Err("unknown config key(s) ['gama']")),
    "config wrong type": ('config:{"bootstrap": "many"}', ["--config", "{tmp}/c.json"], Err("config key 'bootstrap'")),
    "config bad time_gaps": ('config:{"time_gaps": "fill"}', ["--config", "{tmp}/c.json"],
                             Err("--time-gaps must be one of")),
    "abbreviated flag": (None, ["--gam", "0.9"], Err("unrecognized arguments", "--gam")),
    "bad --time-gaps": (None, ["--time-gaps", "fill"], Err("--time-gaps", "invalid choice")),
    "empty --sep": (None, ["--sep", ""], Err("--sep must be a non-empty")),
    "action bounds for discrete actions": (None, ["--action-low", "0"], Err("need(s) --action-type continuous")),
    "several discrete action columns": (None, ["--action", "action,state"], Err("several action columns")),
    "unknown action type": (None, ["--action-type", "mixed"], Err("--action-type", "invalid choice")),
    # --- continuous actions ------------------------------------------------------------------
    "continuous text actions": (None, ["--action-type", "continuous", "--normalization", "anchor:0"],
                                Err("must hold numbers with --action-type continuous")),
    "continuous mean-zero": (None, ["--action-type", "continuous", "--normalization", "mean-zero"],
                             Err("mean-zero is not supported for continuous actions")),
    "continuous bad integration": (None, ["--action-type", "continuous", "--normalization", "uniform",
                                          "--integration", "simpson"], Err("--integration must be")),
    "continuous half bounds": (None, ["--action-type", "continuous", "--normalization", "anchor:0",
                                      "--action-low", "0"], Err("must be given together")),
    "continuous actions outside bounds": (lambda f: f.assign(action=np.linspace(-1, 2, len(f))),
                                          ["--action-type", "continuous", "--normalization", "anchor:0",
                                           "--action-low", "0", "--action-high", "1"],
                                          Err("lie outside", "data row 1")),
    # --- the --out folder (issue 20): replaced as a whole, never what genpqr did not write -------
    "data file inside --out": (None, ["--out", "{tmp}"], Err("--out", "holds an input of this run", "data.csv")),
    "data file inside an earlier fit's --out": ("out:data-in-fit", [],
                                                Err("--out", "holds an input of this run", "rewards.csv")),
    "the user's config inside --out": ("out:user-config", ["--config", "{tmp}/out/config.json"],
                                       Err("--out", "holds files genpqr did not write (config.json)")),
    "symlinked file in --out": ("out:symlink", [], Err("--out", "holds files genpqr did not write (rewards.csv)")),
    "--out a symlink to a folder": ("out:symlinked-folder", ["--out", "{tmp}/link"], Err("--out", "is a symlink")),
    "a file added to an earlier fit": ("out:fit+notes", [],
                                       Err("--out", "holds files genpqr did not write (notes.txt)")),
    "--out an experiment folder": ("out:experiment", [], Err("--out", "holds a genpqr 'experiment' output")),
    "stale parameters.csv of an earlier --features fit": ("out:fit+features", [],
                                                          Ok(lambda out, so: _fit_folder(out, "anchor:a", False))),
    "config.json of the earlier fit, rerun into it": ("out:fit", ["--config", "{tmp}/out/config.json",
                                                                  "--normalization", "anchor:b"],
                                                      Ok(lambda out, so: _fit_folder(out, "anchor:b", False))),
    # --- every input named (issue 20) ------------------------------------------------------
    "estimator without features": (None, ["--estimator", "nfxp"], Err("--estimator nfxp needs --features")),
    "estimator npl given without features": (None, ["--estimator", "npl"], Err("--estimator npl needs --features")),
    "estimator in a config without features": ('config:{"estimator": "pml"}', ["--config", "{tmp}/c.json"],
                                               Err("--estimator pml needs --features")),
    "state value 1e308": (_set("state", 1e308), [], Err("state column 'state'", "beyond +-1e+150", "data row 5")),
    "mathtext action labels": (_mathtext_labels, ["--normalization", "anchor:b $", "--bootstrap", "10"],
                               Ok(lambda out, so: (out / "report.html").exists()
                                  and "reward_$\\frac$" in _rewards(out).columns)),
    "mathtext column name, continuous states": (_mathtext_names, ["--state", "$s_t$", "--q-model", "hgb",
                                                                  "--normalization", "anchor:b $", "--n-iterations",
                                                                  "5"],
                                                Ok(lambda out, so: (out / "report.html").exists())),
    # out of core: the checks and the result of the in-memory reader, whatever the chunk size
    "out of core: a gap only the whole data shows": (Pq(_half_clock_by_two), ["--chunk-rows", "90"],
                                                     Err("time gap inside an episode", "episode 15",
                                                         "from time 0 to 2", "where 1 is expected")),
    "out of core: mixed clocks, no gap": (Pq(_mixed_clocks), ["--chunk-rows", "90"],
                                          Ok(lambda out, so: _rewards(out)["visited"].all())),
    "out of core: a CSV file": (None, ["--chunk-rows", "50"], Err("--chunk-rows", "streams Parquet data", "data.csv",
                                                                 "drop --chunk-rows")),
    "out of core: large sparse state ids": (Pq(_sparse_ids), ["--chunk-rows", "50"],
                                            Ok(lambda out, so: _rewards(out)["state"].tolist()
                                               == [0, 10**7, 2 * 10**7, 3 * 10**7])),
    "out of core: an empty null-typed part first": (Pq(None, _null_part_first), ["--chunk-rows", "50"],
                                                    Ok(lambda out, so: len(_rewards(out)) == 4)),
    "out of core: text and integer actions": (Pq(None, _int_actions_in_second_part), [],
                                              Err("column 'action' mixes numbers and text across the Parquet files",
                                                  "part-0.parquet", "part-1.parquet")),
    "out of core: a damaged part": (Pq(None, _damaged_second_part), [],
                                    Err("cannot read the Parquet file", "part-1.parquet")),
    "out of core: state value 1e308": (Pq(_set("state", 1e308)), [],
                                       Err("state column 'state'", "beyond +-1e+150", "data row 5")),
    "out of core: missing column": (Pq(lambda f: f.drop(columns=["time"])), [],
                                    Err("missing column", "'time' (--time)")),
    "out of core: episodes not sorted": (Pq(lambda f: f.sort_values("episode", ascending=False, kind="stable")), [],
                                         Err("must be sorted by the episode column 'episode'")),
    "out of core: one action": (Pq(lambda f: f.assign(action="a")), [], Err("holds only one action ('a')")),
    "out of core: text states": (Pq(lambda f: f.assign(state=f.state.map("s{}".format))), [],
                                 Err("state column 'state' must be numeric")),
    "out of core: exact with two state columns": (Pq(), ["--state", "state,h", "--q-model", "exact"],
                                                  Err("--q-model exact out of core needs one state column")),
    "out of core: missing time value": (Pq(_set("time", np.nan)), [],
                                        Err("time column 'time' has 1 missing", "data row 5")),
    # --- the action-features file (issue 22): one line naming the file, the flag and the problem ---------
    "action features: a label of the data missing": ("actions:missing-label", ACTIONS,
                                                    Err("--action-features", "items.csv", "['b']", "does not list")),
    "action features: a duplicate label": ("actions:duplicate", ACTIONS,
                                          Err("--action-features", "items.csv", "['a']", "more than once")),
    "action features: a NaN feature": ("actions:nan", ACTIONS,
                                      Err("--action-features", "items.csv", "feature column 'price' has 1 missing",
                                          "label 'c'")),
    "action features: a text feature column": ("actions:text", ACTIONS,
                                              Err("--action-features", "items.csv",
                                                  "feature column 'color' must be numeric")),
    "action features: no label column": ("actions:nolabel", ACTIONS,
                                        Err("--action-features", "items.csv", "no label column 'action'")),
    "action features: no feature column": ("actions:nofeature", ACTIONS,
                                          Err("--action-features", "items.csv", "no feature columns")),
    "action features: file missing": (None, ["--action-features", "{tmp}/nope.csv"],
                                      Err("--action-features", "nope.csv", "does not exist")),
    "action features: empty file": ("actions:empty", ACTIONS, Err("--action-features", "items.csv", "is empty")),
    "conditional logit without action features": (None, ["--policy-model", "conditional-logit"],
                                                  Err("--policy-model conditional-logit", "--action-features FILE")),
    "action features with continuous actions": (None, ["--action-type", "continuous", "--normalization", "anchor:0",
                                                       *ACTIONS], Err("--action-features", "--action-type continuous")),
    "out of core: action features with --chunk-rows": (Pq(), ["--chunk-rows", "50", *ACTIONS],
                                                       Err("--action-features", "--chunk-rows", "out of core",
                                                           "rows in memory")),
    "out of core: action features with a Parquet folder": (Pq(), ACTIONS,
                                                           Err("--action-features", "a folder of Parquet files",
                                                               "out of core")),
    "action features: a never-taken action": ("actions:ok", ACTIONS,
                                             Ok(lambda out, so: "1 action(s) in the table were never taken" in so
                                                and [c for c in _rewards(out).columns if c.startswith("reward_")]
                                                == ["reward_a", "reward_b", "reward_c"])),
    # --- --infer (issue 34): one line naming the flag, the spec and the reason ---------------------------
    "infer: unknown target": (None, ["--infer", "variance"], Err("--infer 'variance'", "unknown inference target")),
    "infer: unknown option": (None, ["--infer", "value:uniform;gama=0.8"],
                              Err("--infer 'value:uniform;gama=0.8'", "takes the options", "'gama=0.8'")),
    "infer: a value without its policy": (None, ["--infer", "value"], Err("--infer 'value'", "needs an argument")),
    "infer in a config file": ('config:{"infer": ["nope"]}', ["--config", "{tmp}/c.json"],
                               Err("--infer 'nope'", "unknown inference target")),
    "infer: projection without features": (None, ["--infer", "projection"],
                                           Err("--infer 'projection' needs --features")),
    "infer: a projection weighting it does not know": (None, ["--infer", "projection;weights=optimal"],
                                                       Err("--infer 'projection;weights=optimal'",
                                                           "weights must be one of ['data', 'efficient']")),
    "infer: an action the data never show": (None, ["--infer", "value:action=z"],
                                             Err("--infer 'value:action=z'", "action 'z'", "not one of the data's")),
    "infer: a state out of range": (None, ["--infer", "reward-at:7=a"],
                                    Err("--infer 'reward-at:7=a'", "state 7 is not a state index in 0..3")),
    "infer: log-policy value at another discount": (None, ["--infer", "value:uniform;reward=log_policy;gamma=0.5"],
                                                    Err("--infer", "only at the agent's discount")),
    "infer: a normalization it does not carry": (None, ["--normalization", "behavior:outcome", "--infer",
                                                        "reward-mean"], Err("--infer 'reward-mean'", "estimated")),
    "infer: a cell on continuous states": (None, ["--q-model", "linear", "--infer", "reward-at:1=a"],
                                           Err("--infer 'reward-at:1=a'", "only for tabular states")),
    "infer: continuous actions": (lambda f: f.assign(action=np.linspace(0, 1, len(f))),
                                  ["--action-type", "continuous", "--normalization", "anchor:0", "--infer",
                                   "reward-mean"], Err("--infer cannot be combined with --action-type continuous")),
    "infer: latent types": (None, ["--types", "2", "--infer", "reward-mean"], Err("--types 2", "--infer")),
    "infer: out of core": (Pq(), ["--chunk-rows", "50", "--infer", "reward-mean"], Err("--infer", "out of core")),
    "infer: the projection's SEs are the structural projection's": (
        "features:ok", ["--features", "{tmp}/f.csv", "--estimator", "projection", "--infer", "projection", "--infer",
                        "value:uniform;gamma=0.8"], Ok(lambda out, so: _same_projection_se(out) and "V(uniform)" in so)),
}


def _same_projection_se(out) -> bool:
    """inference.csv's projection row and parameters.csv give the same SE (one answer per question)."""
    inference = pd.read_csv(out / "inference.csv", index_col="component")
    parameters = pd.read_csv(out / "parameters.csv", index_col="parameter")
    return (list(inference.index) == ["x", "V(uniform)"] and inference.std_error_kind.iloc[0] ==
            "efficient influence function" and np.isclose(inference.std_error["x"], parameters.std_error["x"],
                                                          rtol=1e-10))


def _fit_folder(out, normalization, parameters: bool) -> bool:
    """``out`` is one complete fit (its manifest matches, nothing else there) with ``normalization``."""
    from genpqr.estimator._manifest import verify_folder

    names = set(verify_folder(out, kind="fit")["files"])
    expected = {"model.joblib", "rewards.csv", "config.json", "report.html"} | ({"parameters.csv"} if parameters
                                                                                else set())
    return names == expected and json.loads((out / "config.json").read_text())["normalization"] == normalization


def _earlier_fit(tmp, data, *extra):
    """An earlier ``genpqr fit`` into ``tmp/out``."""
    code = main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
                 "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--quiet",
                 "--out", str(tmp / "out"), *map(str, extra)])
    assert code == 0 and _fit_folder(tmp / "out", "anchor:a", bool(extra))


def _out_folder(kind, tmp, data):
    """The ``out:`` kinds of :func:`_write_input`: what ``tmp/out`` holds before the fit; returns the data path."""
    out = tmp / "out"
    if kind.startswith("out:fit") or kind == "out:data-in-fit":
        features = ["--features", tmp / "f.csv"] if kind == "out:fit+features" else []
        if features:
            pd.DataFrame({"state_index": np.repeat(np.arange(4), 2), "action": ["a", "b"] * 4,
                          "x": np.arange(8.0)}).to_csv(tmp / "f.csv", index=False)
        _earlier_fit(tmp, data, *features)
        if kind == "out:fit+notes":
            (out / "notes.txt").write_text("the user's notes")
        return out / "rewards.csv" if kind == "out:data-in-fit" else data
    out.mkdir()
    if kind == "out:user-config":
        (out / "config.json").write_text('{"seed": 1}')
    elif kind == "out:symlink":
        (tmp / "precious.csv").write_text("the user's table")
        (out / "rewards.csv").symlink_to(tmp / "precious.csv")
    elif kind == "out:symlinked-folder":
        (tmp / "link").symlink_to(out, target_is_directory=True)
    elif kind == "out:experiment":
        from genpqr.estimator._manifest import write_manifest

        (out / "results.csv").write_text("experiment,setting,seed,method\n")
        write_manifest(out, kind="experiment")
    return data


def _tree(folder) -> dict:
    """``{relative path: bytes, or a link's target}`` of every file under ``folder``."""
    import os

    found = {}
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root) / name
            found[str(path.relative_to(folder))] = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return found


def _write_input(kind, tmp):
    """The data file (and side files) of a case; returns the data path."""
    data = tmp / "data.csv"
    frame = base_frame()
    (tmp / "afile").write_text("x")
    if isinstance(kind, Pq):
        return _write_parquet_folder(kind, frame, tmp / "pq")
    if callable(kind):
        kind(frame).to_csv(data, index=False)
        return data
    frame.to_csv(data, index=False)
    if kind is None:
        return data
    if kind.startswith("out:"):
        return _out_folder(kind, tmp, data)
    if kind == "empty":
        data.write_text("")
    elif kind == "header":
        data.write_text(",".join(frame.columns) + "\n")
    elif kind in ("semicolon", "tab"):
        frame.to_csv(data, index=False, sep=";" if kind == "semicolon" else "\t")
    elif kind == "missing":
        return tmp / "none.csv"
    elif kind == "xlsx":
        (tmp / "data.xlsx").write_text("x")
        return tmp / "data.xlsx"
    elif kind == "parquet-bad":
        (tmp / "data.parquet").write_text("not parquet")
        return tmp / "data.parquet"
    elif kind == "folder":
        (tmp / "dir.csv").mkdir()
        return tmp / "dir.csv"
    elif kind.startswith("kernel:"):
        spec = kind.split(":")[1]
        if spec == "text":
            (tmp / "kernel.npy").write_text("not numpy")
        else:
            shape = tuple(int(v) for v in spec.split(","))
            np.save(tmp / "kernel.npy", np.full(shape, 1.0 / shape[-1]))
    elif kind.startswith("features:"):
        what = kind.split(":")[1]
        f = pd.DataFrame({"state_index": np.repeat(np.arange(4), 2), "action": ["a", "b"] * 4, "x": np.arange(8.0)})
        if what == "empty":
            (tmp / "f.csv").write_text("")
            return data
        f = {"ok": f, "noaction": f.drop(columns=["action"]), "text": f.assign(x="t"),
             "range": f.assign(state_index=f.state_index + 1)}[what]
        f.to_csv(tmp / "f.csv", index=False)
    elif kind.startswith("actions:"):
        _action_file(kind.split(":")[1], tmp)
    elif kind.startswith("config:"):
        (tmp / "c.json").write_text(kind[len("config:"):])
    elif kind == "config-bytes":
        (tmp / "c.json").write_bytes(b"\x93\x00\xff")
    return data


def _write_parquet_folder(kind: Pq, frame, folder):
    import pyarrow.parquet as pq

    folder.mkdir()
    frame = kind.make(frame) if kind.make else frame
    for i, part in enumerate(kind.parts(frame) if kind.parts else [frame]):
        path = folder / f"part-{i}.parquet"
        if isinstance(part, bytes):
            path.write_bytes(part)
        elif isinstance(part, pd.DataFrame):
            part.to_parquet(path, index=False)
        else:
            pq.write_table(part, path)
    return folder


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("case", list(CLI))
def test_fit_bad_input(case, tmp_path, capsys):
    kind, extra, expected = CLI[case]
    data = _write_input(kind, tmp_path)
    out = tmp_path / "out"
    argv = ["fit", data, "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
            "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--quiet", "--out", out]
    argv += [str(a).replace("{tmp}", str(tmp_path)) for a in extra]
    capsys.readouterr()
    before = _tree(tmp_path)
    code, stdout, stderr = _run(argv, capsys)
    assert "Traceback" not in stderr
    if isinstance(expected, Err):
        assert code == 2, (case, stdout, stderr)
        assert _tree(tmp_path) == before, case  # a refused run changes nothing: inputs, config, a link's target
        message = stderr.strip().splitlines()[-1]
        assert message.startswith(("genpqr fit: error: ", "genpqr: error: ")), stderr
        for phrase in expected.phrases:
            assert phrase in message, (case, message)
        assert "np.int" not in message and "np.str" not in message and "np.float" not in message
        assert len(message) < 900, f"{case}: {len(message)} characters"
        assert not (out / "report.html").exists() or "out/report.html" in before  # (an earlier fit's, unchanged)
    else:
        assert code == 0, (case, stderr)
        assert expected.check(out, stdout), (case, stdout)


# ----------------------------------------------------------------------------- out of core == in memory
# name: (frame maker, extra argv, None: both fit and agree; else a phrase of the error both give)
SAME = {
    "clean": (lambda f: f, [], None),
    "a gap": (_drop_row, [], "episode 0 jumps from time 2 to 4"),
    "a gap in the last episode": (lambda f: _drop_row(f, N_EP - 1, T - 2), [],
                                  f"episode {N_EP - 1} jumps from time {T - 3} to {T - 1}"),
    "gaps split": (_drop_row, ["--time-gaps", "split"], None),
    "half the episodes tick by 2": (_half_clock_by_two, [], "episode 15 jumps from time 0 to 2"),
    "half the episodes tick by 2, split": (_half_clock_by_two, ["--time-gaps", "split"], None),
    "mixed clocks": (_mixed_clocks, [], None),
    "time order shuffled within episodes": (_shuffled_within_episodes, [], None),
    "large sparse state ids": (_sparse_ids, [], None),
    "negative state ids": (lambda f: f.assign(state=f.state - 2), [], None),
    "state ids with unused values": (lambda f: f.assign(state=2 * f.state), [], None),
    "real-valued states, exact": (lambda f: f.assign(state=f.state * 0.5), ["--q-model", "exact"], None),
    "duplicated step": (lambda f: f.assign(time=f.time.where(f.time != 1, 0)), [], "pairs must be unique"),
    "terminal flag mid-episode": (lambda f: f.assign(done=f.time == 2), ["--terminated", "done"],
                                  "marks a step as terminal although its episode continues"),
    "one row per episode": (lambda f: f.assign(episode=np.arange(len(f))), [], "no transitions"),
    "a state value 1e308": (_set("state", 1e308), [], "beyond +-1e+150 in magnitude (first 1e+308 at data row 5"),
    "a missing time": (_set("time", np.nan), [], "time column 'time' has 1 missing or infinite value(s) (first at "
                                                 "data row 5"),
    "one action": (lambda f: f.assign(action="b"), [], "holds only one action ('b')"),
    "text states, LSTD": (lambda f: f.assign(state=f.state.map("s{}".format)), ["--q-model", "lstd"],
                          "state column 'state' must be numeric"),
}
CHUNK_ROWS = (1, 7, 50, 90, 1000)  # one episode per chunk .. the whole data in one chunk


def _fit_argv(data, out, *extra):
    return ["fit", data, "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
            "--gamma", "0.9", "--normalization", "anchor:a", "--policy-model", "frequency", "--cross-fit", "0",
            "--transition", "counts", "--quiet", "--out", out, *extra]  # what a streamed fit uses


@pytest.mark.parametrize("case", list(SAME))
def test_out_of_core_accepts_and_refuses_as_in_memory(case, tmp_path, capsys):
    """The same Parquet file read in memory and streamed with several chunk sizes: the same
    outcome (exit code; the error's phrase) and, where both fit, the same rewards.csv."""
    make, extra, phrase = SAME[case]
    data = tmp_path / "data.parquet"
    make(base_frame()).to_parquet(data, index=False)
    code, _, err = _run(_fit_argv(data, tmp_path / "mem", *extra), capsys)
    assert code == (0 if phrase is None else 2), (case, err)
    for chunk_rows in CHUNK_ROWS:
        out = tmp_path / f"chunks-{chunk_rows}"
        streamed, _, err_streamed = _run(_fit_argv(data, out, *extra, "--chunk-rows", chunk_rows), capsys)
        assert streamed == code and "Traceback" not in err_streamed, (case, chunk_rows, err_streamed)
        if phrase is not None:
            assert phrase in err.strip().splitlines()[-1], (case, err)
            assert phrase in err_streamed.strip().splitlines()[-1], (case, chunk_rows, err_streamed)
        else:
            pd.testing.assert_frame_equal(_rewards(out), _rewards(tmp_path / "mem"), check_exact=False, atol=1e-10,
                                          rtol=0)


def test_out_of_core_needs_episodes_sorted(tmp_path, capsys):
    """The one input the readers treat differently: rows not sorted by episode. In memory they are
    sorted; out of core (which holds one chunk) they are refused, naming the column, the first
    row out of order and the fix, whatever the chunk size."""
    data = tmp_path / "data.parquet"
    base_frame().sort_values("episode", ascending=False, kind="stable").to_parquet(data, index=False)
    assert _run(_fit_argv(data, tmp_path / "mem"), capsys)[0] == 0
    for chunk_rows in CHUNK_ROWS:
        code, _, err = _run(_fit_argv(data, tmp_path / "c", "--chunk-rows", chunk_rows), capsys)
        message = err.strip().splitlines()[-1]
        assert code == 2 and "must be sorted by the episode column 'episode'" in message, message
        assert f"episode id 28 at data row {T + 1} comes after 29" in message and "sort_values" in message


# ----------------------------------------------------------------------------- genpqr report
def _results(folder, text, manifest=True, then=None):
    """A results folder holding ``text`` as results.csv, listed in a genpqr manifest (unless
    ``manifest`` is False), then changed by ``then(folder)``."""
    from genpqr.estimator._manifest import write_manifest

    folder.mkdir()
    (folder / "results.csv").write_text(text)
    if manifest:
        write_manifest(folder, kind="experiment")
    if then is not None:
        then(folder)
    return folder


ROWS = "experiment,setting,seed,method\nexp2,a,0,m\n"
REPORT = {
    "missing folder": (lambda tmp: tmp / "nope", ("does not exist",)),
    "a file, not a folder": (lambda tmp: (tmp / "f").write_text("x") and tmp / "f", ("is a file",)),
    "no results.csv": (lambda tmp: (tmp / "d").mkdir() or tmp / "d", ("no results.csv",)),
    "empty results.csv": (lambda tmp: _results(tmp / "d", ""), ("cannot read", "results.csv")),
    "header only": (lambda tmp: _results(tmp / "d", "experiment,setting,seed,method\n"), ("has no rows",)),
    "foreign columns": (lambda tmp: _results(tmp / "d", "a,b\n1,2\n"), ("lacks the column(s)", "'method'")),
    # issue 20: the folder must match its manifest
    "no manifest.json": (lambda tmp: _results(tmp / "d", ROWS, manifest=False), ("has no valid manifest.json",)),
    "results.csv changed since": (lambda tmp: _results(tmp / "d", ROWS, then=lambda d: (d / "results.csv").write_text(
        ROWS + "exp2,a,1,m\n")), ("results.csv does not match manifest.json",)),
    "results.csv cut short": (lambda tmp: _results(tmp / "d", ROWS, then=lambda d: (d / "results.csv").write_text(
        ROWS[:-9])), ("results.csv does not match manifest.json",)),
    "a file not in the manifest": (lambda tmp: _results(tmp / "d", ROWS, then=lambda d: (d / "old.png").write_text(
        "x")), ("old.png is not in its manifest.json",)),
    "results.csv not in the manifest": (lambda tmp: _results(tmp / "d", ROWS, then=lambda d: _relist(d)),
                                        ("results.csv is not in its manifest.json",)),
    "the manifest of a fit": (lambda tmp: _results(tmp / "d", ROWS, then=lambda d: _relist(d, "fit", keep=True)),
                              ("holds a genpqr 'fit' output, not a 'experiment' output",)),
}


def _relist(folder, kind="experiment", keep=False):
    """Rewrite the manifest of ``folder``: of ``kind``, without results.csv unless ``keep``."""
    from genpqr.estimator._manifest import read_manifest, store_manifest

    files = read_manifest(folder)["files"]
    store_manifest(folder, {k: v for k, v in files.items() if keep or k != "results.csv"}, kind=kind)


@pytest.mark.parametrize("case", list(REPORT))
def test_report_bad_input(case, tmp_path, capsys):
    make, phrases = REPORT[case]
    folder = make(tmp_path)
    before = _tree(tmp_path)
    code, _, stderr = _run(["report", folder], capsys)
    assert code == 2 and "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("genpqr report: error: ")
    for phrase in phrases:
        assert phrase in message, (case, message)
    assert _tree(tmp_path) == before


OTHER = {
    "experiment --out is a file": (["experiment", "exp2", "--tiny", "--out", "{tmp}/afile"], "--out"),
    "experiment --out below a file": (["experiment", "exp2", "--tiny", "--out", "{tmp}/afile/x"], "cannot be written"),
    "experiment --seeds 0": (["experiment", "continuous", "--tiny", "--seeds", "0", "--out", "{tmp}/e"], "--seeds"),
    "experiment --n-jobs 0": (["experiment", "exp2", "--tiny", "--n-jobs", "0", "--out", "{tmp}/e"], "--n-jobs"),
    "experiment unknown method": (["experiment", "exp2", "--tiny", "--methods", "Foo", "--out", "{tmp}/e"],
                                  "unknown method(s) ['Foo']"),
    "experiment unknown name": (["experiment", "exp9", "--out", "{tmp}/e"], "invalid choice"),
    "experiment abbreviated flag": (["experiment", "exp2", "--tin", "--out", "{tmp}/e"], "unrecognized arguments"),
    "demo --out is a file": (["demo", "--out", "{tmp}/afile"], "--out"),
    "demo gamma 1": (["demo", "--gamma", "1", "--out", "{tmp}/d"], "--gamma must be in [0, 1)"),
    "demo one state": (["demo", "--states", "1", "--out", "{tmp}/d"], "--states"),
    # issue 20: a folder holding files genpqr did not write is refused before any work
    "experiment --out holds other files": (["experiment", "exp2", "--tiny", "--out", "{tmp}"],
                                           "--out {tmp} holds files genpqr did not write (afile)"),
    "continuous experiment --out holds other files": (["experiment", "continuous", "--tiny", "--out", "{tmp}"],
                                                      "--out {tmp} holds files genpqr did not write (afile)"),
    "demo --out holds other files": (["demo", "--out", "{tmp}"],
                                     "--out {tmp} holds files genpqr did not write (afile)"),
}


@pytest.mark.parametrize("case", list(OTHER))
def test_other_commands_bad_input(case, tmp_path, capsys):
    argv, phrase = OTHER[case]
    (tmp_path / "afile").write_text("x")
    code, _, stderr = _run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert code == 2 and "Traceback" not in stderr
    assert phrase.replace("{tmp}", str(tmp_path)) in stderr.strip().splitlines()[-1]
    assert (tmp_path / "afile").read_text() == "x" and len(list(tmp_path.iterdir())) == 1
    assert not (tmp_path / "e").exists() and not (tmp_path / "d").exists()


# ----------------------------------------------------------------------------- genpqr counterfactual
@pytest.fixture(scope="module")
def cf_fit(tmp_path_factory):
    """A small tabular fit folder (4 bootstrap replicates, saved without its data)."""
    tmp = tmp_path_factory.mktemp("cf")
    data = tmp / "data.csv"
    base_frame().to_csv(data, index=False)
    code = main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
                 "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--bootstrap", "4", "--quiet",
                 "--out", str(tmp / "fit")])
    assert code == 0
    return tmp / "fit", data


def _reverse_time(data):
    f = pd.read_csv(data)
    f.assign(time=f.groupby("episode")["time"].transform(lambda t: t.max() + t.min() - t)).to_csv(data, index=False)


COUNTERFACTUAL = {  # (spec JSON or None, flags, phrase of the one-line error)
    "level 0": (None, ["--level", "0"], "strictly between 0 and 1"),
    "level 1": (None, ["--level", "1"], "strictly between 0 and 1"),
    "level 1.5": (None, ["--level", "1.5"], "strictly between 0 and 1"),
    "level in the spec": ({"level": 0}, [], "strictly between 0 and 1"),
    "reward change as a list": ({"reward_change": [1.0, 2.0]}, [], "reward_change must be an object"),
    "reward change amount as text": ({"reward_change": {"b": "x"}}, [], "reward_change['b'] must be a number"),
    "reward change flag amount": (None, ["--reward-change", "b=abc"], "the amount must be a number"),
    "parameter change as text": ({"parameter_change": "RC=*2"}, [], "parameter_change must be an object"),
    "parameter change without features": (None, ["--parameter-change", "RC=*2"], "without --features"),
    "structural route without features": (None, ["--route", "structural"], "needs a structural fit"),
    "min visits 0": (None, ["--min-visits", "0"], "min_visits must be a positive"),
    "spec not JSON": ("{", [], "is not valid JSON"),
    "unknown spec key": ({"rewards": {}}, [], "keys among"),
    "check normalization anchor never taken": (None, ["--check-normalization", "anchor:zzz"],
                                               "check_normalization (--check-normalization) 'anchor:zzz' names action "
                                               "'zzz', but the fitted actions are ['a', 'b']"),
    "transitions a text file": (None, ["--transitions", "{tmp}/t.txt"],
                                "cannot read the --transitions kernel"),
    "transitions not a .npy array": (None, ["--transitions", "{tmp}/t.txt"], "t.txt': it is not a NumPy .npy file"),
    "transitions of the wrong shape": (None, ["--transitions", "{tmp}/k33.npy"],
                                       "must have shape (S, K, S) = (3, 2, 3) or (S*K, S) = (3*2, 3)"),
    "transitions with other states": (None, ["--transitions", "{tmp}/k5.npy"],
                                      "has 5 states (shape (5, 2, 5)), but the fit has 4"),
    "transitions file missing": (None, ["--transitions", "{tmp}/nope.npy"], "--transitions kernel file"),
    "initial as text": ({"initial": "x"}, [], "initial (--initial) must be a state index"),
    "initial a list with text": ({"initial": [0.5, 0.5, "x", 0]}, [], "initial (--initial) must be a state index"),
    "horizon as text": ({"horizon": "x", "initial": 0}, [], "horizon (--horizon) must be a positive integer"),
    "min visits as text": ({"min_visits": "x"}, [], "min_visits (--min-visits) must be a positive integer"),
    "check normalization a number": ({"check_normalization": 1}, [],
                                     "check_normalization (--check-normalization) must be 'mean-zero'"),
    "gamma as text": ({"gamma": "x"}, [], "gamma (--gamma) must be a discount factor"),
    "transitions a number": ({"transitions": 3}, [], "transitions (--transitions) must be the path"),
    "bootstrap as text": ({"bootstrap": "many"}, [], "bootstrap (--bootstrap) must be a number of replicates"),
}


@pytest.mark.parametrize("case", list(COUNTERFACTUAL))
def test_counterfactual_bad_input(case, cf_fit, tmp_path, capsys):
    spec, flags, phrase = COUNTERFACTUAL[case]
    fit, _ = cf_fit
    (tmp_path / "t.txt").write_text("0.5 0.5\n0.5 0.5\n")
    np.save(tmp_path / "k33.npy", np.full((3, 3), 1 / 3))
    np.save(tmp_path / "k5.npy", np.full((5, 2, 5), 0.2))
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    argv = ["counterfactual", str(fit), *flags, "--bootstrap", "0", "--quiet", "--out", str(tmp_path / "cf")]
    if spec is not None:
        (tmp_path / "spec.json").write_text(spec if isinstance(spec, str) else json.dumps(spec))
        argv += ["--spec", str(tmp_path / "spec.json")]
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and "Traceback" not in stderr, (case, stderr)
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("genpqr counterfactual: error: ") and phrase in message, (case, message)
    assert not (tmp_path / "cf").exists()


def _other_model(folder):
    """model.joblib of another fit (the earlier one at ``folder``'s place, say) beside this config."""
    import shutil

    other = folder.parent / "other"
    assert main(["fit", str(folder.parent / "data.csv"), "--episode", "episode", "--time", "time", "--state", "state",
                 "--action", "action", "--gamma", "0.8", "--normalization", "anchor:b", "--cross-fit", "0", "--quiet",
                 "--out", str(other)]) == 0
    shutil.copyfile(other / "model.joblib", folder / "model.joblib")


# issue 20: a fit folder that an interrupted, mixed or edited run left is refused, naming the file
BROKEN_FIT = {
    "model.joblib emptied (killed while rewritten)": (lambda f: (f / "model.joblib").write_bytes(b""),
                                                      "model.joblib does not match manifest.json"),
    "model.joblib cut short": (lambda f: (f / "model.joblib").write_bytes((f / "model.joblib").read_bytes()[:100]),
                               "model.joblib does not match manifest.json"),
    "model.joblib of another fit": (_other_model, "model.joblib does not match manifest.json"),
    "config.json edited": (lambda f: (f / "config.json").write_text((f / "config.json").read_text().replace(
        '"seed": 0', '"seed": 1')), "config.json does not match manifest.json"),
    "rewards.csv gone": (lambda f: (f / "rewards.csv").unlink(), "is not a genpqr fit folder: it has no rewards.csv"),
    "report.html gone": (lambda f: (f / "report.html").unlink(), "report.html is missing (listed in manifest.json)"),
    "a stale parameters.csv beside it": (lambda f: (f / "parameters.csv").write_text("parameter,estimate\n"),
                                         "parameters.csv is not in its manifest.json"),
    "no manifest.json": (lambda f: (f / "manifest.json").unlink(), "has no valid manifest.json"),
    "manifest.json cut short": (lambda f: (f / "manifest.json").write_text((f / "manifest.json").read_text()[:50]),
                                "has no valid manifest.json"),
    "a counterfactual folder": (lambda f: _relabel(f, "counterfactual"),
                                "holds a genpqr 'counterfactual' output, not a 'fit' output"),
}


def _relabel(folder, kind):
    from genpqr.estimator._manifest import read_manifest, store_manifest

    store_manifest(folder, read_manifest(folder)["files"], kind=kind)


@pytest.mark.parametrize("case", list(BROKEN_FIT))
def test_counterfactual_refuses_a_broken_fit_folder(case, cf_fit, tmp_path, capsys):
    import shutil

    fit, data = cf_fit
    shutil.copyfile(data, tmp_path / "data.csv")
    broken = tmp_path / "fit"
    shutil.copytree(fit, broken)
    BROKEN_FIT[case][0](broken)
    code, _, stderr = _run(["counterfactual", broken, "--reward-change", "b=-0.5", "--bootstrap", "0", "--quiet",
                            "--out", tmp_path / "cf"], capsys)
    assert code == 2 and "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, (case, stderr)
    message = stderr.strip()
    assert message.startswith("genpqr counterfactual: error: ") and BROKEN_FIT[case][1] in message, (case, message)
    assert not (tmp_path / "cf").exists()


def test_counterfactual_rereads_data_by_content(cf_fit, tmp_path, capsys):
    """The fit's data file with the time order reversed inside every episode (same choice counts):
    the bootstrap refuses to refit on it and says why; the point estimates are unchanged."""
    fit, data = cf_fit
    argv = ["counterfactual", str(fit), "--reward-change", "b=-0.5", "--quiet"]
    code, _, stderr = _run([*argv, "--out", str(tmp_path / "same")], capsys)
    assert code == 0 and "read again from" in stderr
    original = data.read_text()
    try:
        _reverse_time(data)
        code, _, stderr = _run([*argv, "--out", str(tmp_path / "reversed")], capsys)
    finally:
        data.write_text(original)
    assert code == 0 and "its content differs" in stderr and "no bootstrap intervals" in stderr
    same, reversed_ = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("same", "reversed"))
    np.testing.assert_allclose(reversed_["counterfactual"], same["counterfactual"], atol=0)


# ----------------------------------------------------------------------------- model files (issue 20)
class Payload:
    """A malicious pickle: unpickling it writes ``marker`` (any code could run there)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.write_text, (Path(self.marker), "the payload ran")


def _other_key_file(good: Path, tmp: Path) -> bytes:
    """The fit's model, signed under another account's key."""
    import os

    import genpqr

    model, before = genpqr.load(good), os.environ["GENPQR_CONFIG_DIR"]
    os.environ["GENPQR_CONFIG_DIR"] = str(tmp / "other-key")
    try:
        model.save(tmp / "other.joblib")
    finally:
        os.environ["GENPQR_CONFIG_DIR"] = before
    return (tmp / "other.joblib").read_bytes()


def _forged(tmp: Path) -> bytes:
    """A malicious pickle behind a genpqr header whose size and hash fit but whose signature is made up."""
    import hashlib
    import pickle

    from genpqr.estimator._manifest import MAGIC

    payload = pickle.dumps(Payload(str(tmp / "marker")))
    header = {"format": 1, "genpqr": "0", "holds": "GenPQR", "size": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest(), "signature": "f" * 64}
    return MAGIC + json.dumps(header).encode() + b"\n" + payload


# name: (bytes of model.joblib from (good file, tmp folder), error class name, phrases of the one-line error)
MODEL_FILES = {
    "malicious pickle": (lambda good, tmp: __import__("pickle").dumps(Payload(str(tmp / "marker"))),
                         "UntrustedFileError", ("no genpqr header", "runs any code", "--trust")),
    "malicious joblib file": (lambda good, tmp: _joblib_bytes(Payload(str(tmp / "marker")), tmp),
                              "UntrustedFileError", ("no genpqr header", "--trust")),
    "forged header over a malicious pickle": (lambda good, tmp: _forged(tmp), "UntrustedFileError",
                                              ("not under this account's signing key", "--trust")),
    "signed under another key": (_other_key_file, "UntrustedFileError", ("another machine or user", "--trust")),
    "plain joblib of an older genpqr": (lambda good, tmp: _joblib_bytes(__import__("genpqr").load(good), tmp),
                                        "UntrustedFileError", ("no genpqr header", "--trust")),
    "empty": (lambda good, tmp: b"", "IntegrityError", ("model.joblib is empty (0 bytes)",)),
    "text": (lambda good, tmp: b"episode,time,state,action\n0,0,1,a\n", "IntegrityError",
             ("no genpqr header and is not a pickle", "'episode,time,state,act")),
    "truncated": (lambda good, tmp: good.read_bytes()[:2000], "IntegrityError", ("is damaged", "payload has")),
    "one byte changed": (lambda good, tmp: _flip(good.read_bytes()), "IntegrityError", ("SHA-256 does not match",)),
}


def _joblib_bytes(obj, tmp: Path) -> bytes:
    import joblib

    joblib.dump(obj, tmp / "plain.joblib")
    return (tmp / "plain.joblib").read_bytes()


def _flip(data: bytes) -> bytes:
    return data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:]


def _fit_copy(cf_fit, tmp: Path, case: str, *, consistent: bool = True) -> Path:
    """A copy of the fit folder with ``model.joblib`` replaced. ``consistent``: as a folder handed
    over whole -- its manifest lists the new file's size and hash, unsigned (written elsewhere) --
    so that the model file's own check is what refuses it; else the manifest is the fit's."""
    import hashlib
    import json
    import shutil

    fit, _ = cf_fit
    copy = tmp / "fit"
    shutil.copytree(fit, copy)
    make = MODEL_FILES[case][0]
    data = make(fit / "model.joblib", tmp)
    (copy / "model.joblib").write_bytes(data)
    if consistent:
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["files"]["model.joblib"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest["signature"] = None
        (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize("case", list(MODEL_FILES))
def test_model_file_refused_by_load(case, cf_fit, tmp_path):
    """genpqr.load refuses the file with the named error; a payload never runs."""
    import genpqr
    from genpqr import exceptions

    _, error, phrases = MODEL_FILES[case]
    copy = _fit_copy(cf_fit, tmp_path, case)
    with pytest.raises(getattr(exceptions, error)) as info:
        genpqr.load(copy / "model.joblib")
    message = str(info.value)
    assert "\n" not in message and all(p.replace("--trust", "trusted=True") in message for p in phrases), message
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("case", list(MODEL_FILES))
def test_model_file_refused_by_counterfactual(case, cf_fit, tmp_path, capsys):
    """genpqr counterfactual: exit 2, one line naming the problem and --trust, no traceback, no
    output folder, and a payload never runs."""
    _, _, phrases = MODEL_FILES[case]
    copy = _fit_copy(cf_fit, tmp_path, case)
    code, _, stderr = _run(["counterfactual", str(copy), "--bootstrap", "0", "--quiet", "--out", str(tmp_path / "cf")],
                           capsys)
    assert code == 2 and "Traceback" not in stderr, (case, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genpqr counterfactual: error: "), stderr
    assert all(p in lines[0] for p in phrases), (case, lines[0])
    assert not (tmp_path / "cf").exists() and not (tmp_path / "marker").exists()


@pytest.mark.parametrize("case", ["malicious pickle", "empty", "one byte changed"])
def test_model_file_swapped_in_a_fit_folder_is_refused_by_its_manifest(case, cf_fit, tmp_path, capsys):
    """A model file swapped into a fit folder without updating its manifest: refused before
    anything is loaded, naming the file and the manifest; a payload never runs."""
    copy = _fit_copy(cf_fit, tmp_path, case, consistent=False)
    code, _, stderr = _run(["counterfactual", str(copy), "--bootstrap", "0", "--quiet", "--out", str(tmp_path / "cf")],
                           capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "model.joblib does not match manifest.json" in lines[0], stderr
    assert not (tmp_path / "cf").exists() and not (tmp_path / "marker").exists()


@pytest.mark.parametrize("case", ["plain joblib of an older genpqr", "signed under another key"])
def test_trust_loads_a_model_file_genpqr_did_not_sign(case, cf_fit, tmp_path, capsys):
    """--trust (trusted=True): the fit's model as a plain joblib file (older genpqr, joblib.dump) or
    signed elsewhere loads, and answers as the signed original does."""
    import genpqr

    copy = _fit_copy(cf_fit, tmp_path, case)
    fit, _ = cf_fit
    grid = np.arange(4.0)[:, None]
    np.testing.assert_array_equal(genpqr.load(copy / "model.joblib", trusted=True).reward(grid),
                                  genpqr.load(fit / "model.joblib").reward(grid))
    argv = ["counterfactual", "--reward-change", "b=-0.5", "--bootstrap", "0", "--quiet"]
    assert _run([*argv, str(fit), "--out", str(tmp_path / "a")], capsys)[0] == 0
    code, _, stderr = _run([*argv, str(copy), "--trust", "--out", str(tmp_path / "b")], capsys)
    assert code == 0, stderr
    a, b = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("a", "b"))
    pd.testing.assert_frame_equal(a, b)


def test_version_and_help(capsys):
    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.startswith("genpqr ")
    code, out, _ = _run(["experiment", "--help"], capsys)
    assert code == 0 and "GenPQR (BC, NN)" in out and "MaxEnt-IRL" in out
    code, out, _ = _run(["demo", "--help"], capsys)
    assert code == 0 and out.count("(default:") == 6  # --out, --states, --actions, --gamma, --episodes, --seed
    code, out, _ = _run(["report", "--help"], capsys)  # one positional folder, no option with a default
    assert code == 0 and "results.csv" in out and "results.md" in out
    code, _, err = _run(["demo", "--gamma", "1"], capsys)
    assert code == 2 and "--gamma" in err


# ----------------------------------------------------------------------------- the API
@pytest.fixture(scope="module")
def frame():
    return base_frame()


def _kw(**extra):
    return dict(episode="episode", time="time", state="state", action="action", **extra)


@pytest.fixture(scope="module")
def tabular(frame):
    return from_pandas(frame, **_kw())


def _rows(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4, n), rng.integers(0, 4, n)


API_ERRORS = {
    "time gap": (lambda f, d: from_pandas(_drop_row(f), **_kw()), ValueError,
                 r"time gap inside an episode: episode 0 jumps from time 2 to 4"),
    "unknown time_gaps": (lambda f, d: from_pandas(f, **_kw(time_gaps="fill")), ValueError,
                          r"time_gaps must be one of \['error', 'split'\]"),
    "text time column": (lambda f, d: from_pandas(f.assign(time="x"), **_kw()), TypeError, "time column 'time'"),
    "missing time": (lambda f, d: from_pandas(f.assign(time=f.time.where(f.time != 2)), **_kw()), ValueError,
                     "time column 'time' has 30 missing"),
    "one row per episode": (lambda f, d: from_pandas(f.assign(episode=np.arange(len(f))), **_kw()), ValueError,
                            "single row"),
    "empty frame": (lambda f, d: from_pandas(f.iloc[:0], **_kw()), ValueError, "at least one row"),
    "continuous-looking actions": (lambda f, d: from_arrays(np.zeros(600), np.linspace(0, 1, 600), np.zeros(600)),
                                   ValueError, r"use from_arrays\(\.\.\., action_space='box'\)"),
    "continuous-looking actions, from_pandas": (lambda f, d: from_pandas(f.assign(action=np.linspace(0, 1, len(f))),
                                                                          **_kw()),
                                                ValueError, "action column 'action' holds 180 distinct real numbers"),
    "continuous-looking actions, from_episodes": (lambda f, d: from_episodes(
        [{"states": np.zeros(101), "actions": np.linspace(0, 1, 100)}]), ValueError, "look like continuous actions"),
    "bootstrap one episode": (lambda f, d: _boot(d.subset(d.episode_ids == 0)), ValueError, "at least 10"),
    "bootstrap n_jobs 0": (lambda f, d: _boot(d, n_jobs=0), ValueError, "n_jobs"),
    "bootstrap n_boot 1": (lambda f, d: _boot(d, n_boot=1), ValueError, "n_boot must be at least 2"),
    "bootstrap not transitions": (lambda f, d: _boot(f), TypeError, "Transitions"),
    "gamma 1": (lambda f, d: GenPQR(N.anchor_action("a"), gamma=1.0, q_model="exact").fit(d), ValueError,
                r"gamma must be in \[0, 1\)"),
    "gamma text": (lambda f, d: GenPQR(N.anchor_action("a"), gamma="0.9", q_model="exact").fit(d), TypeError,
                   "gamma must be a real number"),
    "anchor never seen": (lambda f, d: GenPQR(N.anchor_action("z"), q_model="exact").fit(d), ValueError,
                          r"\['z'\] that the model never saw"),
    "normalization a string": (lambda f, d: GenPQR("anchor:a", q_model="exact").fit(d), TypeError,
                               "normalization must be a genpqr Normalization"),
    "data a frame": (lambda f, d: GenPQR(q_model="exact").fit(f), TypeError, "data must be genpqr.data.Transitions"),
    "q_model string": (lambda f, d: GenPQR(q_model="linear").fit(d), ValueError, "q_model must be 'exact'"),
    "classifier class": (lambda f, d: GenPQR(policy_model=FrequencyClassifier, q_model="exact").fit(d), TypeError,
                         "instantiate it"),
    "not a classifier": (lambda f, d: GenPQR(policy_model=NoParamsRegressor(), q_model="exact").fit(d), TypeError,
                         "fit\\(\\) and predict_proba\\(\\)"),
    "prefit without model": (lambda f, d: GenPQR(policy_prefit=True, q_model="exact").fit(d), ValueError,
                             "policy_prefit=True needs a fitted policy_model"),
    "single integer action": (lambda f, d: GenPQR(q_model="exact").fit(from_arrays([0, 1], [1, 1], [1, 0],
                                                                                       action_labels=[1, 2])),
                              ValueError, r"only one action \(1\)"),
    "NaN state": (lambda f, d: from_arrays([0.0, np.nan], ["a", "b"], [1, 0]), ValueError, "states must be finite"),
    "length mismatch": (lambda f, d: from_arrays([0, 1, 2], ["a", "b"], [1, 0, 1]), ValueError,
                        "states has 3 rows but actions has 2"),
    "2-D actions": (lambda f, d: from_arrays([0, 1], [["a", "b"], ["b", "a"]], [1, 0]), ValueError, "1-D"),
    "no rows": (lambda f, d: from_arrays(np.zeros(0), [], np.zeros(0)), ValueError, "at least one row"),
    "flags not boolean": (lambda f, d: from_arrays([0, 1], ["a", "b"], [1, 0], terminated=["x", "y"]), TypeError,
                          "terminated must be boolean"),
    "missing column": (lambda f, d: from_pandas(f, **{**_kw(), "state": "nope"}), ValueError,
                       r"missing column\(s\) \['nope'\]"),
    "duplicated step": (lambda f, d: from_pandas(pd.concat([f, f.iloc[:1]]), **_kw()), ValueError,
                        "pairs must be unique"),
    "not a frame": (lambda f, d: from_pandas(f.to_dict(), **_kw()), TypeError, "must be a pandas DataFrame"),
    "duplicated labels": (lambda f, d: from_arrays([0, 1], ["a", "b"], [1, 0], action_labels=["a", "a"]), ValueError,
                          "action labels must be distinct"),
    "infer: unknown target": (lambda f, d: _fitted(d).infer("variance"), ValueError,
                              "unknown inference target 'variance'"),
    "infer: an action never taken": (lambda f, d: _fitted(d).infer("value:action=z"), ValueError,
                                     r"names action 'z', which is not one of the data's actions \['a', 'b'\]"),
    "infer: a frame as data": (lambda f, d: _fitted(d).infer("reward-mean", f), TypeError,
                               "data must be genpqr.data.Transitions"),
    "infer: cross_fit 1": (lambda f, d: _fitted(d).infer("reward-mean", cross_fit=1), ValueError,
                           "cross_fit must be 'auto', an integer >= 2"),
    "infer: saved without its data": (lambda f, d: _without_data(_fitted(d)).infer("reward-mean"), ValueError,
                                      r"infer\(target\) without data needs the training data.*include_data=True"),
    "infer: not fitted, no data": (lambda f, d: GenPQR(N.anchor_action("a"), q_model="exact").infer("reward-mean"),
                                   NotFittedError, r"not fitted yet; call fit\(transitions\) first"),
    "exact with 2 state columns": (lambda f, d: GenPQR(q_model="exact").fit(
        from_arrays(np.zeros((4, 2)), ["a", "b", "a", "b"], np.zeros((4, 2)))), ValueError, "tabular states"),
}


def _fitted(data):
    return GenPQR(N.anchor_action("a"), q_model="exact").fit(data)


def _without_data(model):
    from genpqr.estimator._persistence import without_data

    return without_data(model)


def _boot(data, **kw):
    from genpqr.evaluation import bootstrap

    kw.setdefault("n_boot", 3)
    return bootstrap(GenPQR(N.anchor_action("a"), q_model="exact", progress=False), data, **kw)


@pytest.mark.parametrize("case", list(API_ERRORS))
def test_api_bad_input(case, frame, tabular):
    make, error, match = API_ERRORS[case]
    with pytest.raises(error, match=match) as info:
        make(frame, tabular)
    assert "np.int" not in str(info.value) and "np.str" not in str(info.value)


def test_api_read_table_delimiter_and_empty(tmp_path, frame):
    from genpqr.data import read_transitions
    from genpqr.data._io import read_table

    frame.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    with pytest.raises(ValueError, match=r"sep=';'"):
        read_table(tmp_path / "semi.csv")
    assert read_table(tmp_path / "semi.csv", sep=";").shape == frame.shape
    data = read_transitions(tmp_path / "semi.csv", sep=";", **_kw())
    assert data.n == N_EP * T and data.with_next().n == N_EP * (T - 1)  # every choice; the transitions
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match=r"data file '.*empty\.csv' is empty"):
        read_table(tmp_path / "empty.csv")


def test_api_time_gaps_split_is_exact(frame):
    """A split at the gap equals the two halves logged as separate episodes."""
    gapped = _drop_row(frame, 0, 3)
    split = from_pandas(gapped, **_kw(time_gaps="split"))
    halves = gapped.assign(episode=np.where((gapped.episode == 0) & (gapped.time > 3), -1, gapped.episode))
    reference = from_pandas(halves, **_kw())
    assert split.n == reference.n == N_EP * T - 1 and split.n_episodes == N_EP + 1
    assert split.with_next().n == reference.with_next().n == N_EP * (T - 1) - 2
    a = split.to_pandas().sort_values(["time", "state", "action"]).reset_index(drop=True).drop(columns="episode")
    b = reference.to_pandas().sort_values(["time", "state", "action"]).reset_index(drop=True).drop(columns="episode")
    pd.testing.assert_frame_equal(a, b)


def test_api_time_gap_rule_for_float_times(frame):
    from genpqr.data._long_format import time_gap_rows

    # episode 0 ticks by 0.5, episode 1 by 0.25: no gap (each episode's own modal step)
    f = pd.DataFrame({"e": [0] * 4 + [1] * 4, "t": [0, 0.5, 1.0, 1.5, 0, 0.25, 0.5, 0.75]})
    assert time_gap_rows(f, "e", "t")[0].size == 0
    f.loc[2, "t"], f.loc[3, "t"] = 1.5, 2.0  # 0.5 -> 1.5 is a gap
    np.testing.assert_array_equal(time_gap_rows(f, "e", "t")[0], [1])
    # integer times: the data's modal step (a clock ticking by 2 has no gaps)
    g = pd.DataFrame({"e": [0, 0, 0, 1, 1], "t": [0, 2, 4, 0, 2]})
    assert time_gap_rows(g, "e", "t")[0].size == 0


def test_api_real_valued_actions_as_labels_on_request():
    acts = np.linspace(0, 1, 600)
    data = from_arrays(np.zeros(600), acts, np.zeros(600), action_labels=acts)
    assert data.n_actions == 600


def test_api_classifier_without_get_params_is_copied(tabular):
    """A learner without get_params is deep-copied (not cloned): same reward as the plain one."""
    plain = GenPQR(N.anchor_action("a"), q_model="exact", policy_model=FrequencyClassifier()).fit(tabular)
    wrapped = GenPQR(N.anchor_action("a"), q_model="exact", policy_model=NoParamsClassifier(), cross_fit=3,
                     random_state=0).fit(tabular)
    reference = GenPQR(N.anchor_action("a"), q_model="exact", policy_model=FrequencyClassifier(), cross_fit=3,
                       random_state=0).fit(tabular)
    np.testing.assert_allclose(wrapped.reward_table().to_numpy(), reference.reward_table().to_numpy(), atol=1e-12)
    assert plain.policy_model.__class__ is FrequencyClassifier
    boot = _boot(tabular, n_boot=2)
    assert boot.replicates.shape == (2, 4, 2)
    model = GenPQR(N.anchor_action("a"), q_model=FQE(NoParamsRegressor(), n_iterations=5, tol=None),
                   policy_model=NoParamsClassifier(), progress=False).fit(tabular)
    assert np.all(np.isfinite(model.reward(np.arange(4.0)[:, None])))


def test_api_unvisited_states_are_marked(tabular):
    from genpqr.exceptions import WeakSupportWarning

    with pytest.warns(WeakSupportWarning, match="2 of 6 states have no observed choice"):
        model = GenPQR(N.anchor_action("a"), q_model="exact", n_states=6).fit(tabular)
    np.testing.assert_array_equal(model.visited_states_, [True] * 4 + [False] * 2)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_out_in_a_folder_nothing_can_be_written_to(tmp_path, capsys):
    """/proc takes no new files, even for root (for whom the permission bits say yes): the
    --out check writes a probe file before the fit instead of trusting os.access."""
    data = _write_input(None, tmp_path)
    code, _, stderr = _run(["fit", data, "--episode", "episode", "--time", "time", "--state", "state", "--action",
                            "action", "--gamma", "0.9", "--normalization", "anchor:a", "--quiet", "--out",
                            "/proc/genpqr-out"], capsys)
    assert code == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("genpqr fit: error: --out '/proc/genpqr-out' cannot be written")


def test_api_policy_value_difference_takes_labels(tabular):
    model = GenPQR(N.anchor_action("a"), q_model="exact").fit(tabular)
    by_label = model.policy_value_difference(N.anchor_action("b"), N.anchor_action("a"))
    by_table = model.policy_value_difference(np.tile([0.0, 1.0], (4, 1)), np.tile([1.0, 0.0], (4, 1)))
    np.testing.assert_allclose(by_label, by_table, atol=1e-12)


def test_api_message_helpers():
    from genpqr.data._validation import plain, short_list

    assert repr(plain(np.int64(1))) == "1" and plain(np.array([np.str_("a")])) == ["a"]
    assert short_list(np.arange(3)) == "[0, 1, 2]"
    text = short_list(np.arange(1000) / 7, limit=4)
    assert text.endswith("... (996 more)]") and len(text) < 120


def test_config_file_round_trip_with_new_keys(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"time_gaps": "split", "sep": ";"}))
    from genpqr.app.workflow import FitConfig

    config = FitConfig.from_json(path)
    assert config.time_gaps == "split" and config.sep == ";"
