r"""Latent agent types for :class:`genpqr.GenPQR` (``n_types=M``): a finite mixture over episodes
estimated by EM over conditional choice probabilities (Arcidiacono and Miller 2011). The EM's
knobs are a :class:`~genpqr.estimator.TypeOptions` (``GenPQR(types=...)``); ``TypesPath`` is
the strategy ``GenPQR.fit`` chooses when ``n_types > 1``, returning a
:class:`~genpqr.estimator.FittedState` whose ``types`` part holds the mixture.

Every episode ``e`` belongs to one of ``M`` types for all its rows. Type ``m`` has its own stage 1
``pi_m(a|s)`` (and, with ``specific_transitions``, its own ``P_m(s'|s, a)``), and so its
own ``Q_m`` and reward ``r_m = Q_m - mu Q_m + g``. With ``q[e, m]`` the posterior probability
that episode ``e`` is of type ``m``:

* E-step: ``ell[i, m] = log pi_m(a_i|s_i) (+ log P_m(s'_i|s_i, a_i))`` per row, summed over each
  episode and combined with the mixing proportions into ``q`` (``genpqr.stage1._latent_types.type_posteriors``);
* M-step: type ``m``'s stage 1 refitted with row weights ``w_i q[e(i), m]``
  (``genpqr.stage1._policy.fit_policy`` reads ``Transitions.sample_weight``), its transitions from
  the weighted counts, and the mixing proportions (optionally a multinomial logit on episode
  covariates, ``genpqr.stage1._latent_types.mixing_log_prior``).

Stage 2 does not enter the likelihood, so it is solved once per type at the converged weights
(:func:`fit_type_models`): the same answer as solving it at every M-step. Starts: k-means on the
episodes' action frequencies, then random Dirichlet posteriors (``n_starts`` in all, drawn
from ``random_state``); the start with the highest log likelihood is kept.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..data._validation import check_gamma, seed_from
from ..exceptions import LatentTypeWarning
from ..stage1._latent_types import (SEPARATION_WARN, episode_codes, latent_type_warnings, mixing_log_prior,
                                    separation_share, type_posteriors, type_row_weights)
from ..stage1._policy import fit_policy
from ..stage1._stage1 import progress_bar
from .. import stage2 as tabular
from ..stage2._transition_spec import is_estimated_spec, resolve_transition_model
from ._estimator_finite import FinitePath
from ._options import TypeOptions, check_n_types, options, q_model_kind
from ._state import FittedState, TypesState

__all__ = ["LatentTypeWarning", "TypeFit", "TypesPath", "fit_type_models", "type_loglik_terms",
           "ccp_parameter_count", "information_criteria", "type_criteria", "type_warnings", "SEPARATION_WARN"]

@dataclasses.dataclass
class TypeFit:
    """One EM run: the converged stage 1 per type, the posteriors and the log likelihood."""

    policies: list
    kernels: list | None
    fit_weights: np.ndarray
    weights: np.ndarray
    log_prior: np.ndarray
    mixing_coef: np.ndarray | None
    loglik: float
    n_iter: int
    converged: bool


def _template(estimator, n_states=None):
    """A one-type copy of ``estimator`` (its parameters, ``n_types=1``)."""
    params = estimator.get_params(deep=False)
    params.update(n_types=1)
    if n_states is not None:
        params.update(n_states=n_states)
    return type(estimator)(**params)


def _stage1_learner(estimator, data):
    """The classifier every type's stage 1 clones: ``policy_model``, else the default of the
    one-type fit on the pooled data (exact path: ``genpqr.stage1._first_stage.choose_tabular_policy``)."""
    if estimator.policy_prefit:
        raise ValueError("n_types > 1 refits stage 1 per type: policy_prefit must be False")
    path = FinitePath(_template(estimator))
    n_states = path.infer_n_states(data) if path.exact else None
    learner, choice = path.first_stage(data, n_states)
    return learner, choice, n_states


def _weighted(data, base, row_weight):
    return dataclasses.replace(data, sample_weight=base * row_weight)


def _type_kernel(data, n_states, n_actions, weight):
    trans = data.with_next()
    w = weight if trans.n == data.n else weight[data.next_observed]
    kernel, _ = tabular.estimate_transitions(trans.states, trans.actions, trans.next_states, n_states, n_actions,
                                             terminated=trans.terminated, sample_weight=w)
    return kernel


def _transition_loglik(kernel, data, n_actions):
    """``log P(s'_i|s_i, a_i)`` per row (0 on a row without an observed next state; a
    terminated row: the log termination probability), shape (n,)."""
    out = np.zeros(data.n)
    rows = np.flatnonzero(data.next_observed)
    s = data.states[rows, 0].astype(np.int64)
    pair = s * n_actions + data.actions[rows]
    matrix = kernel.matrix.tocsr() if hasattr(kernel.matrix, "tocsr") else np.asarray(kernel.matrix)
    nxt = data.next_states[rows, 0].astype(np.int64)
    p = np.asarray(matrix[pair, nxt]).ravel()
    term = data.terminated[rows]
    if term.any():
        p[term] = 1.0 - np.asarray(matrix[pair[term]].sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        out[rows] = np.log(np.clip(p, 0.0, None))
    return out


def type_loglik_terms(policies, data, kernels=None) -> np.ndarray:
    """``ell[i, m]``: row ``i``'s log likelihood under type ``m``, shape (n, M): ``log pi_m(a_i|s_i)``
    (clipped stage-1 probabilities, as the fit uses them) plus ``log P_m(s'_i|s_i, a_i)`` when
    ``kernels`` (one per type) are given."""
    rows = np.arange(data.n)
    with np.errstate(divide="ignore"):
        ell = np.column_stack([np.log(p.proba(data.states)[rows, data.actions]) for p in policies])
    if kernels is not None:
        ell = ell + np.column_stack([_transition_loglik(k, data, data.n_actions) for k in kernels])
    return ell


def _covariates(estimator, data, labels, codes):
    """The mixing covariates (n_episodes, d) or None: ``TypeOptions.covariates`` as an array aligned
    with the sorted episode labels, or ``"initial_state"`` (each episode's first row's state)."""
    z = options(estimator.types, TypeOptions, "types").covariates
    if z is None:
        return None
    if isinstance(z, str):
        if z != "initial_state":
            raise ValueError(f"TypeOptions covariates must be None, 'initial_state' or an array (n_episodes, d), got "
                             f"{z!r}")
        time = np.arange(data.n) if data.timesteps is None else np.asarray(data.timesteps)
        order = np.lexsort((time, codes))  # by episode, then time: each episode's first row leads its block
        first = order[np.searchsorted(codes[order], np.arange(labels.size))]
        return np.asarray(data.states[first], dtype=np.float64)
    try:
        z = np.asarray(z, dtype=np.float64)
    except (TypeError, ValueError):
        raw = np.asarray(z, dtype=object).ravel()
        text = next((v for v in raw if not isinstance(v, (int, float, np.number))), None)
        raise ValueError(f"type_covariates must be numbers (one row per episode), got text or other values (e.g. "
                         f"{text!r}); encode categories as numbers (one indicator column per category)") from None
    z = z[:, None] if z.ndim == 1 else z
    bad = ~np.isfinite(z)
    if bad.any():
        from ..data._validation import plain

        row = int(np.argwhere(bad)[0][0])
        episode = data.episode_names(labels[row:row + 1])[0] if hasattr(data, "episode_names") else labels[row]
        raise ValueError(f"type_covariates has {int(bad.sum())} missing or infinite value(s) (first in the row of "
                         f"episode {plain(episode)!r}, row {row} in the order of the sorted episode ids); the mixing proportions need a finite covariate for every episode")
    if z.shape[0] != labels.size:
        raise ValueError(f"TypeOptions covariates has {z.shape[0]} rows but the data has {labels.size} episodes (one "
                         f"row per episode, in the order of the sorted episode ids)")
    return z


def _initial_weights(data, codes, n_episodes, n_types, start, rng):
    """Start ``0``: k-means on each episode's action frequencies (softened); later starts:
    posteriors drawn from a flat Dirichlet."""
    if start > 0:
        return rng.dirichlet(np.ones(n_types), size=n_episodes)
    from sklearn.cluster import KMeans

    freq = np.zeros((n_episodes, data.n_actions))
    np.add.at(freq, (codes, data.actions), 1.0)
    freq /= freq.sum(axis=1, keepdims=True)
    if np.unique(freq, axis=0).shape[0] < n_types:
        return rng.dirichlet(np.ones(n_types), size=n_episodes)
    labels = KMeans(n_clusters=n_types, n_init=10, random_state=int(rng.integers(2**31 - 1))).fit_predict(freq)
    return 0.8 * np.eye(n_types)[labels] + 0.2 / n_types


def _em_step(estimator, learner, data, base, codes, q, z, n_states, seed):
    """One M-step at posteriors ``q`` then the E-step: ``(policies, kernels, log_prior, coef, posterior)``."""
    rows = type_row_weights(q, codes)
    policies = [fit_policy(learner, _weighted(data, base, rows[:, m]), clip=estimator.clip, random_state=seed)
                for m in range(q.shape[1])]
    kernels = None
    if options(estimator.types, TypeOptions, "types").specific_transitions:
        kernels = [_type_kernel(data, n_states, data.n_actions, base * rows[:, m]) for m in range(q.shape[1])]
    log_prior, coef = mixing_log_prior(q, z)
    posterior = type_posteriors(type_loglik_terms(policies, data, kernels), codes, log_prior)
    return policies, kernels, log_prior, coef, posterior


def _em_postfix(loglik: float, change: float) -> str:
    """The EM bar's postfix: the log likelihood and its change in the last iteration."""
    return f"loglik {loglik:.6g}" + (f", change {change:.1e}" if np.isfinite(change) else "")


def _run_em(estimator, learner, data, base, codes, q, z, n_states, seed, desc="latent types EM") -> TypeFit:
    """EM from posteriors ``q`` to a relative log-likelihood change of ``tol``, with a bar over
    its iterations (``genpqr.stage1._stage1.progress_bar``, the estimator's ``progress``)."""
    opts = options(estimator.types, TypeOptions, "types")
    loglik, converged, it = -np.inf, False, 0
    with progress_bar(estimator.progress, desc=desc, unit="it") as bar:
        for it in range(1, int(opts.max_iter) + 1):
            policies, kernels, log_prior, coef, post = _em_step(estimator, learner, data, base, codes, q, z,
                                                                n_states, seed)
            fit_weights, q = q, post.weights
            change, loglik = post.loglik - loglik, post.loglik
            bar.set_postfix_str(_em_postfix(loglik, change), refresh=False)
            bar.update()
            if abs(change) <= opts.tol * max(1.0, abs(loglik)):
                converged = True
                break
    return TypeFit(policies, kernels, fit_weights, q, log_prior, coef, loglik, it, converged)


def _check_parameters(estimator, data):
    M, opts = check_n_types(estimator.n_types), options(estimator.types, TypeOptions, "types")
    if not data.is_finite:
        raise NotImplementedError("n_types > 1 is implemented for finite actions")
    exact = q_model_kind(estimator.q_model) == "exact"
    if opts.specific_transitions and (not exact or not is_estimated_spec(estimator.transition_model)):
        raise ValueError("TypeOptions(specific_transitions=True) needs tabular states (q_model='exact') and no given "
                         "transition_model: each type's kernel is estimated from its weighted transition counts")
    for name in ("max_iter", "n_starts"):
        value = getattr(opts, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"TypeOptions {name} must be an int >= 1, got {value!r}")
    if not (np.isscalar(opts.tol) and opts.tol >= 0):
        raise ValueError(f"TypeOptions tol must be a number >= 0, got {opts.tol!r}")
    n_episodes = np.unique(data.episode_ids).size
    if n_episodes < M:
        raise ValueError(f"n_types={M} needs at least {M} episodes, the data has {n_episodes}")


def _type_models(estimator, data, q, learner, choice, n_states) -> list:
    """One-type fits per type with row weights ``w_i q[e(i), m]`` (on the exact path one kernel for
    every type unless ``specific_transitions``: estimated from all rows, or the given
    ``transition_model``, a structured estimator evaluated once on all rows)."""
    _, codes = episode_codes(data.episode_ids)
    rows, base = type_row_weights(q, codes), data.weights
    params = _template(estimator, n_states).get_params(deep=False)
    params.update(policy_model=learner)
    given = estimator.transition_model
    specific = options(estimator.types, TypeOptions, "types").specific_transitions
    if q_model_kind(estimator.q_model) == "exact" and not specific:  # one kernel for all types, from all rows
        if is_estimated_spec(given):  # "auto" chooses on every row (weighted rows keep the counts)
            model, _ = resolve_transition_model(given, data.with_next(), n_states,
                                                        random_state=seed_from(estimator.random_state))
            given = _type_kernel(data, n_states, data.n_actions, base) if model is None else model.kernel()
        elif callable(given):
            given = given(data.with_next(), n_states, data.n_actions)
        params.update(transition_model=given)
    types = progress_bar(estimator.progress, iterable=range(q.shape[1]), desc="latent types: each type's fit",
                         unit="type")
    return [type(estimator)(**params).fit(_weighted(data, base, rows[:, m]), first_stage=choice) for m in types]


def fit_type_models(estimator, data, type_weights) -> list:
    """Fit each type's model at given episode weights: the M-step of ``TypesPath``
    with the posteriors fixed (e.g. known types: one-hot rows).

    Parameters
    ----------
    estimator : GenPQR
        Its parameters define every type's fit (``n_types`` is ignored; the exact path's
        transitions are pooled over types unless ``TypeOptions(specific_transitions=True)``).
    data : Transitions
    type_weights : array of shape (n_episodes, M)
        Non-negative weight of each episode (rows in the order of the sorted episode ids) in each
        type; row ``i`` of type ``m``'s fit weighs ``sample_weight_i * type_weights[e(i), m]``.

    Returns
    -------
    list of M fitted one-type GenPQR models.
    """
    labels, _ = episode_codes(data.episode_ids)
    q = np.asarray(type_weights, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] != labels.size or not np.all(np.isfinite(q)) or np.any(q < 0):
        raise ValueError(f"type_weights must be a non-negative array of shape (n_episodes={labels.size}, M), got "
                         f"shape {q.shape}")
    learner, choice, n_states = _stage1_learner(estimator, data)
    return _type_models(estimator, data, q, learner, choice, n_states)


def _reordered(fit: TypeFit, z) -> TypeFit:
    """Types in decreasing order of their proportion (a fixed labelling of the mixture)."""
    order = np.argsort(-fit.weights.mean(axis=0), kind="stable")
    fit_weights, weights = fit.fit_weights[:, order], fit.weights[:, order]
    log_prior, coef = mixing_log_prior(fit_weights, z)
    kernels = None if fit.kernels is None else [fit.kernels[m] for m in order]
    return dataclasses.replace(fit, policies=[fit.policies[m] for m in order], kernels=kernels,
                               fit_weights=fit_weights, weights=weights, log_prior=log_prior, mixing_coef=coef)


class TypesPath:
    """The fit with latent types of a :class:`genpqr.GenPQR` (``estimator``: read, never written):
    EM over episodes (module docstring), then one one-type fit per type."""

    def __init__(self, estimator):
        self.est = estimator

    def fit(self, data, first_stage=None) -> FittedState:
        est = self.est
        _check_parameters(est, data)
        opts = options(est.types, TypeOptions, "types")
        labels, codes = episode_codes(data.episode_ids)
        names = data.episode_names(labels) if hasattr(data, "episode_names") else labels  # the user's ids
        learner, choice, n_states = _stage1_learner(est, data)
        z = _covariates(est, data, labels, codes)
        seed = seed_from(est.random_state)
        rng = np.random.default_rng(seed)
        starts = int(opts.n_starts)
        runs = [_run_em(est, learner, data, data.weights, codes,
                        _initial_weights(data, codes, labels.size, int(est.n_types), start, rng), z, n_states, seed,
                        desc="latent types EM" + (f" (start {start + 1}/{starts})" if starts > 1 else ""))
                for start in range(starts)]
        best = _reordered(max(runs, key=lambda r: r.loglik), z)
        n_params = _parameter_count(best, data, z)
        aic, bic = information_criteria(float(best.loglik), n_params, labels.size)
        prior = np.broadcast_to(np.exp(best.log_prior), best.weights.shape)
        types = TypesState(
            type_models=_type_models(est, data, best.fit_weights, learner, choice, n_states), type_episodes=names,
            type_weights=best.weights, type_proportions=prior.mean(axis=0), type_mixing_coef=best.mixing_coef,
            loglik=float(best.loglik), n_em_iter=best.n_iter, em_converged=best.converged, n_params=n_params,
            aic=aic, bic=bic, type_separation=separation_share(best.weights, best.log_prior),
            em_start_logliks=[float(r.loglik) for r in runs])
        _warn_types(types, best.log_prior, opts)
        return FittedState(gamma=check_gamma(est.gamma), action_space=data.encoder, state_dim=data.state_dim,
                           first_stage=choice if first_stage is None else first_stage, training_data=data,
                           data_fingerprint=data.fingerprint(), types=types)


def _linear_coef(model):
    """``(coef_, has_intercept, n_classes)`` of a linear classifier (also a Pipeline's or a
    :class:`~genpqr.stage1.SplineLogit`'s last step), or None."""
    for obj in (model, getattr(model, "pipeline_", None)):
        if obj is None:
            continue
        last = obj.steps[-1][1] if hasattr(obj, "steps") else obj
        coef = getattr(last, "coef_", None)
        if coef is not None and hasattr(last, "classes_"):
            intercept = np.any(np.asarray(getattr(last, "intercept_", 0.0)) != 0)
            return np.atleast_2d(coef), bool(intercept), len(last.classes_)
    return None


def ccp_parameter_count(policy, data) -> int | None:
    """Free parameters of one fitted stage 1 (``genpqr.stage1._policy.FittedPolicy``, one model):
    cell frequencies (:class:`~genpqr.stage1.FrequencyClassifier`): ``sum_s (K_s - 1)`` over the
    states with data, ``K_s`` the actions observed there (the interior of the cell MLE); a linear
    (multinomial) logit: ``(K - 1)(d + 1)`` (``d`` coefficients per class, an intercept; ``d + 1``
    for two classes), counted whatever its penalty; any other learner: None (not countable)."""
    from ..stage1 import FrequencyClassifier

    model = policy.models[0]
    if isinstance(model, FrequencyClassifier):
        keep = data.weights > 0
        s = data.states[keep, 0].astype(np.int64)
        pairs = np.unique(s * data.n_actions + data.actions[keep])
        per_state = np.bincount(pairs // data.n_actions)
        return int(np.sum(np.maximum(per_state[per_state > 0] - 1, 0)))
    found = _linear_coef(model)
    if found is None:
        return None
    coef, intercept, n_classes = found
    width = coef.shape[1] + int(intercept)
    return int(width if n_classes == 2 else (n_classes - 1) * width)


def _transition_parameter_count(data) -> int:
    """Free parameters of one estimated kernel: ``sum_(s,a) (outcomes(s, a) - 1)`` over visited
    pairs, an outcome being a next state or termination."""
    trans = data.with_next()
    keep = trans.weights > 0
    pair = trans.states[keep, 0].astype(np.int64) * data.n_actions + trans.actions[keep]
    outcome = np.where(trans.terminated[keep], -1, trans.next_states[keep, 0].astype(np.int64))
    distinct = np.unique(np.column_stack([pair, outcome]), axis=0)
    return int(distinct.shape[0] - np.unique(distinct[:, 0]).size)


def _parameter_count(fit: TypeFit, data, z) -> int | None:
    counts = [ccp_parameter_count(p, data) for p in fit.policies]
    if any(c is None for c in counts):
        return None
    total = sum(counts) + (len(counts) - 1) * (1 + (0 if z is None else z.shape[1]))
    if fit.kernels is not None:
        total += len(counts) * _transition_parameter_count(data)
    return int(total)


def information_criteria(loglik: float, n_params, n_episodes: int) -> tuple[float, float]:
    """``(AIC, BIC) = (2 k - 2 log L, k log(n_episodes) - 2 log L)``; NaN when ``k`` is None.
    BIC counts episodes (the independent units of the mixture), not rows."""
    if n_params is None:
        return float("nan"), float("nan")
    return 2.0 * n_params - 2.0 * loglik, n_params * float(np.log(n_episodes)) - 2.0 * loglik


#: What a nonparametric mixture's warnings say is in doubt.
REWARDS_IN_DOUBT = ("the per-episode type probabilities (type_weights_; genpqr fit: types.csv) and the per-type "
                    "rewards (type_models_; rewards.csv)")


def type_warnings(type_weights, log_prior) -> list[str]:
    """What is in doubt about a nonparametric mixture fit, as messages: the shared rule
    ``genpqr.stage1._latent_types.latent_type_warnings`` (an empty type; posteriors that moved less than
    ``genpqr.stage1._latent_types.SEPARATION_WARN`` of the way from the mixing proportions to certain
    types) worded for the per-type rewards."""
    return latent_type_warnings(type_weights, log_prior, REWARDS_IN_DOUBT)


def _warn_types(types: TypesState, log_prior, opts):
    messages = type_warnings(types.type_weights, log_prior)
    if not types.em_converged:
        messages.append(f"EM stopped after max_iter={opts.max_iter} iterations (TypeOptions) without reaching "
                        f"tol={opts.tol:g}: loglik_, type_weights_ and the per-type rewards are not at a fixed point; "
                        f"raise TypeOptions(max_iter=...)")
    for message in messages:
        warnings.warn(message, LatentTypeWarning, stacklevel=4)


def type_criteria(model, data) -> dict:
    """``loglik``, ``n_params``, ``aic``, ``bic`` of a fitted GenPQR on its data, with or without
    latent types, on one scale for choosing ``n_types``: with one type the choice log likelihood
    ``sum_i w_i log pi_hat(a_i|s_i)`` and the stage-1 parameters (``ccp_parameter_count``);
    with types the fitted ``loglik_``, ``n_params_``, ``aic_``, ``bic_``. (With
    ``specific_transitions`` the mixture's likelihood also holds the transitions: compare
    it with a one-type fit's choice and transition likelihood.)"""
    if hasattr(model, "type_models_"):
        return dict(loglik=model.loglik_, n_params=model.n_params_, aic=model.aic_, bic=model.bic_)
    ell = type_loglik_terms([model.policy_], data)[:, 0]
    loglik = float(np.sum(data.weights * ell))
    k = ccp_parameter_count(model.policy_, data)
    aic, bic = information_criteria(loglik, k, np.unique(data.episode_ids).size)
    return dict(loglik=loglik, n_params=k, aic=aic, bic=bic)
