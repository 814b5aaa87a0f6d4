r"""Finite mixtures of agent types over episodes: the E-step and the mixing step shared by every
estimator with latent types (Arcidiacono and Miller 2011, "Conditional Choice Probability
Estimation of Dynamic Discrete Choice Models With Unobserved Heterogeneity").

An episode ``e`` belongs to one of ``M`` types for all its rows. With ``ell[i, m]`` the log
likelihood of row ``i`` under type ``m`` (its choice, and its transition where transitions are
type-specific) and ``log_prior[e, m]`` the log mixing proportion of episode ``e``,

    log L_e = logsumexp_m ( log_prior[e, m] + sum_{i in e} ell[i, m] ),
    q[e, m] = exp( log_prior[e, m] + sum_{i in e} ell[i, m] - log L_e )      (posterior weights).

The mixing step sets ``prior[m] = mean_e q[e, m]``, or, with covariates ``z_e`` (e.g. the
initial state's), fits a multinomial logit of the posteriors on ``z_e`` (weighted maximum
likelihood, which is the EM update of its coefficients).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

__all__ = ["TypePosterior", "episode_codes", "type_posteriors", "mixing_log_prior", "type_row_weights",
           "separation_share", "SEPARATION_WARN", "latent_type_warnings"]


#: Warn when the posteriors moved less than this share of the way from the mixing proportions to
#: certain types (:func:`latent_type_warnings`).
SEPARATION_WARN = 0.25


@dataclass(frozen=True)
class TypePosterior:
    """The E-step's output.

    Attributes
    ----------
    weights : ndarray of shape (n_episodes, M)
        Posterior type probabilities per episode (rows sum to 1).
    episode_loglik : ndarray of shape (n_episodes,)
        ``log L_e``: each episode's mixture log likelihood.
    """

    weights: np.ndarray
    episode_loglik: np.ndarray

    @property
    def loglik(self) -> float:
        """The mixture log likelihood ``sum_e log L_e``."""
        return float(self.episode_loglik.sum())


def episode_codes(episode_ids) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, codes)``: the sorted distinct episode labels (n_episodes,) and each row's
    position in them (n,)."""
    labels, codes = np.unique(np.asarray(episode_ids), return_inverse=True)
    return labels, codes.reshape(-1)


def type_posteriors(row_loglik, episode_code, log_prior) -> TypePosterior:
    """The E-step.

    Parameters
    ----------
    row_loglik : array of shape (n, M)
        ``ell[i, m]``: row ``i``'s log likelihood under type ``m`` (finite; ``-inf`` is allowed
        for a row a type cannot produce as long as some type can).
    episode_code : int array of shape (n,)
        Each row's episode, coded ``0..n_episodes-1`` (:func:`episode_codes`).
    log_prior : array of shape (M,) or (n_episodes, M)
        Log mixing proportions, common or per episode.
    """
    ell = np.asarray(row_loglik, dtype=float)
    if ell.ndim != 2:
        raise ValueError(f"row_loglik must be 2-D (rows, types), got shape {ell.shape}")
    code = np.asarray(episode_code).reshape(-1)
    if code.shape[0] != ell.shape[0]:
        raise ValueError(f"episode_code has {code.shape[0]} rows but row_loglik has {ell.shape[0]}")
    n_episodes = int(code.max()) + 1 if code.size else 0
    per_episode = np.zeros((n_episodes, ell.shape[1]))
    np.add.at(per_episode, code, ell)
    joint = per_episode + np.broadcast_to(np.asarray(log_prior, dtype=float), per_episode.shape)
    episode_loglik = logsumexp(joint, axis=1)
    if not np.all(np.isfinite(episode_loglik)):
        bad = int(np.flatnonzero(~np.isfinite(episode_loglik))[0])
        raise ValueError(f"episode {bad} has zero likelihood under every type")
    weights = np.exp(joint - episode_loglik[:, None])
    return TypePosterior(weights=weights / weights.sum(axis=1, keepdims=True), episode_loglik=episode_loglik)


def mixing_log_prior(weights, covariates=None, *, floor: float = 1e-12) -> tuple[np.ndarray, np.ndarray | None]:
    """The M-step for the mixing proportions.

    Without covariates: ``prior = mean_e q[e]``, returned as log proportions of shape (M,) and
    coefficients ``None``. With ``covariates`` (n_episodes, d): a multinomial logit of the
    posteriors on ``[1, z_e]`` (unpenalized, weighted maximum likelihood), returned as per-episode
    log proportions (n_episodes, M) and its coefficients (M, d + 1) (type 0's row is zero).
    """
    q = np.asarray(weights, dtype=float)
    if covariates is None:
        return np.log(np.maximum(q.mean(axis=0), floor)), None
    z = np.asarray(covariates, dtype=float)
    if z.ndim == 1:
        z = z[:, None]
    if z.shape[0] != q.shape[0]:
        raise ValueError(f"covariates have {z.shape[0]} rows but there are {q.shape[0]} episodes")
    design = np.column_stack([np.ones(len(z)), z])
    coef = _weighted_multinomial_logit(design, q)
    scores = design @ coef.T
    return scores - logsumexp(scores, axis=1, keepdims=True), coef


def _weighted_multinomial_logit(design: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Coefficients (M, p) maximizing ``sum_e sum_m q[e, m] log softmax(design[e] @ coef.T)[m]``,
    type 0 the base (its row fixed at zero)."""
    from scipy.optimize import minimize

    n_types, p = q.shape[1], design.shape[1]

    def objective(flat):
        coef = np.vstack([np.zeros(p), flat.reshape(n_types - 1, p)])
        scores = design @ coef.T
        log_prob = scores - logsumexp(scores, axis=1, keepdims=True)
        grad = (q.sum(axis=1, keepdims=True) * np.exp(log_prob) - q).T @ design
        return -float(np.sum(q * log_prob)), grad[1:].ravel()

    result = minimize(objective, np.zeros((n_types - 1) * p), jac=True, method="BFGS",
                      options={"gtol": 1e-10, "maxiter": 500})
    return np.vstack([np.zeros(p), result.x.reshape(n_types - 1, p)])


def type_row_weights(weights, episode_code) -> np.ndarray:
    """Per-row weights (n, M): each row carries its episode's posterior type probabilities (the
    sample weights of a type's weighted stage 1 and stage 2)."""
    return np.asarray(weights, dtype=float)[np.asarray(episode_code).reshape(-1)]


def separation_share(weights, log_prior) -> float:
    """How far the posteriors moved from the prior: the mean over episodes of the total-variation
    distance ``0.5 * sum_m |q[e, m] - prior[e, m]|``. Near 0: the data do not separate the
    types (every episode's posterior is its prior); 1 - 1/M at most for a uniform prior."""
    q = np.asarray(weights, dtype=float)
    prior = np.broadcast_to(np.exp(np.asarray(log_prior, dtype=float)), q.shape)
    return float(0.5 * np.abs(q - prior).sum(axis=1).mean())


def latent_type_warnings(type_weights, log_prior, in_doubt: str) -> list[str]:
    """The one rule for a mixture fit's doubts (nonparametric and structural), as messages.

    * **empty type**: type ``m``'s posterior weights sum to less than one episode,
      ``sum_e q[e, m] < 1``;
    * **not separated**: ``separation_share(q, log_prior) / (1 - mean_e sum_m prior[e, m]^2)``
      below :data:`SEPARATION_WARN`.

    The scale: :func:`separation_share` (the mean total-variation distance of the posteriors from
    the prior) is 0 when the data say nothing about the types and, when every episode's type is
    certain and the prior calibrated, ``sum_m prior_m (1 - prior_m) = 1 - sum_m prior_m^2`` -- a
    ceiling that depends on ``M`` and the proportions (0.5 for two even types, 0.18 for 0.9/0.1).
    Divided by its ceiling the share is the fraction of the way from the prior to certain types
    (0 to 1) whatever ``M`` and the proportions, so one threshold means the same for every fit.
    0.25: a quarter of the way; below it most episodes' types are close to a coin flip at the
    mixing proportions, so type-specific outputs mostly average the types.

    Parameters
    ----------
    type_weights : array (n_episodes, M)
        Posterior type probabilities ``q``.
    log_prior : array (M,) or (n_episodes, M)
        Log mixing proportions, common or per episode.
    in_doubt : str
        The caller's outputs that are in doubt (e.g. ``"the per-type rewards"``); it fills the
        messages' ``so ... of type m rest on no episode`` and ``so ... are in doubt``.

    Returns
    -------
    list of str (empty: nothing in doubt).
    """
    q = np.asarray(type_weights, dtype=float)
    prior = np.broadcast_to(np.exp(np.asarray(log_prior, dtype=float)), q.shape)
    ceiling = float(np.mean(1.0 - np.sum(prior ** 2, axis=1)))
    separation = separation_share(q, log_prior)
    share = separation / ceiling if ceiling > 0 else 0.0
    expected = q.sum(axis=0)
    out = [f"latent type {m} is empty: its posterior weights sum to {expected[m]:.3g} episode(s), so {in_doubt} of "
           f"type {m} rest on no episode; fit fewer types" for m in np.flatnonzero(expected < 1.0)]
    if q.shape[1] > 1 and share < SEPARATION_WARN:
        out.append(f"the data barely separate the {q.shape[1]} latent types: the posteriors moved {share:.0%} of the "
                   f"way from the mixing proportions to certain types (separation share {separation:.3g}, below "
                   f"{SEPARATION_WARN:.0%} of the way), so {in_doubt} are in doubt; compare the BIC with fewer types")
    return out
