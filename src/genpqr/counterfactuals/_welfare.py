r"""Welfare of a counterfactual: the change in expected discounted utility, and in money.

The agents' welfare in a scenario is their expected discounted utility before the period's
shocks are drawn, the log-sum (social surplus) ``V(s) = logsumexp_a Q(s, a)`` of the soft-optimal
solution, averaged over a distribution of states ``d``:

    W = sum_s d(s) V(s),        Delta W = sum_s d(s) (V'(s) - V(s)).

``d`` is the same for both scenarios (agents as they are now): the initial distribution when
the counterfactual has one (``initial=``), else the baseline's stationary distribution (the
long-run population of the fitted model). ``V`` leaves out Euler's constant (temperature 1,
genpqr's convention): the levels ``W`` are shifted by ``0.5772 / (1 - gamma)``, the change is
exact when the discount is unchanged (a changed discount changes the welfare criterion itself).

Money. With a flow utility ``x @ theta`` in which a feature is denominated in money, its
coefficient ``lambda = theta_m`` is the utility of one unit of money, and a welfare change is
``Delta W / lambda`` units of money: the compensating variation, paid once at the start
(Small and Rosen's sign: positive a gain, negative a loss the agents would have to be paid to
accept). The feature must count money *received* (a price paid enters as ``-price``), so that
``lambda > 0``; ``lambda`` is the baseline estimate (a counterfactual that changes the money
parameter changes a price, not the value of money). ``(1 - gamma) Delta W / lambda`` is the same
amount paid every period (an annuity). The welfare *level* depends on which action carries a
utility common to all actions: a parametrization in which keeping the bus earns ``+RC`` every
month (``u(x, replace) = 0``) and one in which replacing costs ``-RC`` (Rust's) choose alike, but
doubling ``RC`` is a gain in the first and a loss in the second. Welfare is read in the
parametrization in which the money is paid where it is paid.

Uncertainty: the delta method from the parameters' covariance (structural route) and, with a bootstrap, the percentile interval of the replicates, each re-estimated
(``lambda`` too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WelfareResult"]

_UNITS = ("utility", "money")


def welfare_weights(initial, baseline):
    """``(d, name)``: the initial distribution (``initial``, (S,)) or else the baseline's
    stationary one; ``(None, None)`` when there is neither (episodes that end, no initial state)."""
    if initial is not None:
        return np.asarray(initial, dtype=np.float64), "initial"
    if baseline.stationary is not None:
        return np.asarray(baseline.stationary, dtype=np.float64), "stationary"
    return None, None


def welfare_values(baseline, counterfactual, weights) -> np.ndarray:
    """``[W, W']``: both scenarios' values ``V`` averaged over the same ``weights``."""
    return np.array([float(weights @ baseline.value), float(weights @ counterfactual.value)])


def check_money_parameter(money_parameter, structural, route: str):
    """The index of ``money_parameter`` among the structural fit's parameters (None for None),
    else a ``ValueError`` naming the argument: it needs the structural route, a parameter of the
    fit that the choices identify, with a positive estimate (utility per unit of money)."""
    if money_parameter is None:
        return None
    if structural is None or route != "structural":
        raise ValueError(f"money_parameter={money_parameter!r} converts utility into money with a structural "
                         f"parameter: it needs the structural route (a structural fit and route='structural' or "
                         f"'auto'), got route {route!r}")
    names = [str(n) for n in structural.names]
    if str(money_parameter) not in names:
        raise ValueError(f"money_parameter must name a parameter of the structural fit, one of {names}, got "
                         f"{money_parameter!r}")
    j = names.index(str(money_parameter))
    value = float(structural.theta[j])
    identified = getattr(structural, "identified", np.ones(len(names), dtype=bool))
    if not bool(np.asarray(identified)[j]):
        raise ValueError(f"money_parameter {money_parameter!r} is not identified by the choices: it cannot convert "
                         "utility into money")
    if not value > 0:
        raise ValueError(f"money_parameter {money_parameter!r} is estimated at {value:.4g}: the utility of one unit of "
                         f"money must be positive; write its feature as money received (a price paid as -price), so "
                         f"that its coefficient is the utility of money")
    return j


def _stack(values, money):
    """``[W, W', W' - W]`` and, with a money value, the same divided by it (rows: statistics)."""
    w = np.asarray(values, dtype=np.float64)
    base = np.stack([w[..., 0], w[..., 1], w[..., 1] - w[..., 0]], axis=-1)
    return base if money is None else np.concatenate([base, base / np.asarray(money)[..., None]], axis=-1)


@dataclass(frozen=True)
class WelfareResult:
    """The welfare of a counterfactual's two scenarios (:func:`genpqr.counterfactuals.counterfactual` with ``money_parameter``).

    Attributes
    ----------
    distribution : {"stationary", "initial"}
        The state distribution ``d`` both values are averaged over: the baseline's stationary
        distribution, or the counterfactual's initial one.
    baseline, counterfactual : float
        ``W = d V`` and ``W' = d V'``, in utility (``change`` their difference).
    gamma : float
        The baseline's discount (per-period amounts are ``(1 - gamma)`` times lump sums).
    money_parameter : str or None
        The parameter whose coefficient is the utility of one unit of money.
    money_value : float
        Its estimate, ``lambda`` (NaN without one).
    delta : DeltaResult or None
        Delta-method intervals of ``[W, W', W' - W]`` (and divided by ``lambda``).
    bootstrap : ndarray (B, 2, 2) or None
        Per replicate, for the baseline (row 0) and the counterfactual (row 1): ``(W, lambda)``.
    level : float
    identified : bool
        False when the counterfactual is not identified (nonparametric route, not invariant to
        the normalization): neither is its welfare.
    """

    distribution: str
    baseline: float
    counterfactual: float
    gamma: float
    money_parameter: str | None = None
    money_value: float = float("nan")
    delta: object = None
    bootstrap: np.ndarray | None = None
    level: float = 0.95
    identified: bool = True

    @property
    def change(self) -> float:
        """``Delta W``: the change in expected discounted utility."""
        return self.counterfactual - self.baseline

    @property
    def money_change(self) -> float:
        """``Delta W / lambda``: the compensating variation in units of money, paid once (NaN
        without a money parameter)."""
        return self.change / self.money_value if self.money_parameter is not None else float("nan")

    def units(self) -> list:
        """The units reported: ``"utility"``, and with a money parameter ``"money"``."""
        return list(_UNITS if self.money_parameter is not None else _UNITS[:1])

    def unit_label(self, unit: str) -> str:
        return "utility" if unit == "utility" else f"{self.money_parameter} units"

    def kinds(self) -> list:
        """The interval kinds available: ``"delta"``, ``"bootstrap"``."""
        return [k for k, v in (("delta", self.delta), ("bootstrap", self.bootstrap)) if v is not None]

    def _estimates(self) -> np.ndarray:
        return _stack([self.baseline, self.counterfactual], None if self.money_parameter is None
                      else self.money_value)

    def _bounds(self, kind: str, level=None):
        """``(se, low, high)`` of the lump-sum statistics, each (3 * units,), at ``level``
        (default the result's; the delta method only at it)."""
        level = self.level if level is None else float(level)
        if kind == "delta" and self.delta is not None:
            if abs(level - self.level) > 1e-12:
                raise ValueError(f"the delta-method intervals were computed at level {self.level:g}")
            return self.delta.std_error, self.delta.low, self.delta.high
        if kind == "bootstrap" and self.bootstrap is not None:
            money = None if self.money_parameter is None else self.bootstrap[:, 0, 1]
            reps = _stack(self.bootstrap[:, :, 0], money)
            alpha = (1 - level) / 2
            lo, hi = np.nanquantile(reps, [alpha, 1 - alpha], axis=0)
            return np.nanstd(reps, axis=0, ddof=1), lo, hi
        raise ValueError(f"this welfare result has no {kind!r} intervals (it has: {self.kinds() or 'none'})")

    def to_frame(self):
        """One row per (unit, horizon): ``unit`` (``"utility"``, ``"<money parameter> units"``),
        ``horizon`` (``"lump sum"``: paid once at the start; ``"per period"``: the same as a
        constant amount every period), ``baseline``, ``counterfactual``, ``change``, and for each
        interval kind ``change_se_<kind>``, ``change_lo_<kind>``, ``change_hi_<kind>``
        (``delta``, ``bootstrap``)."""
        import pandas as pd

        est = self._estimates().reshape(-1, 3)
        bounds = {kind: [b.reshape(-1, 3)[:, 2] for b in self._bounds(kind)] for kind in self.kinds()}
        rows = []
        for i, unit in enumerate(self.units()):
            for horizon, scale in (("lump sum", 1.0), ("per period", 1.0 - self.gamma)):
                row = dict(unit=self.unit_label(unit), horizon=horizon, baseline=scale * est[i, 0],
                           counterfactual=scale * est[i, 1], change=scale * est[i, 2])
                for kind, (se, lo, hi) in bounds.items():
                    row.update({f"change_se_{kind}": scale * se[i], f"change_lo_{kind}": scale * lo[i],
                                f"change_hi_{kind}": scale * hi[i]})
                rows.append(row)
        return pd.DataFrame(rows)

    def intervals(self, kind: str, level=None):
        """``{(unit, horizon): (se, low, high) each (3,) of [baseline, counterfactual, change]}``
        of ``kind`` (``"delta"`` or ``"bootstrap"``) at ``level`` (default the result's)."""
        se, lo, hi = (b.reshape(-1, 3) for b in self._bounds(kind, level))
        out = {}
        for i, unit in enumerate(self.units()):
            for horizon, scale in (("lump sum", 1.0), ("per period", 1.0 - self.gamma)):
                out[(self.unit_label(unit), horizon)] = (scale * se[i], scale * lo[i], scale * hi[i])
        return out

    def describe(self) -> str:
        where = ("the baseline's stationary distribution" if self.distribution == "stationary"
                 else "the initial distribution")
        text = f"welfare at {where}: expected discounted utility {self.baseline:.6g} -> {self.counterfactual:.6g} " \
               f"(change {self.change:.6g})"
        if self.money_parameter is not None:
            text += (f"; in {self.money_parameter} units (1 unit = {self.money_value:.4g} utility): "
                     f"{self.money_change:.6g} once, {(1 - self.gamma) * self.money_change:.6g} per period")
        return text + ("" if self.identified else "; NOT identified (the counterfactual is not invariant to the "
                                                  "normalization)")
