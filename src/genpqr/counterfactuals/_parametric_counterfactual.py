r"""The structural route of a counterfactual: re-solve the estimated flow utility.

A structural fit (:class:`genpqr.structural.StructuralFit`, or any object with the
same attributes) holds a flow utility linear in parameters,

    u_theta(s, a) = x(s, a) @ theta + offset(s, a),

its estimate ``theta_hat`` with covariance, the kernel ``P_hat`` and discount of its
likelihood. A counterfactual on it changes the parameters (``theta' = change(theta_hat)``,
e.g. "RC x 2"), the flow payoffs (``+ delta``), the transitions or the discount, and solves the
soft-optimal policy of ``(u_theta' + delta, P', gamma')`` exactly; the baseline is the fitted
structural model ``(u_theta_hat, P_hat, gamma)``. The normalization question of the
nonparametric route does not arise: the features fix the reward's level (e.g.
``u(x, replace) = 0``), so every change, a change of a cost's level included, is identified
*by the model's functional form* -- which is the assumption the answer rests on.

Parameter changes (``parse_parameter_change``): ``{name: spec}`` with ``spec`` a number (the
new value), or a string ``"*F"`` (multiply), ``"+D"`` / ``"-D"`` (add / subtract), ``"=V"`` (set).

Uncertainty from the parameters (``delta_method``): the statistics ``h(theta)`` of both
solutions (action rates, mean state, value) have the delta-method covariance
``J cov J'`` with ``J = dh/dtheta`` by central differences (steps of a hundredth of a standard
error). Rates are bounded by 0 and 1 and
their sampling distribution is skewed when small, so their interval is computed on the logit
scale and mapped back (it stays inside (0, 1)); the mean state likewise inside the range of the
state values; differences on their own scale. The
covariance is the fit's (the MLE's inverse OPG by default): conditional on the kernel.
"""

from __future__ import annotations

import numpy as np

__all__ = ["parse_parameter_change", "ParameterChange", "delta_method", "delta_method_unit", "DeltaResult",
           "REQUIRED_ATTRIBUTES"]

#: What the structural route reads from a structural fit.
REQUIRED_ATTRIBUTES = ("theta", "names", "cov", "kernel", "gamma", "flow_utility")
_OPS = {"*": "multiply by", "+": "add", "-": "subtract", "=": "set to"}


class ParameterChange:
    """``theta -> theta'`` by named operations (picklable; applied to every bootstrap replicate's
    estimate as to the full-sample one).

    Parameters
    ----------
    operations : list of (index, op, value)
        ``op`` one of ``"*", "+", "-", "="``.
    names : list of str
    """

    def __init__(self, operations, names):
        self.operations, self.names = list(operations), list(names)

    def __call__(self, theta) -> np.ndarray:
        new = np.array(theta, dtype=np.float64, copy=True)
        for j, op, value in self.operations:
            new[j] = {"*": new[j] * value, "+": new[j] + value, "-": new[j] - value, "=": value}[op]
        return new

    def describe(self) -> str:
        return ", ".join(f"{self.names[j]} {_OPS[op]} {value:g}" for j, op, value in self.operations) or "none"


def _operation(name, spec):
    if isinstance(spec, (bool, np.bool_)):
        raise TypeError(f"parameter_change[{name!r}] must be a number or a string '*F', '+D', '-D' or '=V', got a bool")
    if isinstance(spec, (int, float, np.integer, np.floating)):
        op, text = "=", spec
    elif isinstance(spec, str) and spec.strip()[:1] in _OPS:
        op, text = spec.strip()[0], spec.strip()[1:]
    elif isinstance(spec, str):
        op, text = "=", spec
    else:
        raise TypeError(f"parameter_change[{name!r}] must be a number or a string '*F', '+D', '-D' or '=V', got "
                        f"{type(spec).__name__} {spec!r}")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"parameter_change[{name!r}] = {spec!r}: expected a number, '*F' (multiply), '+D' / '-D' "
                         f"(add / subtract) or '=V' (set)") from None
    if not np.isfinite(value):
        raise ValueError(f"parameter_change[{name!r}] = {spec!r} is not finite")
    return op, value


def parse_parameter_change(change, names) -> ParameterChange | None:
    """A :class:`ParameterChange` from ``{name: spec}``; None for no change. ``spec`` is a number
    (the new value), or a string ``"*F"`` (multiply), ``"+D"`` / ``"-D"`` (add / subtract),
    ``"=V"`` (set).

    Raises a ``ValueError`` naming an unknown parameter and the known ones, a ``TypeError`` for a
    spec that is not a mapping."""
    if change is None:
        return None
    if not isinstance(change, dict):
        raise TypeError(f"parameter_change must be a dict {{parameter name: spec}}, got {type(change).__name__}")
    names = [str(n) for n in names]
    operations = []
    for name, spec in change.items():
        if str(name) not in names:
            raise ValueError(f"parameter_change names parameter {name!r}, but the structural fit's parameters are "
                             f"{names}")
        operations.append((names.index(str(name)), *_operation(name, spec)))
    return ParameterChange(operations, names)


class DeltaResult:
    """Delta-method standard errors and intervals of statistics ``h(theta)``.

    Attributes
    ----------
    estimate, std_error, low, high : ndarray (m,)
    logit : ndarray of bool (m,)
        Whether the interval was computed on the logit scale (rates).
    kind : str
    """

    def __init__(self, estimate, std_error, low, high, logit, kind):
        self.estimate, self.std_error, self.low, self.high = estimate, std_error, low, high
        self.logit, self.kind = logit, kind


def _jacobian(fun, theta, base, cov):
    """Central differences of ``fun`` at ``theta``, shape (m, p).

    The step is a hundredth of the parameter's standard error (else ``1e-3 max(1, |theta_j|)``):
    the scale on which the linearization is used, and far above the rounding floor of the
    soft-optimal solve near ``gamma = 1`` (values of order ``1 / (1 - gamma)`` leave the choice
    probabilities about 1e-9 of relative precision, which steps of 1e-5 would amplify)."""
    J = np.empty((base.size, theta.size))
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    for j in range(theta.size):
        h = 1e-2 * se[j] if se[j] > 0 else 1e-3 * max(1.0, abs(float(theta[j])))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        J[:, j] = (fun(up) - fun(down)) / (2 * h)
    return J


def delta_method(fun, theta, cov, *, logit=None, bounds=None, level: float = 0.95,
                 kind: str = "delta method") -> DeltaResult:
    """Delta-method intervals of ``fun(theta)`` (m,) given ``cov`` (p, p).

    ``logit`` (m,) bool: statistics in (0, 1) whose interval is computed for ``log(h / (1 - h))``
    and mapped back; ``bounds`` (m, 2): the same for statistics in ``(low, high)`` (rescaled to
    (0, 1) first; rows of NaN: unbounded). NaN standard errors where ``cov`` is not finite."""
    theta = np.asarray(theta, dtype=np.float64)
    h = np.asarray(fun(theta), dtype=np.float64)
    lo_hi = np.tile([0.0, 1.0], (h.size, 1)) if bounds is None else np.array(bounds, dtype=np.float64)
    flags = np.zeros(h.size, dtype=bool) if logit is None else np.asarray(logit, dtype=bool)
    if bounds is not None:
        flags = flags | np.all(np.isfinite(lo_hi), axis=1)
        lo_hi[~np.all(np.isfinite(lo_hi), axis=1)] = [0.0, 1.0]
    width = np.where(lo_hi[:, 1] > lo_hi[:, 0], lo_hi[:, 1] - lo_hi[:, 0], 1.0)
    scaled = delta_method_unit(lambda t: (np.asarray(fun(t), dtype=np.float64) - lo_hi[:, 0]) / width, theta, cov,
                               flags, level, kind)
    return DeltaResult(h, scaled.std_error * width, lo_hi[:, 0] + scaled.low * width,
                       lo_hi[:, 0] + scaled.high * width, scaled.logit, kind)


def delta_method_unit(fun, theta, cov, logit, level: float, kind: str) -> DeltaResult:
    """``delta_method`` for statistics whose logit flags refer to the unit interval."""
    from scipy.stats import norm

    cov = np.asarray(cov, dtype=np.float64)
    h = np.asarray(fun(theta), dtype=np.float64)
    logit = np.asarray(logit, dtype=bool) & (h > 0) & (h < 1)
    z = norm.ppf(0.5 + level / 2)
    if not np.all(np.isfinite(cov)):
        nan = np.full(h.size, np.nan)
        return DeltaResult(h, nan, nan, nan, logit, kind)
    J = _jacobian(fun, theta, h, cov)
    se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", J, cov, J), 0.0, None))
    low, high = h - z * se, h + z * se
    if logit.any():
        hl = h[logit]
        scale = se[logit] / (hl * (1 - hl))  # d logit(h) = dh / (h (1 - h))
        centre = np.log(hl / (1 - hl))
        low[logit] = 1 / (1 + np.exp(-(centre - z * scale)))
        high[logit] = 1 / (1 + np.exp(-(centre + z * scale)))
    return DeltaResult(h, se, low, high, logit, kind)
