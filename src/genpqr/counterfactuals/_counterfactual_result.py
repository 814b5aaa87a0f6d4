r"""The result of a counterfactual (:func:`genpqr.counterfactuals.counterfactual`): baseline vs
counterfactual solutions, their summaries with intervals of a named kind, the route that
answered (structural or nonparametric) and the other route's answer, identification and
support.

Intervals carry their source (``interval_kind``):

* ``"bootstrap"``: percentile intervals over episode-bootstrap replicates (each refitted and
  re-solved; on the structural route the parameters are re-estimated per replicate). Replicates
  whose solution left the data's support (``genpqr.counterfactuals._support.off_support``) are counted
  (``off_support``) and kept in the interval; the count is printed beside it.
* ``"delta"`` (structural route): the delta method from the fit's covariance of the parameters
  (rates and the mean state on the logit scale of their range), conditional on the estimated kernel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CounterfactualResult", "load_counterfactual"]

_COLUMNS = ("baseline", "counterfactual", "difference")


@dataclass
class CounterfactualResult:
    """Baseline vs counterfactual: policies, values, distributions, summaries, identification,
    support and uncertainty.

    Attributes
    ----------
    baseline, counterfactual : ScenarioSolution
        The route's solutions (structural route: the fitted structural model and its change).
    action_labels : ndarray of shape (K,)
    state_values : ndarray of shape (S,)
        ``x(s)`` used for the mean state (default: the state index).
    changes : tuple of str
        Which primitives changed (``"parameters"``, ``"reward"``, ``"transitions"``, ``"gamma"``).
    invariant : bool
        Nonparametric route: True when the counterfactual policy is the same under every
        normalization. Structural route: True (the features fix the level; see ``rule``).
    rule : str
        Why.
    normalization, check_normalization : str
        The fitted normalization and the second one used to demonstrate the rule (nonparametric
        solution).
    normalization_gap : float
        ``max |pi'(a|s) - pi'_check(a|s)|`` of the nonparametric solution under the two
        normalizations (NaN when not checked).
    summary_gap : float
        Largest difference of its summary statistics between the two normalizations.
    bootstrap : ndarray of shape (B, 2, n_statistics) or None
        Replicates of the baseline (index 0) and counterfactual (index 1) summaries.
    level : float
    route : {"nonparametric", "structural"}
    parameter_change : str
        The parameter change, described ("none" without one).
    support : SupportReport or None
        Occupancy on thinly observed states and cells (:mod:`genpqr.counterfactuals`).
    delta : DeltaResult or None
        Structural route: delta-method intervals of ``[baseline, counterfactual, difference]``
        summaries (in :meth:`summary_keys` order, stacked).
    alternative : dict or None
        The other route's answer: ``{"route", "counterfactual" (summary dict), "baseline"
        (summary dict), "support" (SupportReport)}``.
    off_support : ndarray of shape (B, 2) bool or None
        Bootstrap replicates whose baseline (column 0) / counterfactual (column 1) left the support.
    se_kind : str
        The kind of the parameters' covariance behind ``delta`` (structural route).
    welfare : WelfareResult or None
        The change in expected discounted utility at the welfare distribution, and in money with
        a money parameter, with intervals (:class:`~genpqr.counterfactuals.WelfareResult`).

    Examples
    --------
    What a fit of the bundled data set predicts if action ``b`` paid 0.5 less at every state:

    >>> from genpqr import GenPQR, datasets, from_pandas
    >>> from genpqr import normalization as N
    >>> frame = datasets.load("choices")
    >>> data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    >>> model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", random_state=0).fit(data)
    >>> result = model.counterfactual(reward_change={"b": -0.5})
    >>> result.route, result.invariant
    ('nonparametric', True)
    >>> result.to_frame()[["statistic", "baseline", "counterfactual", "difference"]].round(3)
        statistic  baseline  counterfactual  difference
    0     rate[a]     0.338           0.426       0.088
    1     rate[b]     0.496           0.369      -0.127
    2     rate[c]     0.166           0.205       0.039
    3  mean_state     7.572           7.263      -0.309
    """

    baseline: object
    counterfactual: object
    action_labels: np.ndarray
    state_values: np.ndarray
    changes: tuple
    invariant: bool
    rule: str
    normalization: str
    check_normalization: str
    normalization_gap: float
    summary_gap: float
    bootstrap: np.ndarray | None = field(default=None, repr=False)
    level: float = 0.95
    route: str = "nonparametric"
    parameter_change: str = "none"
    support: object = field(default=None, repr=False)
    delta: object = field(default=None, repr=False)
    alternative: dict | None = field(default=None, repr=False)
    off_support: np.ndarray | None = field(default=None, repr=False)
    se_kind: str = ""
    welfare: object = field(default=None, repr=False)

    def __repr__(self) -> str:
        share = "n/a" if self.support is None else f"{self.support.share:.1%}"
        return (f"CounterfactualResult(route={self.route!r}, changes={self.changes}, parameter_change="
                f"{self.parameter_change!r}, interval_kind={self.interval_kind!r}, thin_state_share={share}; "
                f"summary() for the table, to_frame() for every column, describe() for the reading)")

    def summary_keys(self) -> list:
        return list(self.baseline.summary(self.action_labels, self.state_values))

    @property
    def interval_kind(self) -> str:
        """The source of the intervals :meth:`to_frame` shows: bootstrap when replicates were
        drawn, else the delta method (structural route), else none."""
        if self.bootstrap is not None:
            return "bootstrap"
        return "delta" if self.delta is not None else "none"

    def _interval_label(self, kind: str, level=None) -> str:
        level = self.level if level is None else level
        if kind == "bootstrap":
            B = self.bootstrap.shape[0]
            off = int(self.off_support[:, 1].sum()) if self.off_support is not None else 0
            return (f"bootstrap percentile over episodes ({level:.0%}, {B} replicates"
                    f"{', re-estimated each' if self.route == 'structural' else ''}; {off} left the data's support)")
        if kind == "delta":
            return (f"delta method ({level:.0%}; rates and the mean state on the logit scale of their range) from "
                    f"the parameters' covariance "
                    f"({self.se_kind or 'the fit'}), conditional on the kernel")
        return "none"

    def intervals(self, kind: str | None = None):
        """Standard errors and intervals per statistic from one source: ``"bootstrap"`` or
        ``"delta"`` (default: :attr:`interval_kind`). Columns ``distribution, statistic`` and
        ``{baseline,counterfactual,difference}_{se,lo,hi}``, ``interval_kind``."""
        import pandas as pd

        kind = self.interval_kind if kind is None else kind
        keys = self.summary_keys()
        frame = pd.DataFrame({"distribution": [k[0] for k in keys], "statistic": [k[1] for k in keys]})
        if kind == "bootstrap" and self.bootstrap is not None:
            reps = {"baseline": self.bootstrap[:, 0], "counterfactual": self.bootstrap[:, 1],
                    "difference": self.bootstrap[:, 1] - self.bootstrap[:, 0]}
            alpha = (1 - self.level) / 2
            for name, r in reps.items():
                frame[f"{name}_se"] = np.nanstd(r, axis=0, ddof=1)
                frame[f"{name}_lo"], frame[f"{name}_hi"] = np.nanquantile(r, [alpha, 1 - alpha], axis=0)
        elif kind == "delta" and self.delta is not None:
            m = len(keys)
            for i, name in enumerate(_COLUMNS):
                part = slice(i * m, (i + 1) * m)
                frame[f"{name}_se"] = self.delta.std_error[part]
                frame[f"{name}_lo"], frame[f"{name}_hi"] = self.delta.low[part], self.delta.high[part]
        elif kind not in ("bootstrap", "delta", "none"):
            raise ValueError(f"kind must be 'bootstrap' or 'delta', got {kind!r}")
        else:
            raise ValueError(f"this result has no {kind} intervals (interval_kind is {self.interval_kind!r})")
        self._drop_corner_intervals(frame, keys)
        frame["interval_kind"] = self._interval_label(kind)
        return frame

    def _drop_corner_intervals(self, frame, keys) -> None:
        """Where the change pushes a choice rate to a corner (``CORNER``), the interval of that
        rate and of its change, and every counterfactual interval that collapsed to a point, are
        NaN: the compact table's rule (``summary()``), so that summary.csv, ``to_frame()`` and the
        console say the same."""
        from ._counterfactual_summary import CORNER

        c = self.counterfactual.summary(self.action_labels, self.state_values)
        value = np.array([c[k] for k in keys], dtype=np.float64)
        rate = np.array([str(k[1]).startswith("rate[") for k in keys])
        corner = rate & (np.minimum(value, 1.0 - value) < CORNER)
        if not corner.any():
            return
        point = (np.abs(frame["counterfactual_hi"].to_numpy() - frame["counterfactual_lo"].to_numpy())
                 <= 1e-9 * np.maximum(1.0, np.abs(value)))
        for name, rows in (("counterfactual", corner | point), ("difference", corner)):
            frame.loc[rows, [f"{name}_se", f"{name}_lo", f"{name}_hi"]] = np.nan

    def to_frame(self):
        """Tidy summaries: one row per (distribution, statistic) with baseline, counterfactual,
        difference, the route; with intervals (:meth:`intervals` of :attr:`interval_kind`)
        ``*_se``, ``*_lo``, ``*_hi`` and ``interval_kind``; with the other route's answer
        ``{route}_counterfactual`` and ``route_gap`` (this route minus the other)."""
        keys = self.summary_keys()
        b = self.baseline.summary(self.action_labels, self.state_values)
        c = self.counterfactual.summary(self.action_labels, self.state_values)
        import pandas as pd

        frame = pd.DataFrame({"distribution": [k[0] for k in keys], "statistic": [k[1] for k in keys],
                              "route": self.route, "baseline": [b[k] for k in keys],
                              "counterfactual": [c[k] for k in keys]})
        frame["difference"] = frame["counterfactual"] - frame["baseline"]
        if self.interval_kind != "none":
            extra = self.intervals()
            frame = pd.concat([frame, extra.drop(columns=["distribution", "statistic"])], axis=1)
        if self.alternative is not None:
            other = self.alternative["counterfactual"]
            frame[f"{self.alternative['route']}_counterfactual"] = [other.get(k, np.nan) for k in keys]
            frame["route_gap"] = frame["counterfactual"] - frame[f"{self.alternative['route']}_counterfactual"]
        return frame

    def policy_frame(self):
        """Per state: ``x(s)``, baseline and counterfactual policies, values and distributions."""
        import pandas as pd

        frame = pd.DataFrame({"state_index": np.arange(self.state_values.size), "state_value": self.state_values})
        for tag, sol in (("baseline", self.baseline), ("counterfactual", self.counterfactual)):
            for k, label in enumerate(self.action_labels):
                frame[f"{tag}_policy[{label}]"] = sol.policy[:, k]
            frame[f"{tag}_value"] = sol.value
            if sol.stationary is not None:
                frame[f"{tag}_stationary"] = sol.stationary
            if sol.occupancy is not None:
                frame[f"{tag}_initial"] = sol.occupancy
        return frame

    def route_gap(self) -> float:
        """Largest relative difference between the two routes' counterfactual rates and mean
        states, ``|this - other| / max(|other|, 1e-12)`` (NaN without the other route)."""
        if self.alternative is None:
            return float("nan")
        c = self.counterfactual.summary(self.action_labels, self.state_values)
        o = self.alternative["counterfactual"]
        gaps = [abs(c[k] - o[k]) / max(abs(o[k]), 1e-12) for k in c if k in o and k[1] != "value"]
        return max(gaps, default=float("nan"))

    def summary(self, alpha=None, *, level=None, kind=None):
        """The answer in one compact table that fits 100 columns
        (``genpqr.counterfactuals._counterfactual_summary.CounterfactualSummary``): per statistic and for the
        welfare, baseline, counterfactual and change, with intervals of ``kind`` (default
        :attr:`interval_kind`) at ``1 - alpha`` (or ``level``; default the result's; another
        level only for bootstrap intervals); the header says what changed, the route, the
        intervals' kind and the thin-support share. ``print`` it; ``as_text()``, ``as_html()``,
        ``as_latex()``, ``to_frame()``."""
        from ._counterfactual_summary import counterfactual_summary

        return counterfactual_summary(self, _level(alpha, level), kind)

    def conf_int(self, alpha=None, *, level=None, kind=None):
        """Intervals per row of :meth:`summary` (the statistics, then the welfare): columns
        ``{baseline,counterfactual,change}_{lower,upper}`` and ``kind`` (``"delta method"`` or
        ``"bootstrap percentile"``); ``alpha``/``level`` and ``kind`` as in :meth:`summary`."""
        from ._counterfactual_summary import counterfactual_intervals

        return counterfactual_intervals(self, _level(alpha, level), kind)

    def describe(self) -> str:
        """A few sentences: the route, identification, the other route's gap, support, intervals."""
        lines = [f"counterfactual ({', '.join(self.changes) or 'no change'}) by the {self.route} route"
                 + (f" (parameters: {self.parameter_change})" if self.parameter_change != "none" else "") + "."]
        if self.route == "structural":
            lines.append(f"Identification: {self.rule}.")
        else:
            state = "invariant to the normalization" if self.invariant else "NOT invariant to the normalization"
            lines.append(f"Identification: {state}; {self.rule}.")
        if np.isfinite(self.normalization_gap):
            lines.append(f"Nonparametric solution re-solved under {self.check_normalization}: max policy difference "
                         f"{self.normalization_gap:.3g}, max summary difference {self.summary_gap:.3g}.")
        if self.alternative is not None:
            lines.append(f"The {self.alternative['route']} route answers differently by up to {self.route_gap():.1%} "
                         f"(relative, rates and mean state; column route_gap).")
        if self.support is not None:
            lines.append(self.support.describe() + ".")
        if self.interval_kind != "none":
            lines.append(f"Intervals: {self._interval_label(self.interval_kind)}.")
        return "\n".join(lines)

    def save(self, path) -> None:
        """Write the result to ``path`` in a format that runs no code when read: a zip of numpy
        arrays (``.npz``) and one JSON document for everything else (written atomically). Read it
        back with :func:`load_counterfactual`, which needs no ``trusted=True``."""
        import io

        from ..estimator._manifest import atomic_write_bytes

        arrays: dict = {}
        document = {"format": _FORMAT, "version": 1, "genpqr": _version(), "result": _encode(self, arrays)}
        meta = np.frombuffer(json.dumps(document, allow_nan=True).encode(), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{_META: meta}, **arrays)
        atomic_write_bytes(path, buffer.getvalue())


def _level(alpha, level):
    """The level of ``alpha`` (``1 - alpha``) or ``level``; None for neither."""
    if alpha is None and level is None:
        return None
    if alpha is not None and level is not None:
        raise ValueError(f"give alpha or level, not both (alpha={alpha!r}, level={level!r})")
    value = 1.0 - float(alpha) if alpha is not None else float(level)
    if not 0.5 <= value < 1.0:
        raise ValueError(f"the confidence level must be in [0.5, 1) (alpha in (0, 0.5]), got alpha={alpha!r}, "
                         f"level={level!r}")
    return value


def load_counterfactual(path, trusted: bool = False) -> CounterfactualResult:
    """A :class:`CounterfactualResult` saved with :meth:`CounterfactualResult.save`.

    The file holds arrays and JSON only (no pickle), so reading it runs no code. A result saved
    by a genpqr before this format is a joblib pickle, and a pickle runs any code it holds: it is
    loaded only with ``trusted=True`` (``IntegrityError`` for an empty, cut or text file,
    ``UntrustedFileError`` for a pickle without ``trusted``)."""
    import io
    import zipfile
    from pathlib import Path

    from ..exceptions import IntegrityError
    from ..estimator._manifest import read_signed

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"counterfactual result {str(path)!r} does not exist")
    data = path.read_bytes()
    if not data.startswith(b"PK\x03\x04"):  # not a zip: an older pickle (or not a result at all)
        result = read_signed(path, holds="CounterfactualResult", trusted=trusted)
    else:
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                document = json.loads(archive[_META].tobytes())
                if not isinstance(document, dict) or document.get("format") != _FORMAT:
                    raise ValueError("not a genpqr counterfactual result")
                arrays = {name: archive[name] for name in archive.files if name != _META}
            result = _decode(document["result"], arrays)
        except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile) as exc:
            text = " ".join(str(exc).split())[:200]
            raise IntegrityError(f"{path} could not be read as a saved counterfactual result "
                                 f"({type(exc).__name__}: {text}); it is damaged or is not one") from None
    if not isinstance(result, CounterfactualResult):
        raise TypeError(f"{path} does not hold a CounterfactualResult (got {type(result).__name__})")
    return result


# ================================================================ the file format (no pickle)
_FORMAT = "genpqr-counterfactual-result"
_META = "__genpqr__"


def _version() -> str:
    from .. import __version__

    return __version__


def _classes() -> dict:
    """The only classes a saved result may rebuild."""
    from ._parametric_counterfactual import DeltaResult
    from ._scenarios import ScenarioSolution
    from ._support import SupportReport
    from ._welfare import WelfareResult

    return {cls.__name__: cls for cls in (CounterfactualResult, ScenarioSolution, SupportReport, DeltaResult,
                                          WelfareResult)}


def _encode(value, arrays: dict):
    """JSON for ``value``; numeric and text arrays go to ``arrays`` (by key). Every JSON object
    is a tagged node (``{"$": kind, ...}``), so nothing is ambiguous."""
    if isinstance(value, np.generic):  # before float and str: np.float64 and np.str_ are subclasses
        return {"$": "scalar", "dtype": value.dtype.str, "value": value.item()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufcU":
            key = f"a{len(arrays)}"
            arrays[key] = value
            return {"$": "array", "key": key}
        if value.dtype.kind == "O":
            return {"$": "objects", "shape": list(value.shape), "items": [_encode(v, arrays) for v in value.ravel()]}
    if isinstance(value, (tuple, list)):
        items = [_encode(v, arrays) for v in value]
        return {"$": "tuple", "items": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {"$": "dict", "items": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    cls = _classes().get(type(value).__name__)
    if cls is type(value):
        return {"$": "object", "class": cls.__name__,
                "fields": {name: _encode(v, arrays) for name, v in vars(value).items()}}
    raise TypeError(f"a CounterfactualResult cannot save a {type(value).__name__} ({value!r:.80})")


def _decode(node, arrays: dict):
    """Inverse of :func:`_encode`; refuses any class outside :func:`_classes`."""
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("$")
    if kind == "scalar":
        return np.dtype(node["dtype"]).type(node["value"])
    if kind == "array":
        return arrays[node["key"]]
    if kind == "objects":
        out = np.empty(len(node["items"]), dtype=object)
        out[:] = [_decode(v, arrays) for v in node["items"]]
        return out.reshape(node["shape"])
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in node["items"])
    if kind == "dict":
        return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in node["items"]}
    if kind == "object":
        cls = _classes().get(node["class"])
        if cls is None:
            raise ValueError(f"unknown class {node['class']!r}")
        return cls(**{name: _decode(v, arrays) for name, v in node["fields"].items()})
    raise ValueError(f"unknown node {kind!r}")


def _hashable(key):
    if isinstance(key, list):
        raise ValueError("a list as a dict key")
    return key
