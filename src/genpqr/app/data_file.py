"""The data file of ``genpqr fit``: reading and checking it (missing columns, mixed types, text
where numbers are needed, a single action), matching values to the data's action labels, and
the ``--features`` file.

Shared by the discrete (:mod:`genpqr.app.workflow`), continuous
(:mod:`genpqr.app.fit_continuous`) and out-of-core (:mod:`genpqr.app.stream`) fits.
"""

from __future__ import annotations

import numpy as np

from ..data._validation import data_row, looks_continuous, plain, short_list
from ..registry import COLUMN
from .config import FitConfig

__all__ = ["read_frame", "check_column_names", "check_rows", "check_discrete_actions", "check_action_labels",
           "check_not_mixed", "check_numeric", "match_labels", "match_column", "read_features", "STATE_LIMIT",
           "normalization_column"]


def _roles(config: FitConfig) -> list:
    """``(flag, column)`` of every column the config names."""
    continuous = config.action_type == "continuous"
    action_cols = [c.strip() for c in config.action.split(",")] if continuous else [config.action]
    roles = [("--episode", config.episode), ("--time", config.time),
             *[("--state", c) for c in config.state], *[("--action", c) for c in action_cols],
             ("--terminated", config.terminated), ("--truncated", config.truncated),
             ("--outcome", config.outcome)]
    norm = normalization_column(config)
    if norm is not None:
        roles.append((f"--normalization {config.normalization.name}", norm))
    return roles


def normalization_column(config: FitConfig):
    """The data column the normalization reads (a :data:`~genpqr.registry.COLUMN` entry's
    argument: ``state-anchor:COL``, ``value:COL``, ``behavior:COL``), else None."""
    spec = config.normalization
    return spec.value if spec is not None and spec.can(COLUMN) else None


#: The largest state magnitude accepted: beyond it squares overflow (standardizing a column of
#: 1e8 rows sums squares up to 1e8 * STATE_LIMIT**2 < 1.8e308).
STATE_LIMIT = 1e150


def read_frame(config: FitConfig):
    """The data file as a DataFrame, checked: every named column present, no column mixing
    numbers and text, numeric state/outcome columns, a time column of numbers or timestamps, and (discrete actions) at least two
    action labels. The out-of-core reader runs the same checks (:mod:`genpqr.app.stream`)."""
    from ..data._io import read_table

    frame = read_table(config.data, sep=config.sep)
    check_column_names(config, list(frame.columns))
    if len(frame) == 0:
        raise ValueError(f"{config.data} has no rows")
    check_rows(frame, config)
    if config.action_type != "continuous":
        check_discrete_actions(frame, config)
    return frame


def check_column_names(config: FitConfig, columns: list) -> None:
    """The named columns are distinct where they must be and are all among ``columns`` (the file's)."""
    _check_distinct_roles(config)
    _check_columns_present(config, columns, _roles(config))


def check_rows(frame, config: FitConfig, first_row: int = 0) -> None:
    """The checks of single rows, on ``frame`` (all the rows, or a chunk of whole episodes whose
    first row is row ``first_row`` of the data; a role column not in ``frame`` is skipped): no
    column mixing numbers and text; finite numeric states (magnitude at most ``STATE_LIMIT``) and
    times; numeric outcome and value columns; no missing discrete action."""
    present = [col for _, col in _roles(config) if col and col in frame.columns]
    for col in present:
        check_not_mixed(frame, col)
    for col in (c for c in config.state if c in frame.columns):
        if is_text(frame[col]) and text_states_allowed(config):
            _check_no_missing(frame, col, "state column", first_row)  # text labels: each one a tabular state
            continue
        check_numeric(frame, col, "state column", allow_missing=False, first_row=first_row, max_abs=STATE_LIMIT)
    if config.time in frame.columns:
        _check_time(frame, config.time, first_row)
    spec, norm = config.normalization, normalization_column(config)
    numbers = norm is not None and spec.entry.notes.get("column") == "numbers"
    for col in (config.outcome, norm if numbers else None):
        if col and col in frame.columns:
            check_numeric(frame, col, "column", allow_missing=numbers and spec.entry.notes.get("missing", False),
                          first_row=first_row)
    if config.action_type != "continuous" and config.action in frame.columns:
        _check_no_missing_action(frame, config.action, first_row)


def _check_time(frame, time: str, first_row: int) -> None:
    """The time column: finite numbers, or timestamps (dates, datetimes, ISO 8601 text; numbered
    in the data's own unit where the transitions are built, :func:`genpqr.data.from_pandas`)."""
    from ..data._clock import is_timestamps, timestamp_ns

    if is_timestamps(frame[time]):
        timestamp_ns(frame[time], time, first_row)
    else:
        check_numeric(frame, time, "time column", allow_missing=False, first_row=first_row)


def _check_columns_present(config: FitConfig, columns: list, roles) -> None:
    """Every named column is in the file; names with surrounding spaces in the file are pointed out."""
    missing = [f"{col!r} ({role})" for role, col in roles if col and col not in columns]
    if missing:
        padded = [str(c) for c in columns if str(c) != str(c).strip()
                  and str(c).strip() in {col for _, col in roles if col}]
        hint = (f" (the file's column names {short_list(padded, 5)} have surrounding spaces: strip them in the "
                f"file, or give the names as written)" if padded else "")
        raise ValueError(f"{config.data}: missing column(s) {', '.join(missing)}; the file has columns "
                         f"{short_list(list(map(str, columns)), 30)}{hint}")


def _check_distinct_roles(config: FitConfig) -> None:
    """--episode, --time and the action column(s) are three different columns, and no state
    column is an action column (a state may be the time step or the episode, not the choice)."""
    continuous = config.action_type == "continuous"
    action_cols = [c.strip() for c in config.action.split(",")] if continuous else [config.action]
    named = [("--episode", config.episode), ("--time", config.time), *[("--action", c) for c in action_cols]]
    named += [("--state", c) for c in config.state if c in action_cols]
    seen = {}
    for flag, col in named:
        if col and col in seen:
            raise ValueError(f"{seen[col]} and {flag} name the same column {col!r}; each needs its own column")
        seen.setdefault(col, flag)


def check_discrete_actions(frame, config: FitConfig) -> None:
    """At least two labels, none missing; real-valued actions point to --action-type continuous."""
    _check_no_missing_action(frame, config.action, 0)
    check_action_labels(np.unique(frame[config.action].to_numpy()), len(frame), config.action)


def _check_no_missing_action(frame, column: str, first_row: int) -> None:
    missing = frame[column].isna().to_numpy()
    if missing.any():
        raise ValueError(f"action column {column!r} has {int(missing.sum())} missing value(s) (first at "
                         f"{data_row(first_row + int(np.flatnonzero(missing)[0]))})")


def check_action_labels(labels: np.ndarray, n_rows: int, column: str) -> None:
    """The data's sorted distinct action labels (shape (K,)) of ``n_rows`` rows: at least two, and
    not real numbers that look continuous."""
    if labels.size < 2:
        raise ValueError(f"action column {column!r} holds only one action ({plain(labels[0])!r}): a reward "
                         f"cannot be identified from choices among one option; GenPQR needs at least two actions")
    if looks_continuous(labels, n_rows):
        raise ValueError(f"action column {column!r} holds {labels.size:,} distinct real numbers: these look "
                         f"like continuous actions; use --action-type continuous (discrete actions are labels)")


def check_not_mixed(frame, column: str) -> None:
    """``ValueError`` when a text column holds both numbers and text."""
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


def is_text(column) -> bool:
    """A column of text (object or string dtype), not numbers, booleans or dates."""
    import pandas as pd

    return column.dtype == object or pd.api.types.is_string_dtype(column)


def text_states_allowed(config: FitConfig) -> bool:
    """Text state labels are tabular states: in memory, discrete actions, and no ``--q-model``
    other than a tabular one (``exact``), no ``--bins``."""
    from ..registry import SELECTED, TABULAR

    q = config.q_model
    return (config.action_type != "continuous" and not config.chunk_rows and not config.bins
            and (q is None or q.can(TABULAR) or q.can(SELECTED)))


def _check_no_missing(frame, column: str, what: str, first_row: int) -> None:
    bad = frame[column].isna().to_numpy()
    if bad.any():
        raise ValueError(f"{what} {column!r} has {int(bad.sum())} missing value(s) (first at "
                         f"{data_row(first_row + int(np.flatnonzero(bad)[0]))})")


def check_numeric(frame, column: str, what: str, allow_missing: bool, first_row: int = 0,
                  max_abs: float | None = None) -> None:
    """``ValueError`` for text, for missing/infinite values (missing ones allowed with
    ``allow_missing``) or for values beyond ``max_abs`` in magnitude, naming ``what`` and the
    first bad row (``first_row``: the data row of ``frame``'s first row)."""
    import pandas as pd

    col = frame[column]
    if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
        example = plain(col.dropna().iloc[0]) if col.notna().any() else None
        hint = (" (text labels are tabular states: drop --q-model/--bins/--chunk-rows, or give --q-model exact)"
                if what == "state column" else "")
        raise ValueError(f"{what} {column!r} must be numeric, got text (e.g. {example!r}); encode categories as "
                         f"integers{hint}")
    values = col.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) if not allow_missing else np.isinf(values)
    if bad.any():
        raise ValueError(f"{what} {column!r} has {int(bad.sum())} missing or infinite value(s) (first at "
                         f"{data_row(first_row + int(np.flatnonzero(bad)[0]))})")
    large = np.abs(values) > max_abs if max_abs is not None else np.zeros(0, dtype=bool)
    if large.any():
        i = int(np.flatnonzero(large)[0])
        raise ValueError(f"{what} {column!r} has {int(large.sum())} value(s) beyond +-{max_abs:.0e} in magnitude "
                         f"(first {values[i]:g} at {data_row(first_row + i)}): such values overflow when squared "
                         f"(standardizing, feature maps); rescale the column")


# ============================================================================ action labels
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


def match_labels(values, labels: np.ndarray, what: str, column: str) -> np.ndarray:
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


def match_column(series, labels, what, column):
    """A whole column as action labels (matching each distinct value once)."""
    import pandas as pd

    uniq = pd.unique(series.dropna())
    mapping = dict(zip(uniq.tolist(), match_labels(uniq, labels, what, column).tolist()))
    return series.map(mapping)


# ============================================================================ the features file
def _feature_names(table, path: str, config: FitConfig, keys: list) -> list:
    missing = [c for c in [*keys, config.action] if c not in table.columns]
    if missing:
        raise ValueError(f"features file {path}: missing column(s) {missing} (it needs the action column and "
                         f"'state_index' or the state columns {config.state}); it has {list(table.columns)}")
    names = [c for c in table.columns if c not in (*keys, config.action, *config.state)]
    if not names:
        raise ValueError(f"features file {path} has no feature columns besides the state and action columns")
    for col in names:
        check_not_mixed(table, col)
        check_numeric(table, col, "feature column", allow_missing=False)
    return names


def _feature_states(table, path: str, keys: list, index) -> np.ndarray:
    """The state index of every row of the features file."""
    import pandas as pd

    if keys == ["state_index"]:
        s = table["state_index"].to_numpy()
        if not np.all((s >= 0) & (s < index.n_states) & (s == np.round(s))):
            raise ValueError(f"features file {path}: state_index must be in [0, {index.n_states})")
        return s.astype(np.int64)
    frame = table[keys].copy()
    for col in keys:
        if col in index.bins and not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = _bin_representatives(frame[col], index.bins[col], col, path)
    return index.transform(frame, what=f"features file {path}")


def read_features(path: str, config: FitConfig, index, labels: np.ndarray, counts: np.ndarray):
    """(S, K, p) features and their names from a CSV keyed by state (``state_index`` or the
    state columns of ``index``, a :class:`~genpqr.app.states.StateIndex`) and action."""
    from ..data._io import read_table

    table = read_table(path, sep=config.sep, what="features file")
    keys = ["state_index"] if "state_index" in table.columns else list(config.state)
    names = _feature_names(table, path, config, keys)
    s = _feature_states(table, path, keys, index)
    a = np.searchsorted(labels, match_column(table[config.action], labels, "feature action", config.action)
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
