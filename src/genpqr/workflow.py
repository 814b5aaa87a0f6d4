"""``genpqr fit``: from a long-format data file and a small config to a fitted model, a
rewards table and a self-contained report.

A :class:`FitConfig` says what the columns are and how to fit (it is also a JSON file:
``genpqr fit --config fit.json``; flags given on the command line override it).
:func:`run_fit` reads the file, checks it (missing columns, mixed types, a single action,
an anchor never taken: each a one-line ``ValueError`` naming the problem), fits
:class:`~genpqr.GenPQR`, optionally bootstraps whole episodes, and writes to ``out``:

``model.joblib``
    the fitted model, ``genpqr.load("out/model.joblib")``;
``rewards.csv``
    tabular mode: one row per state (``state_index``, the state columns -- bin labels for
    binned columns --, ``visits`` (rows with that state), ``visited`` (False: no choice observed
    there, so the data do not identify the reward; a ``WeakSupportWarning`` says so), one
    ``reward_<label>`` column per action, and with a
    bootstrap ``reward_<label>_se`` / ``_lo`` / ``_hi``); continuous mode: one row per row of
    the data file (episode, time, state columns, action, ``reward`` and ``continuation`` at the
    logged action, ``reward_<label>`` for every action, and bootstrap columns for ``reward``);
``parameters.csv``
    with ``features``: the parameters of the flow utility ``sum_k theta_k f_k(s, a)`` by the
    ``estimator`` (default NPL iterated to convergence, the MLE), their standard errors and
    intervals, the log-likelihood, the number of choices, iterations and convergence (columns:
    :mod:`genpqr.workflow_structural`);
``config.json``
    the effective config (defaults resolved): ``genpqr fit --config out/config.json`` reruns it;
``report.html``
    see :mod:`genpqr.fit_report`.

Continuous actions (``action_type="continuous"``, ``--action-type continuous``): the action
column(s) are real numbers and the model is :class:`~genpqr.continuous.ContinuousGenPQR`; see
:mod:`genpqr.fit_continuous` (which :func:`run_fit` hands over to) and
:mod:`genpqr.fit_report_continuous`. Everything below is about discrete actions.

Tabular mode (the exact solver) is on when ``q_model="exact"``, when ``bins`` are given, or
when ``q_model`` is not given and every state column holds integers. Each distinct
combination of the (binned) state columns is a state. States are numbered as follows: a
single column of non-negative integers (or a single binned column) is its own index when
its values are dense (at most half the range unused) or when a structured or given
transition model needs the order (``increment:`` or a ``.npy`` kernel); otherwise the
distinct combinations are numbered in sorted order. ``rewards.csv`` records the mapping.

Time: the next state of a row is the state of the next time step of its episode. A missing
step inside an episode (:func:`genpqr.data.time_gap_rows`) is an error naming the episode and
step, or with ``time_gaps="split"`` (``--time-gaps split``) the start of a new episode. Checks
that need no fit (settings, the ``--out`` folder, the bootstrap's minimum of
:data:`genpqr.inference.MIN_BOOTSTRAP_EPISODES` episodes) run before fitting.

Bins: ``bins={"x": [e1, e2, ...]}`` cuts column ``x`` at increasing edges into
``(-inf, e1), [e1, e2), ..., [em, inf)``, bin numbers ``0..m``.

Per-row normalization columns (``state-anchor:COL``, ``value:COL``): in tabular mode the
column must hold one value per state (rows at the same state must agree; missing values are
allowed as long as every state has one). In continuous mode the value at a new state is that
of the nearest logged row (1-nearest neighbour in the state columns, each scaled by its
standard deviation).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from ._checks import data_row, looks_continuous, plain, short_list

__all__ = [
    "FitConfig",
    "FitOutputs",
    "StateIndex",
    "NearestStateLookup",
    "run_fit",
    "add_fit_parser",
    "fit_command",
    "config_from_args",
    "parse_normalization",
    "parse_transition",
    "parse_bins",
]



# ============================================================================ config
from .fit_config import (ACTION_TYPES, CONTINUOUS_NORMALIZATION_FORMS, CONTINUOUS_POLICY_MODELS,  # noqa: F401
                         CONTINUOUS_Q_MODELS, INTEGRATION_FORMS, NORMALIZATION_FORMS, POLICY_MODELS, Q_MODELS,
                         FitConfig, parse_bins, parse_normalization, parse_transition)


def _read_frame(config: FitConfig, norm_kind: str, norm_arg):
    from .io import read_table

    frame = read_table(config.data, sep=config.sep)
    continuous = config.action_type == "continuous"
    action_cols = [c.strip() for c in config.action.split(",")] if continuous else [config.action]
    roles = [("--episode", config.episode), ("--time", config.time),
             *[("--state", c) for c in config.state], *[("--action", c) for c in action_cols],
             ("--terminated", config.terminated), ("--truncated", config.truncated),
             ("--outcome", config.outcome)]
    if norm_kind in ("state-anchor", "value", "behavior"):
        roles.append((f"--normalization {norm_kind}", norm_arg))
    _check_distinct_roles(config, action_cols)
    missing = [f"{col!r} ({role})" for role, col in roles if col and col not in frame.columns]
    if missing:
        padded = [str(c) for c in frame.columns if str(c) != str(c).strip()
                  and str(c).strip() in {col for _, col in roles if col}]
        hint = (f" (the file's column names {short_list(padded, 5)} have surrounding spaces: strip them in the "
                f"file, or give the names as written)" if padded else "")
        raise ValueError(f"{config.data}: missing column(s) {', '.join(missing)}; the file has columns "
                         f"{short_list(list(map(str, frame.columns)), 30)}{hint}")
    if len(frame) == 0:
        raise ValueError(f"{config.data} has no rows")
    for _, col in roles:
        if col:
            _check_not_mixed(frame, col)
    for col in config.state:
        _check_numeric(frame, col, "state column", allow_missing=False)
    _check_numeric(frame, config.time, "time column", allow_missing=False)
    for col in (config.outcome, norm_arg if norm_kind in ("value", "behavior") else None):
        if col:
            _check_numeric(frame, col, "column", allow_missing=norm_kind == "value")
    if not continuous:
        _check_discrete_actions(frame, config)
    return frame


def _check_distinct_roles(config: FitConfig, action_cols) -> None:
    """--episode, --time and the action column(s) are three different columns, and no state
    column is an action column (a state may be the time step or the episode, not the choice)."""
    named = [("--episode", config.episode), ("--time", config.time), *[("--action", c) for c in action_cols]]
    named += [("--state", c) for c in config.state if c in action_cols]
    seen = {}
    for flag, col in named:
        if col and col in seen:
            raise ValueError(f"{seen[col]} and {flag} name the same column {col!r}; each needs its own column")
        seen.setdefault(col, flag)


def _check_discrete_actions(frame, config: FitConfig) -> None:
    """At least two labels, none missing; real-valued actions point to --action-type continuous."""
    actions = frame[config.action]
    if actions.isna().any():
        raise ValueError(f"action column {config.action!r} has {int(actions.isna().sum())} missing value(s)")
    labels = np.unique(actions.to_numpy())
    if labels.size < 2:
        raise ValueError(f"action column {config.action!r} holds only one action ({plain(labels[0])!r}): a reward "
                         f"cannot be identified from choices among one option; GenPQR needs at least two actions")
    if looks_continuous(labels, len(frame)):
        raise ValueError(f"action column {config.action!r} holds {labels.size:,} distinct real numbers: these look "
                         f"like continuous actions; use --action-type continuous (discrete actions are labels)")


def _check_not_mixed(frame, column: str) -> None:
    import pandas as pd

    col = frame[column].dropna()
    if col.dtype != object and not pd.api.types.is_string_dtype(col):
        return
    kinds = {type(v).__name__ for v in col}
    numeric = pd.to_numeric(col.astype(str), errors="coerce").notna()
    if (numeric.any() and not numeric.all()) or ("str" in kinds and len(kinds) > 1):
        text = col[~numeric].iloc[0] if (~numeric).any() else col.iloc[0]
        number = col[numeric].iloc[0] if numeric.any() else col.iloc[-1]
        raise ValueError(f"column {column!r} mixes numbers and text (e.g. {plain(number)!r} and {plain(text)!r}); use "
                         f"one type")


def _check_numeric(frame, column: str, what: str, allow_missing: bool) -> None:
    import pandas as pd

    col = frame[column]
    if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
        example = plain(col.dropna().iloc[0]) if col.notna().any() else None
        raise ValueError(f"{what} {column!r} must be numeric, got text (e.g. {example!r}); encode categories as "
                         f"integers")
    values = col.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) if not allow_missing else np.isinf(values)
    if bad.any():
        raise ValueError(f"{what} {column!r} has {int(bad.sum())} missing or infinite value(s) (first at "
                         f"{data_row(int(np.flatnonzero(bad)[0]))})")


_FAIL = object()


def _convert_label(value, kind: str):
    try:
        if kind in "iu":
            f = float(value)
            return int(f) if f == int(f) else _FAIL
        if kind == "f":
            return float(value)
        if kind == "b":
            text = str(value).strip().lower()
            return {"1": True, "true": True, "0": False, "false": False}.get(text, _FAIL)
        return str(value)
    except (TypeError, ValueError, OverflowError):
        return _FAIL


def _match_labels(values, labels: np.ndarray, what: str, column: str) -> np.ndarray:
    """Values (strings from the CLI, or a column) as action labels of the data's dtype;
    a value that is no label raises ``ValueError`` listing the labels."""
    known = set(labels.tolist())
    out = []
    for v in np.asarray(values, dtype=object).ravel():
        c = _convert_label(v, labels.dtype.kind)
        if c is _FAIL or c not in known:
            raise ValueError(f"{what} {plain(v)!r} is never taken in the data: action column {column!r} has labels "
                             f"{short_list(labels, 20)}")
        out.append(c)
    return np.asarray(out, dtype=labels.dtype if labels.dtype.kind in "iufb" else object)


def _match_column(series, labels, what, column):
    """A whole column as action labels (matching each distinct value once)."""
    import pandas as pd

    uniq = pd.unique(series.dropna())
    mapping = dict(zip(uniq.tolist(), _match_labels(uniq, labels, what, column).tolist()))
    return series.map(mapping)


# ============================================================================ tabular states
@dataclass
class StateIndex:
    """Map from (binned) state columns to tabular state indices.

    Attributes
    ----------
    columns : list of str
    bins : dict column -> ndarray of cut points
    keys : ndarray of shape (S, d)
        The (binned) column values of each state index.
    identity : bool
        True when the single (binned) column's value is its index.
    """

    columns: list
    bins: dict
    keys: np.ndarray
    identity: bool

    @property
    def n_states(self) -> int:
        return int(self.keys.shape[0])

    def binned(self, frame) -> np.ndarray:
        """(n, d) values with binned columns replaced by bin numbers."""
        out = np.empty((len(frame), len(self.columns)))
        for j, col in enumerate(self.columns):
            values = frame[col].to_numpy(dtype=np.float64)
            out[:, j] = np.searchsorted(self.bins[col], values, side="right") if col in self.bins else values
        return out

    @classmethod
    def build(cls, frame, columns, bins, *, ordered: bool = False, n_states: int | None = None) -> "StateIndex":
        """Number the states of ``frame`` (see the module docstring); ``ordered``: the index
        must be the value (structured kernels); ``n_states``: the number of states required."""
        edges = {c: np.asarray(e, dtype=np.float64) for c, e in bins.items()}
        probe = cls(list(columns), edges, np.empty((0, len(columns))), False)
        values = probe.binned(frame)
        distinct = np.unique(values, axis=0)
        single_int = len(columns) == 1 and np.all(values >= 0) and np.all(values == np.round(values))
        if ordered and not single_int:
            raise ValueError("a structured or given transition model (--transition increment:/FILE.npy) needs one "
                             f"state column of non-negative integers (or one binned column), got {list(columns)}")
        if single_int:
            top = int(values.max()) + 1
            if columns[0] in edges:
                top = max(top, edges[columns[0]].size + 1)
            if n_states is not None:
                if n_states < top:
                    raise ValueError(f"{n_states} states were given (--n-states or the kernel) but the data has "
                                     f"state {top - 1}")
                top = n_states
            if ordered or n_states is not None or top <= 2 * distinct.shape[0]:
                return cls(list(columns), edges, np.arange(top, dtype=np.float64)[:, None], True)
        if n_states is not None and n_states != distinct.shape[0]:
            raise ValueError(f"{n_states} states were given (--n-states or the kernel) but the data has "
                             f"{distinct.shape[0]} distinct states")
        return cls(list(columns), edges, distinct, False)

    def transform(self, frame, what: str = "data") -> np.ndarray:
        """State index (n,) of every row; rows at unknown states raise ``ValueError``."""
        import pandas as pd

        values = self.binned(frame)
        if self.identity:
            idx = values[:, 0].astype(np.int64)
            bad = (values[:, 0] != idx) | (idx < 0) | (idx >= self.n_states)
        else:
            index = pd.MultiIndex.from_arrays(list(self.keys.T))
            idx = index.get_indexer(pd.MultiIndex.from_arrays(list(values.T)))
            bad = idx < 0
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{what}: {data_row(row)} has a state {dict(zip(self.columns, values[row].tolist()))} "
                             f"that does not occur in the data")
        return idx

    def labels(self):
        """DataFrame: ``state_index`` and each state column (bin labels ``[lo, hi)`` for binned ones)."""
        import pandas as pd

        table = pd.DataFrame({"state_index": np.arange(self.n_states)})
        for j, col in enumerate(self.columns):
            values = self.keys[:, j]
            if col in self.bins:
                e = np.concatenate([[-np.inf], self.bins[col], [np.inf]])
                table[col] = [f"[{e[int(b)]:g}, {e[int(b) + 1]:g})" for b in values]
            elif np.all(values == np.round(values)):
                table[col] = values.astype(np.int64)
            else:
                table[col] = values
        return table


class NearestStateLookup:
    """A per-row column read at new states by 1-nearest neighbour among logged rows (state
    columns scaled by their standard deviation). Callable ``states (n, d) -> (n,)``; picklable."""

    def __init__(self, states, values):
        self.states = np.asarray(states, dtype=np.float64)
        self.values = np.asarray(values)
        scale = self.states.std(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        self._tree = None

    def __call__(self, states):
        from scipy.spatial import cKDTree

        if self._tree is None:
            self._tree = cKDTree(self.states / self.scale)
        _, idx = self._tree.query(np.asarray(states, dtype=np.float64) / self.scale, k=1)
        return self.values[np.asarray(idx, dtype=np.int64)]

    def __getstate__(self):
        return {**self.__dict__, "_tree": None}


def _per_state(frame, column: str, index: np.ndarray, n_states: int, what: str):
    """(S,) table of a per-row column; rows at one state must agree."""
    import pandas as pd

    ok = frame[column].notna().to_numpy()
    grouped = pd.DataFrame({"s": index[ok], "v": frame[column].to_numpy()[ok]}).groupby("s")["v"]
    counts = grouped.nunique()
    if (counts > 1).any():
        s = int(counts.index[counts.to_numpy() > 1][0])
        values = sorted(grouped.get_group(s).unique().tolist(), key=str)[:2]
        raise ValueError(f"column {column!r} gives different {what}s at one state (state_index {s}: {values[0]!r} and "
                         f"{values[1]!r}); it must hold one value per state")
    first = grouped.first()
    present = set(np.unique(index).tolist())
    lacking = sorted(present - set(first.index.tolist()))
    if lacking:
        raise ValueError(f"column {column!r} has no {what} for state_index {lacking[:5]} (every state in the data "
                         f"needs one)")
    fill = frame[column].dropna().mode().iloc[0]
    table = np.array([fill] * n_states, dtype=object)
    table[first.index.to_numpy()] = first.to_numpy()
    return table


# ============================================================================ models
def _import_object(path: str, what: str):
    import importlib

    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{what} import path must look like package.module:Class, got {path!r}")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {what} {path!r}: {exc}") from None
    return obj() if callable(obj) else obj


def make_policy_model(name: str, *, tabular: bool, n_states: int | None, seed: int):
    """The stage-1 classifier named by ``--policy-model``."""
    if name in ("auto", "spline"):
        if not tabular:
            raise ValueError(f"--policy-model {name} needs tabular states (use logistic, mlp or lightgbm)")
        raise ValueError(f"--policy-model {name} is chosen from the data by genpqr.first_stage.choose_tabular_policy")
    if name == "frequency":
        if not tabular:
            raise ValueError("--policy-model frequency needs tabular states (use logistic, mlp or lightgbm)")
        from .policy import FrequencyClassifier

        return FrequencyClassifier(n_states=n_states)
    if name == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        first = OneHotEncoder(handle_unknown="ignore") if tabular else StandardScaler()
        return make_pipeline(first, LogisticRegression(max_iter=2000))
    if name == "mlp":
        from .nn import MLPClassifier

        return MLPClassifier(random_state=seed)
    if name == "lightgbm":
        try:
            from lightgbm import LGBMClassifier
        except ImportError:
            raise ValueError("--policy-model lightgbm needs the lightgbm package (pip install "
                             "genpqr[lightgbm])") from None
        return LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)
    if ":" in name:
        return _import_object(name, "policy model")
    raise ValueError(f"--policy-model must be one of {list(POLICY_MODELS)} or package.module:Class, got {name!r}")


def q_model_settings(name: str, *, seed: int, n_iterations: int | None) -> dict:
    """GenPQR keyword arguments for the stage-2 model named by ``--q-model``."""
    if name == "exact":
        return {"q_model": "exact"}
    if name == "linear":
        from sklearn.linear_model import Ridge

        return dict(q_model=Ridge(alpha=1.0), encoding="per_action", n_iterations=n_iterations or 500, tol=1e-6)
    if name == "mlp":
        from .nn import DuelingQNetwork

        return dict(q_model=DuelingQNetwork(random_state=seed), n_iterations=n_iterations or 30, tol=None)
    if name == "lightgbm":
        from .boosting import BoostedQModel

        return dict(q_model=BoostedQModel(random_state=seed), n_iterations=n_iterations or 200,
                    validation_fraction=0.2)
    if name == "lstd":
        from .lstd import LSTDQ

        return dict(q_model=LSTDQ(n_iterations=n_iterations, random_state=seed))
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return dict(q_model=HistGradientBoostingRegressor(max_iter=100, random_state=seed),
                    n_iterations=n_iterations or 50, validation_fraction=0.2)
    if ":" in name:
        return dict(q_model=_import_object(name, "Q model"), n_iterations=n_iterations or 100)
    raise ValueError(f"--q-model must be one of {list(Q_MODELS)} or package.module:Class, got {name!r}")


# ============================================================================ statistics for the bootstrap
class TabularStatistic:
    """Bootstrap statistic: the reward table, plus the projected parameters when features
    are given (weights: the replicate's visits per state-action pair)."""

    def __init__(self, features=None):
        self.features = features

    def __call__(self, model):
        table = np.asarray(model.stage2_.recovery.reward, dtype=np.float64)
        if self.features is None:
            return table
        theta = project(table, self.features, model.stage2_.counts)[0]
        return np.concatenate([table.ravel(), theta])


def _tabular_statistic(features, names, estimator):
    """The bootstrap statistic of the tabular mode: the reward table, plus the parameters
    (the projection, or re-estimated by the structural estimator)."""
    if features is None or estimator == "projection":
        return TabularStatistic(features)
    from .workflow_structural import StructuralStatistic

    return StructuralStatistic(features, names, estimator)


class RowRewardStatistic:
    """Bootstrap statistic: the reward at given (state, action code) rows."""

    def __init__(self, states, codes):
        self.states, self.codes = np.asarray(states, dtype=np.float64), np.asarray(codes, dtype=np.int64)

    def __call__(self, model):
        return model.reward(self.states)[np.arange(self.codes.size), self.codes]


def project(table, features, weights):
    """WLS of the reward table on the features: ``(theta, weighted R^2)``
    (:func:`genpqr.ddc.project_reward`, or a small fallback if that module is absent)."""
    try:
        from .ddc import project_reward
    except ImportError:  # pragma: no cover - ddc ships with genpqr; kept for partial installs
        project_reward = None
    if project_reward is not None:
        res = project_reward(table, features, weights)
        return np.asarray(res.theta), float(res.weighted_r2)
    X = features.reshape(-1, features.shape[2])
    sw = np.sqrt(np.asarray(weights, dtype=np.float64).reshape(-1))
    y = np.asarray(table).reshape(-1)
    theta = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)[0]
    total = float(np.sum((sw * y) ** 2))
    return theta, (1.0 - float(np.sum((sw * (y - X @ theta)) ** 2)) / total if total > 0 else 1.0)


def _read_features(path: str, config: FitConfig, index: StateIndex, labels: np.ndarray, counts: np.ndarray):
    """(S, K, p) features and their names from a CSV keyed by state and action."""
    import pandas as pd

    from .io import read_table

    table = read_table(path, sep=config.sep, what="features file")
    keys = ["state_index"] if "state_index" in table.columns else list(config.state)
    missing = [c for c in [*keys, config.action] if c not in table.columns]
    if missing:
        raise ValueError(f"features file {path}: missing column(s) {missing} (it needs the action column and "
                         f"'state_index' or the state columns {config.state}); it has {list(table.columns)}")
    names = [c for c in table.columns if c not in (*keys, config.action, *config.state)]
    if not names:
        raise ValueError(f"features file {path} has no feature columns besides the state and action columns")
    for col in names:
        _check_not_mixed(table, col)
        _check_numeric(table, col, "feature column", allow_missing=False)
    if keys == ["state_index"]:
        s = table["state_index"].to_numpy()
        if not np.all((s >= 0) & (s < index.n_states) & (s == np.round(s))):
            raise ValueError(f"features file {path}: state_index must be in [0, {index.n_states})")
        s = s.astype(np.int64)
    else:
        frame = table[keys].copy()
        for col in keys:
            if col in index.bins and not pd.api.types.is_numeric_dtype(frame[col]):
                frame[col] = _bin_representatives(frame[col], index.bins[col], col, path)
        s = index.transform(frame, what=f"features file {path}")
    a = np.searchsorted(labels, _match_column(table[config.action], labels, "feature action", config.action)
                        .to_numpy(dtype=labels.dtype))
    S, K = counts.shape
    cell = s * K + a
    if np.unique(cell).size != cell.size:
        raise ValueError(f"features file {path} lists a (state, action) pair more than once")
    X = np.zeros((S * K, len(names)))
    X[cell] = table[names].to_numpy(dtype=np.float64)
    absent = np.setdiff1d(np.flatnonzero(counts.ravel() > 0), cell)
    if absent.size:
        st, ac = divmod(int(absent[0]), K)
        raise ValueError(f"features file {path} has no row for {absent.size} visited (state, action) pair(s), e.g. "
                         f"state_index {st} with action {plain(labels[ac])!r}")
    return X.reshape(S, K, len(names)), names


def _bin_representatives(column, edges, name, path):
    """Bin labels ``[lo, hi)`` -> a value inside that bin."""
    e = np.concatenate([[-np.inf], edges, [np.inf]])
    lookup = {f"[{e[b]:g}, {e[b + 1]:g})": (e[b] if b > 0 else e[1] - 1.0) for b in range(len(e) - 1)}
    bad = [v for v in column if v not in lookup]
    if bad:
        raise ValueError(f"features file {path}: {bad[0]!r} in column {name!r} is neither a number nor a bin label "
                         f"{list(lookup)}")
    return column.map(lookup).astype(np.float64)


def _normalization(kind, arg, *, frame, config, labels, index_rows, n_states):
    """The Normalization of the spec; ``index_rows`` is the state index per row (tabular) or None."""
    from . import normalization as N

    if kind == "mean-zero":
        return N.mean_zero()
    if kind == "anchor":
        return N.anchor_action(_match_labels([arg], labels, "anchor action", config.action)[0])
    if kind == "behavior":
        return N.behavior()
    what = "anchor action" if kind == "state-anchor" else "value"
    column = frame[arg]
    if kind == "state-anchor":
        column = _match_column(column, labels, f"state anchor in column {arg!r}:", config.action)
    if index_rows is not None:
        table = _per_state(frame.assign(**{arg: column}), arg, index_rows, n_states, what)
        if kind == "state-anchor":
            return N.state_anchor(np.asarray(table.tolist(), dtype=labels.dtype if labels.dtype.kind in "iufb"
                                             else object))
        return N.value(np.asarray(table, dtype=np.float64))
    ok = column.notna().to_numpy()
    values = column.to_numpy()[ok]
    values = values.astype(np.float64) if kind == "value" else np.asarray(
        values.tolist(), dtype=labels.dtype if labels.dtype.kind in "iufb" else object)
    lookup = NearestStateLookup(frame.loc[ok, config.state].to_numpy(dtype=np.float64), values)
    return N.state_anchor(lookup) if kind == "state-anchor" else N.value(lookup)


def _decide_tabular(config: FitConfig, frame) -> bool:
    import pandas as pd

    q = config.q_model
    if q == "exact":
        return True
    if config.bins:
        if q is not None:
            raise ValueError(f"--bins discretizes the states for the tabular mode (--q-model exact); it cannot be "
                             f"combined with --q-model {q}")
        return True
    if q is None:
        return all(pd.api.types.is_integer_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
                   for c in config.state)
    return False


# ============================================================================ the fit
@dataclass
class FitOutputs:
    """What :func:`run_fit` produced (everything is also written to ``files``).

    Attributes
    ----------
    config : FitConfig
        The effective config (defaults resolved, paths absolute), as saved in ``config.json``.
    model : GenPQR
    data : Transitions
        The transitions fitted (tabular mode: states are ``state_index``).
    rewards, parameters : DataFrame (parameters None without features)
    bootstrap : BootstrapResult or None
    warnings : list of str
        ``"Category: message"`` of every warning raised during the fit.
    files : dict name -> Path
    tabular : bool
    state_index : StateIndex or None
    projection_r2 : float or None
    first_stage : genpqr.first_stage.FirstStageChoice or None
        Which tabular first stage ``--policy-model auto``/``spline`` chose and why.
    structural : StructuralFit or None
        With features: the structural estimates (:mod:`genpqr.workflow_structural`).
    """

    config: FitConfig
    model: object
    data: object
    rewards: object
    parameters: object
    bootstrap: object
    warnings: list
    files: dict
    tabular: bool
    state_index: StateIndex | None = None
    projection_r2: float | None = None
    first_stage: object = None
    structural: object = None

    def describe(self) -> str:
        """The lines ``genpqr fit`` prints."""
        d = self.model.diagnostics_
        if self.config.action_type == "continuous":
            mode = (f"continuous actions in {d.action_space}, policy {self.config.policy_model}, Q model "
                    f"{self.config.q_model}")
        else:
            mode = (f"tabular, {self.state_index.n_states} states, exact solve" if self.tabular
                    else f"continuous states, Q model {self.config.q_model}")
        last = getattr(d, "n_last_choices", 0)
        what = (f"{d.n_transitions} choices ({d.n_transitions - last} transitions + {last} last choices)" if last
                else f"{d.n_transitions} transitions")
        lines = [f"genpqr fit: {what} in {d.n_episodes} episodes ({mode})",
                 self.model.summary()]
        if self.first_stage is not None:
            lines.append(f"  first stage: {self.first_stage.describe()}")
        if self.structural is not None:
            from .workflow_structural import console_lines

            lines += console_lines(self.structural, self.parameters)
        elif self.parameters is not None:
            lines.append("  parameters (WLS projection of the reward on the features):")
            for _, row in self.parameters.iterrows():
                ci = (f"  [{row['ci_low']:.4g}, {row['ci_high']:.4g}]" if "ci_low" in row else "")
                lines.append(f"    {row['parameter']}: {row['estimate']:.4g}{ci}")
        lines.append("wrote:")
        lines += [f"  {path}" for path in self.files.values()]
        if self.warnings:
            lines.append(f"{len(self.warnings)} warning(s) (also in the report):")
            lines += [f"  {w}" for w in self.warnings]
        return "\n".join(lines)


def run_fit(config: FitConfig) -> FitOutputs:
    """Read, check, fit, bootstrap and write (see the module docstring)."""
    from .data import from_pandas

    config = config.check()
    if config.chunk_rows is not None or Path(config.data).is_dir():
        from .stream_cli import run_stream_fit

        return run_stream_fit(config)
    if config.action_type == "continuous":
        from .fit_continuous import run_continuous_fit

        return run_continuous_fit(config, _read_frame(config, *parse_normalization(config.normalization,
                                                                                   continuous=True)))
    kind, arg = parse_normalization(config.normalization)
    if kind == "behavior":
        if config.outcome and config.outcome != arg:
            raise ValueError(f"--normalization behavior:{arg} and --outcome {config.outcome} name different outcome "
                             f"columns")
        config = replace(config, outcome=arg)
    frame = _read_frame(config, kind, arg)
    tabular = _decide_tabular(config, frame)
    config = replace(config, q_model=config.q_model or ("exact" if tabular else "hgb"),
                     policy_model=config.policy_model or ("auto" if tabular else "logistic"))
    if not tabular and (config.features or config.transition != "counts" or config.n_states):
        raise ValueError("--features, --transition and --n-states need the tabular mode (--q-model exact, --bins, "
                         "or integer state columns)")
    labels = np.unique(frame[config.action].to_numpy())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = index_rows = transition_model = None
        state_cols, fit_frame = list(config.state), frame
        if tabular:
            index, transition_model = _tabular_states(config, frame, labels)
            index_rows = index.transform(frame)
            name = "state_index"
            while name in frame.columns:
                name = "_" + name
            fit_frame, state_cols = frame.assign(**{name: index_rows}), [name]
        data = from_pandas(fit_frame, episode=config.episode, time=config.time, state=state_cols,
                           action=config.action, terminated=config.terminated, truncated=config.truncated,
                           outcome=config.outcome, action_labels=labels, time_gaps=config.time_gaps)
        _check_before_fit(config, data, index)
        if config.cross_fit >= 2 and data.n_episodes < config.cross_fit:
            raise ValueError(f"--cross-fit {config.cross_fit} needs at least {config.cross_fit} episodes, but the "
                             f"data has {data.n_episodes}; lower it or use --cross-fit 0 (in-sample diagnostics)")
        if tabular and index.n_states > data.n / 2:
            from .exceptions import WeakSupportWarning

            warnings.warn(f"{index.n_states} states for {data.n} transitions: most states are visited about once, so "
                          f"the tabular estimates are noisy (consider --bins or a continuous --q-model)",
                          WeakSupportWarning)
        normalization = _normalization(kind, arg, frame=frame, config=config, labels=labels, index_rows=index_rows,
                                       n_states=index.n_states if tabular else None)
        policy_model, first_stage = _first_stage(config, data, index)
        model = _estimator(config, normalization, index, transition_model, policy_model).fit(data)
        features = names = None
        if config.features:
            features, names = _read_features(config.features, config, index, labels, model.stage2_.counts)
        boot = None
        if config.bootstrap:
            statistic = (_tabular_statistic(features, names, config.estimator) if tabular else
                         RowRewardStatistic(frame[config.state].to_numpy(dtype=np.float64),
                                            np.searchsorted(labels, frame[config.action].to_numpy())))
            boot = _bootstrap(model, data, statistic, config)
        structural = None
        if features is not None:
            from .workflow_structural import structural_from_model

            structural = structural_from_model(model, data, features, names, config.estimator)
    messages = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    if tabular:
        rewards = _tabular_rewards(model, index, data, labels, boot, config.level)
    else:
        rewards = _row_rewards(model, frame, config, labels, boot)
    parameters = r2 = None
    if features is not None:
        from .workflow_structural import parameters_table

        projection, r2 = _parameters(model, features, names, boot, config.level)
        parameters = parameters_table(structural, config.level, boot,
                                      projection if config.estimator == "projection" else None)
    outputs = FitOutputs(config, model, data, rewards, parameters, boot, messages, {}, tabular, index, r2,
                         first_stage, structural)
    _write(outputs, n_rows=len(frame))
    return outputs


def _first_stage(config: FitConfig, data, index):
    """Tabular ``auto``/``spline`` policy models: ``(classifier, FirstStageChoice)`` from
    :func:`genpqr.first_stage.choose_tabular_policy`; otherwise ``(None, None)``. The state
    counts as *ordered* (mileage, age, stock) when its single integer column is its index and
    the transitions say so (``--transition increment:``) or ``--n-states`` numbers it; a
    plain integer column may be a category code, where a smooth model would be wrong."""
    if index is None or config.policy_model not in ("auto", "spline"):
        return None, None
    from .first_stage import choose_tabular_policy

    ordered = index.identity and (parse_transition(config.transition)[0] == "increment"
                                  or config.n_states is not None or config.policy_model == "spline")
    return choose_tabular_policy(data, index.n_states, ordered=ordered,
                                 force="spline" if config.policy_model == "spline" else None,
                                 cross_fit=config.cross_fit if config.cross_fit >= 2 else None,
                                 random_state=config.seed)


def _check_before_fit(config: FitConfig, data, index) -> None:
    """What can be refused before the (possibly long) fit: too few episodes for the bootstrap.
    (States never visited are a failed diagnostic of the fit itself: a ``WeakSupportWarning``
    from :mod:`genpqr.diagnostic_checks`, in the API as here.)"""
    from .inference import check_bootstrap_episodes

    if config.bootstrap:
        check_bootstrap_episodes(data.n_episodes, "--bootstrap")


def _tabular_states(config: FitConfig, frame, labels):
    """The state numbering and the transition model of the tabular mode."""
    tkind, targ = parse_transition(config.transition)
    n_states, transition_model = config.n_states, None
    if tkind == "file":
        transition_model = _load_kernel(targ, n_actions=labels.size)
        n_states = transition_model.shape[-1]
        if config.n_states is not None and config.n_states != n_states:
            raise ValueError(f"--n-states {config.n_states} differs from the {n_states} states of the transition "
                             f"kernel {targ}")
    elif tkind == "increment":
        from .ddc import IncrementKernel

        reset = None if targ[1] is None else _match_labels([targ[1]], labels, "reset action", config.action)[0]
        transition_model = IncrementKernel(targ[0], reset)
    index = StateIndex.build(frame, config.state, config.bins, ordered=tkind != "counts", n_states=n_states)
    return index, transition_model


def _estimator(config: FitConfig, normalization, index, transition_model, policy_model=None):
    from .clipping import parse_clip
    from .estimator import GenPQR

    n_states = None if index is None else index.n_states
    if policy_model is None:
        policy_model = make_policy_model(config.policy_model, tabular=index is not None, n_states=n_states,
                                         seed=config.seed)
    return GenPQR(
        normalization=normalization, gamma=config.gamma, clip=parse_clip(config.clip),
        policy_model=policy_model,
        cross_fit=config.cross_fit if config.cross_fit >= 2 else None, n_states=n_states,
        transition_model=transition_model, random_state=config.seed, progress=False if config.quiet else None,
        **q_model_settings(config.q_model, seed=config.seed, n_iterations=config.n_iterations))


def _write(outputs: FitOutputs, n_rows: int) -> None:
    """model.joblib, rewards.csv, parameters.csv, config.json and report.html into ``config.out``."""
    from .fit_report import context_from_outputs, write_report

    outputs.config = outputs.config.with_absolute_paths()  # config.json reruns from any folder
    out = Path(outputs.config.out)
    out.mkdir(parents=True, exist_ok=True)
    files = outputs.files
    files.update(model=out / "model.joblib", rewards=out / "rewards.csv")
    outputs.model.save(files["model"], include_data=outputs.config.save_data)
    outputs.rewards.to_csv(files["rewards"], index=False)
    if outputs.parameters is not None:
        files["parameters"] = out / "parameters.csv"
        outputs.parameters.to_csv(files["parameters"], index=False)
    files["config"] = out / "config.json"
    outputs.config.to_json(files["config"])
    files["report"] = out / "report.html"
    write_report(files["report"], context_from_outputs(outputs, n_rows=n_rows))


def _load_kernel(path: str, n_actions: int) -> np.ndarray:
    """The kernel file: shape (S, K, S) or (S*K, S) with K = ``n_actions`` (the data's actions)."""
    if not Path(path).exists():
        raise FileNotFoundError(f"transition kernel file {path!r} does not exist")
    try:
        kernel = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"cannot read the transition kernel {path!r}: {exc}") from None
    K = n_actions
    shape = tuple(kernel.shape)
    ok = ((kernel.ndim == 3 and shape[1] == K and shape[0] == shape[2] > 0)
          or (kernel.ndim == 2 and shape[1] > 0 and shape[0] == shape[1] * K))
    if not ok:
        S = shape[-1] if kernel.ndim else "S"
        raise ValueError(f"the transition kernel {path!r} must have shape (S, K, S) = ({S}, {K}, {S}) or (S*K, S) = "
                         f"({S}*{K}, {S}) for S states and the data's K = {K} actions (in sorted label order), got "
                         f"{shape}")
    return kernel


def _bootstrap(model, data, statistic, config):
    from .inference import bootstrap

    try:
        return bootstrap(model, data, n_boot=config.bootstrap, statistic=statistic, n_jobs=config.n_jobs,
                         random_state=config.seed, progress=False if config.quiet else None, fitted=model)
    except ValueError as exc:
        raise ValueError(f"a bootstrap replicate failed (resampled episodes): {exc}") from None


def _intervals(boot, level, size):
    lo, hi = boot.interval(level)
    return boot.std_error.ravel()[:size], np.ravel(lo)[:size], np.ravel(hi)[:size]


def _tabular_rewards(model, index, data, labels, boot, level):
    table = np.asarray(model.stage2_.recovery.reward)
    S, K = table.shape
    rewards = index.labels()
    rewards["visits"] = np.bincount(data.states[:, 0].astype(np.int64), minlength=S)
    rewards["visited"] = rewards["visits"] > 0  # False: no observed choice, the reward is not identified there
    for k, label in enumerate(labels):
        rewards[f"reward_{label}"] = table[:, k]
    if boot is not None:
        se, lo, hi = (x.reshape(S, K) for x in _intervals(boot, level, S * K))
        for k, label in enumerate(labels):
            rewards[f"reward_{label}_se"] = se[:, k]
            rewards[f"reward_{label}_lo"] = lo[:, k]
            rewards[f"reward_{label}_hi"] = hi[:, k]
    return rewards


def _row_rewards(model, frame, config, labels, boot):
    states = frame[config.state].to_numpy(dtype=np.float64)
    codes = np.searchsorted(labels, frame[config.action].to_numpy())
    rows = np.arange(len(frame))
    reward = model.reward(states)
    rewards = frame[[config.episode, config.time, *config.state, config.action]].copy()
    rewards["reward"] = reward[rows, codes]
    rewards["continuation"] = model.continuation(states)[rows, codes]
    for k, label in enumerate(labels):
        rewards[f"reward_{label}"] = reward[:, k]
    if boot is not None:
        rewards["reward_se"], rewards["reward_lo"], rewards["reward_hi"] = _intervals(boot, config.level, len(frame))
    return rewards


def _parameters(model, features, names, boot, level):
    import pandas as pd

    theta, r2 = project(model.stage2_.recovery.reward, features, model.stage2_.counts)
    table = pd.DataFrame({"parameter": names, "estimate": theta})
    if boot is not None:
        p = len(names)
        lo, hi = boot.interval(level)
        table["std_error"] = boot.std_error[-p:]
        table["ci_low"], table["ci_high"] = np.ravel(lo)[-p:], np.ravel(hi)[-p:]
    return table, r2


# ============================================================================ command line
EXAMPLE = """examples:
  genpqr fit examples/data/choices.csv --episode episode --time time --state state \\
      --action action --gamma 0.9 --normalization anchor:a --bootstrap 50 --out fit-output
  genpqr fit examples/data/lqg.csv --episode episode --time time --state s --action a \\
      --action-type continuous --gamma 0.9 --normalization anchor:0 --out fit-lqg
"""


def add_fit_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``fit`` sub-command to an ``argparse`` sub-parsers object; returns it.

    Every option defaults to "not given" so that ``--config FILE.json`` values are kept
    unless a flag overrides them; ``args.func`` is :func:`fit_command`.
    """
    S = argparse.SUPPRESS
    p = subparsers.add_parser(
        "fit", help="fit GenPQR to a CSV/Parquet file: model, rewards table and HTML report",
        description="Recover a normalized reward from logged choices in a long-format file (one row per episode "
                    "and time step). Writes model.joblib, rewards.csv, parameters.csv (with --features), "
                    "config.json and report.html to --out. States are tabular (each distinct value of the state "
                    "columns is a state; exact solve) when every state column holds integers, with --bins, or with "
                    "--q-model exact; otherwise they are continuous (fitted Q evaluation, --q-model).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("data", nargs="?", default=S, help="CSV or Parquet data file, or a folder of Parquet files (read "
                   "out of core)")
    p.add_argument("--config", default=S, metavar="FILE.json", help="JSON config (same keys as the flags, with "
                   "underscores); flags override it")
    for name, help_ in (("episode", "episode id column"), ("time", "time step column"),
                        ("action", "action column"), ("terminated", "column flagging absorbing episode ends"),
                        ("truncated", "column flagging steps after which logging stopped"),
                        ("outcome", "outcome column (kept in the data; see behavior:)")):
        p.add_argument(f"--{name}", default=S, metavar="COL", help=help_)
    p.add_argument("--state", default=S, metavar="COL[,COL...]", help="state column(s)")
    p.add_argument("--action-type", dest="action_type", choices=ACTION_TYPES, default=S,
                   help="discrete (labels; default) or continuous (real-valued action column(s): --action a1,a2)")
    p.add_argument("--action-low", dest="action_low", default=S, metavar="LOW[,LOW...]",
                   help="continuous actions: lower bound(s) of the box support (with --action-high; default "
                        "unbounded)")
    p.add_argument("--action-high", dest="action_high", default=S, metavar="HIGH[,HIGH...]",
                   help="continuous actions: upper bound(s) of the box support")
    p.add_argument("--integration", default=S, metavar="SPEC",
                   help=f"continuous actions: mu-integrals by {INTEGRATION_FORMS} (default mc:32)")
    p.add_argument("--gamma", type=float, default=S, help="discount factor in [0, 1)")
    p.add_argument("--normalization", default=S, metavar="SPEC",
                   help=f"{NORMALIZATION_FORMS}; continuous actions: {CONTINUOUS_NORMALIZATION_FORMS}")
    p.add_argument("--policy-model", dest="policy_model", default=S, metavar="NAME",
                   help=f"{', '.join(POLICY_MODELS)} or package.module:Class (default: auto for tabular states -- "
                        f"a spline logit chosen by cross-validation when the state is ordered and its cells are "
                        f"sparse, else cell frequencies --, else logistic); continuous actions: "
                        f"{', '.join(CONTINUOUS_POLICY_MODELS)} "
                        f"(default gaussian)")
    p.add_argument("--q-model", dest="q_model", default=S, metavar="NAME",
                   help=f"{', '.join(Q_MODELS)} or package.module:Class (default: exact for tabular states, else hgb); "
                        f"continuous actions: {', '.join(CONTINUOUS_Q_MODELS)} (default linear)")
    p.add_argument("--clip", default=S, metavar="LOW,HIGH|none|auto",
                   help="probability clip of the policy: auto (default: no clip when every fitted probability is "
                        "positive, else a floor below the smallest fitted probability of an observed action), none, "
                        "or bounds such as 0.01,0.99 (the paper's); the bounds used are printed")
    p.add_argument("--cross-fit", dest="cross_fit", type=int, default=S, metavar="K",
                   help="episode folds for the policy (out-of-fold diagnostics; default 5; <2: none)")
    p.add_argument("--bootstrap", type=int, default=S, metavar="B", help="bootstrap replicates over episodes (0)")
    p.add_argument("--n-jobs", dest="n_jobs", type=int, default=S, metavar="J", help="bootstrap workers (1)")
    p.add_argument("--level", type=float, default=S, help="confidence level of the intervals (0.95)")
    p.add_argument("--bins", action="append", default=S, metavar="COL=e1,e2,...",
                   help="cut a state column at these points (tabular mode; repeatable)")
    p.add_argument("--transition", default=S, metavar="SPEC",
                   help="tabular transitions: counts (default), increment:MAX[:RESET_ACTION] (the state grows by "
                        "0..MAX with a state-independent distribution; under RESET_ACTION it restarts at 0 and the "
                        "period's increment is added from 0, Rust's timing: P(.|x, reset) = P(.|0, keep)) or FILE.npy")
    p.add_argument("--n-states", dest="n_states", type=int, default=S, metavar="S",
                   help="tabular: number of states of one integer state column (when top states never occur)")
    p.add_argument("--features", default=S, metavar="FILE.csv",
                   help="flow-utility features per (state, action): estimate their parameters (--estimator)")
    p.add_argument("--estimator", default=S, metavar="NAME",
                   help="with --features: npl (default; iterated to convergence = the MLE), nfxp, pml or projection")
    p.add_argument("--n-iterations", dest="n_iterations", type=int, default=S, help="maximum FQE iterations")
    p.add_argument("--seed", type=int, default=S, help="random seed (0)")
    p.add_argument("--time-gaps", dest="time_gaps", choices=("error", "split"), default=S,
                   help="a missing time step inside an episode: error (default; names the episode and step) or "
                        "split (start a new episode after the gap). Integer times must be consecutive; other times "
                        "may not step further than the episode's most common step")
    p.add_argument("--sep", default=S, metavar="CHAR", help="CSV delimiter (default ','; e.g. ';' or '\\t')")
    p.add_argument("--out", default=S, metavar="DIR", help="output folder (created; checked before fitting)")
    p.add_argument("--quiet", action="store_true", default=S, help="no progress bars")
    p.add_argument("--save-data", dest="save_data", action="store_true", default=S,
                   help="keep the training data in model.joblib (larger file; needed only to refit, bootstrap or "
                        "re-normalize the saved model)")
    p.add_argument("--chunk-rows", dest="chunk_rows", type=int, default=S, metavar="N",
                   help="out of core: stream the Parquet file/folder (sorted by episode) in chunks of N rows; tabular "
                        "counts or closed-form LSTD statistics (docs/out_of_core.md)")
    p.set_defaults(func=fit_command)
    return p


def config_from_args(args) -> FitConfig:
    """The effective config: defaults, then ``--config`` file, then the flags given."""
    given = dict(vars(args))
    config = FitConfig.from_json(given.pop("config")) if given.get("config") else FitConfig()
    given.pop("config", None)
    names = {f.name for f in fields(FitConfig)}
    values = {k: v for k, v in given.items() if k in names}
    if "bins" in values:
        bins = dict(config.bins)
        bins.update(parse_bins(text) for text in values["bins"])
        values["bins"] = bins
    return config.updated(values)


def fit_command(args) -> int:
    """Run ``genpqr fit``; 0 on success, 2 with a one-line message on bad input."""
    try:
        outputs = run_fit(config_from_args(args))
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"genpqr fit: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(outputs.describe())
    return 0
