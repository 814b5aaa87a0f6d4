r"""The option objects of :class:`genpqr.GenPQR`'s path-specific knobs, and its Q-model slot.

* ``q_model``: ``"exact"`` (the tabular solve), ``"lstd"`` or a model with ``fit_bellman``
  (closed form, :class:`genpqr.stage2.LSTDQ`), or fitted Q evaluation: a
  :class:`genpqr.stage2.FQE` carries FQE's knobs (encoding, iterations, tolerance, early
  stopping, structure, ...); a bare regressor or native Q-model ``m`` (or None) means
  ``FQE(m)`` with FQE's defaults (``q_model_kind``, ``fqe_spec``).
* :class:`ContinuousOptions`: the knobs of continuous (box) actions -- the integration rule,
  the reference measure, the log-density floor and the density checks.
* :class:`TypeOptions`: the knobs of the EM over latent types (``n_types > 1``).

Both option objects follow the estimator contract (``__init__`` only stores; ``get_params`` /
``set_params``), so ``GenPQR(types=TypeOptions(n_starts=5))`` clones and grid-searches as
``types__n_starts``.
"""

from __future__ import annotations

import numbers

import numpy as np
from ..data._estimator_base import LightEstimator
from ..data._validation import clone_learner as clone

__all__ = ["ContinuousOptions", "TypeOptions", "q_model_kind", "fqe_spec"]


class _Options(LightEstimator):
    """A bundle of settings: equal when of one class with equal parameters (a value, like the
    integration rules it may hold), so a clone equals its original."""

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self.get_params(deep=False), other.get_params(deep=False)
        return all(_same(mine[k], theirs[k]) for k in mine)

    __hash__ = None


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a is b or bool(a == b)


class ContinuousOptions(_Options):
    """Continuous (box) actions (paper, App. "Continuous-Action Extension"):
    ``GenPQR(continuous=ContinuousOptions(...))``; ignored for finite actions.

    Parameters
    ----------
    integration : IntegrationRule, optional
        The rule of the ``mu``-integrals (:mod:`genpqr.actions`). Default ``MonteCarlo()``:
        32 antithetic draws, common random numbers across iterations; ``GaussHermite``,
        ``GaussLegendre``.
    reference : ReferenceMeasure, optional
        The reference measure ``lambda`` of ``u = log dpi/dlambda``. Default
        :class:`~genpqr.actions.Lebesgue` on the action space.
    min_log_density : float or None
        Lower clip of ``u`` (the continuous analogue of probability clipping); None: no clip.
    check_density : bool
        Verify numerically that the policy density (and a user kernel ``mu``) integrates to one.
    density_tol : float
        Tolerance of that check.
    """

    def __init__(self, integration=None, reference=None, min_log_density=None, check_density=True,
                 density_tol=1e-2):
        self.integration = integration
        self.reference = reference
        self.min_log_density = min_log_density
        self.check_density = check_density
        self.density_tol = density_tol


class TypeOptions(_Options):
    """The EM over latent agent types (``GenPQR(n_types=M, types=TypeOptions(...))``, ``M > 1``;
    :mod:`genpqr.estimator`); ignored with one type.

    Parameters
    ----------
    covariates : None, "initial_state" or array of shape (n_episodes, d)
        What the mixing proportions depend on (a multinomial logit): nothing, each episode's
        first state, or given covariates (rows in the order of the sorted episode ids).
    specific_transitions : bool
        Each type has its own transition kernel (estimated from its weighted counts; tabular
        states and no given ``transition_model``).
    n_starts : int
        EM starts (k-means on the episodes' action frequencies, then random); the best is kept.
    max_iter : int
        EM iterations per start.
    tol : float
        Stop when the log likelihood changes by at most ``tol * max(1, |loglik|)``.
    """

    def __init__(self, covariates=None, specific_transitions=False, n_starts=3, max_iter=200, tol=1e-8):
        self.covariates = covariates
        self.specific_transitions = specific_transitions
        self.n_starts = n_starts
        self.max_iter = max_iter
        self.tol = tol


def options(value, kind, name: str):
    """``value`` (None: ``kind()``, the defaults), checked to be a ``kind``."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a genpqr.estimator.{kind.__name__} or None, got {type(value).__name__}")
    return value


def check_n_types(n_types) -> int:
    """``n_types`` as an int >= 1 (a bool is refused)."""
    if isinstance(n_types, (bool, np.bool_)) or not isinstance(n_types, numbers.Integral) or n_types < 1:
        raise ValueError(f"n_types must be an int >= 1 (the number of latent types; not a bool), got {n_types!r}")
    return int(n_types)


def q_model_kind(q_model) -> str:
    """``"exact"``, ``"closed_form"`` (``"lstd"`` or a model with ``fit_bellman``) or ``"fqe"``
    (an :class:`~genpqr.stage2.FQE`, a regressor, a native Q-model or None)."""
    if isinstance(q_model, str):
        if q_model == "exact":
            return "exact"
        if q_model == "lstd":
            return "closed_form"
        raise ValueError(f"q_model must be 'exact', 'lstd', an FQE, a regressor or a native Q-model; got the "
                         f"string {q_model!r}")
    return "closed_form" if hasattr(q_model, "fit_bellman") else "fqe"


def fqe_spec(q_model):
    """The :class:`~genpqr.stage2.FQE` that ``q_model`` means (not a copy: clone before fitting):
    itself, or ``FQE(q_model)`` with FQE's defaults for a bare regressor, native Q-model or None."""
    from ..stage2 import FQE

    return q_model if isinstance(q_model, FQE) else FQE(regressor=q_model)


def fqe_for_fit(q_model, *, random_state=None, progress=None, **overrides):
    """A clone of ``fqe_spec`` ready to fit: ``progress`` the estimator's, ``random_state``
    the FQE's own or else the estimator's, and ``overrides`` (e.g. ``validation_fraction=None``)."""
    spec = fqe_spec(q_model)
    fqe = clone(spec)
    seed = spec.random_state if spec.random_state is not None else random_state
    return fqe.set_params(progress=progress, random_state=seed, **overrides)
