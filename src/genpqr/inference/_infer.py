r"""The debiased (one-step) estimator with influence-function inference.

For targets ``psi`` (``_targets``) and rows ``O_i = (S_i, A_i, S'_i)``:

1. split the *episodes* into ``cross_fit`` folds;
2. on the other folds refit the GenPQR template (its data-driven choices held at the
   full-sample fit's) and read the nuisances ``eta_k``: ``pi_hat``, the kernel, the state law
   and the normalization;
3. on the held-out rows compute ``phi_i = psi(eta_k) + chi(O_i; eta_k)``: the plug-in plus the
   efficient influence function at the fold's nuisances (the Riesz representers exact on the
   tabular path);
4. ``psi_hat = mean_i phi_i`` (paper eq. 11; notes Sec. 6), ``chi_i = phi_i - psi_hat`` and
   ``Var = sum_e (sum_{i in e} chi_i)^2 / n^2`` over episodes ``e`` (the trajectory version of
   ``Var chi / n``), a Wald interval;
5. the split of ``chi_i`` by input (``InferenceResult.se_by_input``): the first stage's term
   (the reward representer centred under ``pi_hat``) and the kernel's (the Bellman equations'
   representers times their TD residuals), each centred at its mean, and the state law's, the rest
   (``g_rho(S_i)`` centred, plus under cross-fitting the spread of the folds' plug-ins, of second
   order). A given kernel (``transition_model`` a kernel, not estimated from the moves) has no
   kernel term: the target then moves only with the state law and the first stage.

The plug-in reported beside it is ``psi`` at the full-sample fit.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..data._progress import bar_width
from ..exceptions import InferenceWarning
from ..stage1._latent_types import episode_codes
from . import _algebra as alg
from ._nuisances import (STATE_PRIOR, Rows, check_inputs, context_of, fit_quietly, fitted_on, fold_template, is_exact,
                         kernel_is_given, tabular_law)
from ._result import INPUTS, InferenceResult
from ._sieve import SieveFold
from ._targets import Target, reward_projection

__all__ = ["infer", "plug_in", "projection_inference", "AUTO_FOLDS", "WEIGHT_WARN", "ESS_WARN", "EPISODE_WARN",
           "CORRECTION_WARN", "SPECIFICATION_WARN"]

#: Episode folds of ``cross_fit="auto"`` when the first stage is flexible.
AUTO_FOLDS = 5
#: Warn when the Riesz weights of the reward rest on fewer effective rows than this ...
ESS_WARN = 100
#: ... or a single row carries more than this share of their second moment (thin overlap) ...
WEIGHT_WARN = 0.1
#: ... or one episode carries more than this share of the variance (with at least 20 episodes) ...
EPISODE_WARN = 0.25
#: ... or the correction exceeds this many standard errors; an efficient projection warns when its
#: overidentification test rejects the linear form at this level.
CORRECTION_WARN = 10.0
SPECIFICATION_WARN = 0.01


def infer(model, target, data, *, riesz=None, cross_fit="auto", level: float = 0.95, random_state=None,
          progress: bool | None = None, warn: bool = True) -> InferenceResult:
    r"""Debiased estimates of ``target`` with efficient-influence-function standard errors.

    Parameters
    ----------
    model : GenPQR
        The template (fitted or not): its policy model, Q model, normalization, transition
        model and discount define the nuisances. When it was fitted on ``data`` it is the
        full-sample fit (the plug-in); otherwise a copy is fitted on ``data``.
    target : Target or list of Target
        :func:`policy_value`, :func:`softmax_value`, :func:`value_difference`,
        :func:`reward_mean`, :func:`reward_at`, :func:`reward_projection` (or their
        differences ``a - b``). Several targets: one result with their joint covariance.
    data : Transitions
        The rows; finite actions, unweighted.
    riesz : None, "exact", "cells", a feature-map name or a transformer
        How the Riesz representers are learned. Tabular states (``q_model="exact"``):
        ``None``/``"exact"``, the closed forms divided by the fold's estimated law
        ``rho_hat pi_hat``; ``"cells"``, by the fold's (smoothed) cell frequencies (the saturated
        Riesz regression); a transformer of the state index, the closed forms' Riesz regression on
        its features (large state spaces, e.g. a grid: map the index to coordinates, then splines).
        Other states: the state feature map of the linear-sieve Riesz regression (``_sieve``): any
        scikit-learn transformer, or ``"spline"`` / ``"rff"`` (``genpqr.stage2._features.make_features``);
        default (None): each coordinate to [0, 1] by its quantiles, then cubic B-splines. Not ``"policy"``
        (the first stage's own layer: its errors become the representer's; docs/inference.md).
    cross_fit : "auto", int or None
        Episode folds of the nuisances; None: the full-sample nuisances (no splitting, no refit:
        the delta method of the fitted model; valid when the first stage and the kernel are of low
        complexity). ``"auto"`` (default): None on the exact tabular path when the first stage is
        the tabular rule's (cell frequencies or the spline logit; ``genpqr.stage1._first_stage.choose_tabular_policy``)
        or a :class:`~genpqr.stage1.FrequencyClassifier` (there, splitting only thins the cells: a
        held-out row on a state its fold rarely saw gets an extreme weight), else
        ``AUTO_FOLDS`` folds (a flexible first stage: a network, boosting, a smoother).
    level : float
        Level of the intervals (``result.conf_int(level)`` gives others).
    random_state : int, Generator or None
        The folds.
    progress : bool or None
        A progress bar over folds (None: only on a terminal).
    warn : bool
        Raise :class:`~genpqr.exceptions.InferenceWarning` when a diagnostic is large.

    Returns
    -------
    InferenceResult
    """
    start = time.perf_counter()
    check_inputs(model, data)
    targets = _targets(target)
    _check_args(cross_fit, level)
    exact = is_exact(model)
    riesz = _check_riesz(riesz, exact)
    bound = [t.bind(context_of(model, data)) for t in targets]
    full = fitted_on(model, data)
    cross_fit = resolve_cross_fit(cross_fit, full)
    rows = Rows.of(data, tabular=exact)
    step = _TabularStep(riesz, kernel_is_given(full)) if exact else _SieveStep(riesz)
    with alg.shared_resolvents():  # one factorization per kernel, policy and discount across the folds
        plug = step.plug_in(full, bound, rows)
        run = _cross_fit(full, bound, data, rows, cross_fit, random_state, progress, step)
    names = [c for t in bound for c in t.components()]
    described = [t.describe() for t in bound for _ in t.components()]
    owner = np.repeat(np.arange(len(bound)), [len(t.components()) for t in bound])
    return _result(run, names, described, plug, data, rows, cross_fit, level, warn, start, owner)


def _check_args(cross_fit, level) -> None:
    if not (cross_fit is None or (isinstance(cross_fit, str) and cross_fit == "auto") or
            (not isinstance(cross_fit, str) and int(cross_fit) == cross_fit and cross_fit >= 2)):
        raise ValueError(f"cross_fit must be 'auto', an integer >= 2 (episode folds) or None, got {cross_fit!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def resolve_cross_fit(cross_fit, full):
    """``cross_fit="auto"`` (see :func:`infer`) for the full-sample fit ``full``."""
    if not (isinstance(cross_fit, str) and cross_fit == "auto"):
        return cross_fit
    from ..stage1 import FrequencyClassifier

    tabular_rule = getattr(getattr(full, "first_stage_", None), "name", "") in ("spline", "frequency")
    low = is_exact(full) and not full.policy_prefit and (tabular_rule or isinstance(full.policy_model,
                                                                                     FrequencyClassifier))
    return None if low else AUTO_FOLDS


def plug_in(model, target) -> np.ndarray:
    """The plug-in value of ``target`` (a target or a list) at a fitted exact-path GenPQR: the
    target at the model's own first stage, kernel and normalization, the state law of its
    training rows (e.g. the statistic of an episode bootstrap, :func:`genpqr.evaluation.bootstrap`)."""
    targets = _targets(target)
    if not hasattr(model, "stage2_") or not hasattr(model, "training_data_"):
        raise ValueError("plug_in needs a fitted GenPQR with its training data")
    exact = is_exact(model)
    bound = [t.bind(context_of(model, model.training_data_)) for t in targets]
    rows = Rows.of(model.training_data_, tabular=exact)
    step = _TabularStep("exact") if exact else _SieveStep(_check_riesz(None, False))
    with alg.shared_resolvents():  # a bootstrap's replicates: the fixed policies' factorizations kept by content
        return step.plug_in(model, bound, rows)


def projection_inference(model, features, *, names=None, offset=None, data=None, cross_fit: int | None = None,
                         level: float = 0.95, warn: bool = True) -> InferenceResult:
    r"""Influence-function inference for the least-squares projection of the normalized reward on
    ``features`` (S, K, p) under the rows' (state, action) law (:func:`reward_projection`): what
    the structural ``projection`` estimator reports as its standard errors
    (:func:`genpqr.structural.fit_structural`). The projection is a functional of the data's
    law whatever the reward's form, so these standard errors assume no linear form.

    ``model``: a GenPQR on the exact path, fitted on ``data`` (default: its training data).
    ``cross_fit=None`` (default): the full-sample nuisances (no refits, the delta method of the
    fitted first stage and kernel); an int: the cross-fitted one-step estimate as :func:`infer`.
    """
    if data is None:
        if not hasattr(model, "training_data_"):
            raise ValueError("projection_inference needs the rows: pass data=, or a model saved with its data")
        data = model.training_data_
    return infer(model, reward_projection(features, names=names, offset=offset), data, cross_fit=cross_fit,
                 level=level, warn=warn)


def _targets(target) -> list:
    items = [target] if isinstance(target, Target) else list(target) if isinstance(target, (list, tuple)) else None
    if not items or not all(isinstance(t, Target) for t in items):
        raise TypeError(f"target must be a genpqr.inference target (policy_value, softmax_value, value_difference, "
                        f"reward_mean, reward_at, reward_projection) or a list of them, got {type(target).__name__}")
    names = [c for t in items for c in t.components()]
    if len(set(names)) != len(names):
        raise ValueError(f"the targets' components must have distinct names (pass name=...), got {names}")
    return items


def _check_riesz(riesz, exact: bool):
    from ..stage2._features import make_features

    if exact:
        if riesz is None:
            return "exact"
        if isinstance(riesz, str) and riesz in ("exact", "cells"):
            return riesz
        if isinstance(riesz, str) or not (hasattr(riesz, "fit") and hasattr(riesz, "transform")):
            raise ValueError(f"riesz must be None, 'exact', 'cells' or a feature map (a transformer of the state "
                             f"index) on the exact tabular path, got {riesz!r}")
        return riesz

    if riesz is None:
        return None
    if isinstance(riesz, str) and riesz in ("exact", "cells"):
        raise ValueError(f"riesz={riesz!r} needs tabular states (q_model='exact'); on continuous states give a "
                         f"feature map (a transformer, or 'spline', 'rff')")
    make_features(riesz)  # a name it knows or a transformer: its error names what is expected
    return riesz


class _Run:
    """What the folds produced: ``phi`` (n, m), its first-stage and kernel terms (n, m), fold ids,
    the fold table, the reward weights."""

    def __init__(self, n, m):
        self.phi = np.full((n, m), np.nan)
        self.policy = np.full((n, m), np.nan)
        self.kernel = np.full((n, m), np.nan)
        self.alpha = np.full((n, m), np.nan)
        self.fold = np.zeros(n, dtype=np.int64)
        self.records = []
        self.fold_values, self.fold_rows = [], []


class _TabularStep:
    """One fold on the exact tabular path: the law of the fold's fit, the exact pieces."""

    def __init__(self, riesz, kernel_given: bool = False):
        self.cells = isinstance(riesz, str) and riesz == "cells"
        self.features = None if isinstance(riesz, str) else riesz
        self.kernel_given = kernel_given
        how = ("Riesz regression on a sieve of state features" if self.features is not None else
               "closed-form Riesz representers over the cell frequencies" if self.cells else
               "closed-form Riesz representers over the fold's state law and policy")
        given = "; the kernel given (no kernel term)" if kernel_given else ""
        self.route = f"exact tabular ({how}){given}"

    def plug_in(self, full, bound, rows):
        law = replace(tabular_law(full, rows, 0.0), kernel_given=self.kernel_given)
        self.kernel = law.kernel
        return alg.Pieces.stack([t.pieces(law) for t in bound]).value

    def __call__(self, fitted, bound, train_rows, held, prior, all_states=None):
        law = replace(tabular_law(fitted, train_rows, prior, self.cells, self.features, states=all_states),
                      kernel_given=self.kernel_given)
        if self.kernel_given and same_kernel(law.kernel, getattr(self, "kernel", None)):
            law = replace(law, kernel=self.kernel)  # the same object: its factorizations are shared
        parts = [t.pieces(law) for t in bound]
        pieces = alg.Pieces.stack(parts)
        reps = alg.representers(pieces, law)  # once: a Riesz regression per measure on a sieve
        state, policy, kernel = alg.influence_terms(pieces, law, held.s, held.a, held.s_next, held.cont,
                                                    held.has_next, reps=reps)
        if self.kernel_given:  # a known kernel is no input of the data: the target does not move with it
            kernel = np.zeros_like(kernel)
        alpha = reps[0]
        return (pieces.value, pieces.value[None] + state + policy + kernel, alpha[:, held.s, held.a].T, policy, kernel,
                [_contrasts(p.extras.get("min_distance"), law, held, self.kernel_given) for p in parts])


def same_kernel(a, b) -> bool:
    """Whether two ``TransitionKernel`` hold the same matrix (a given kernel, refitted per fold)."""
    import scipy.sparse as sp

    if a is b:
        return True
    if b is None or a.matrix.shape != b.matrix.shape or sp.issparse(a.matrix) != sp.issparse(b.matrix):
        return False
    if a.matrix is b.matrix:
        return True
    if sp.issparse(a.matrix):
        return (a.matrix != b.matrix).nnz == 0
    return bool(np.array_equal(a.matrix, b.matrix))


class _SieveStep:
    """One fold on non-tabular states: the fold model's nuisances, sieve Riesz representers."""

    def __init__(self, features):
        self.features = features
        name = ("quantile-spline" if features is None else features if isinstance(features, str)
                else type(features).__name__)
        self.route = (f"linear-sieve Riesz regression on {name} state features x actions (dual LSTD); "
                      f"the fold model's first stage and normalized reward")

    def plug_in(self, full, bound, rows):
        fold = SieveFold(full, rows, self.features)
        return np.concatenate([t.sieve(fold, None).value for t in bound])

    def __call__(self, fitted, bound, train_rows, held, prior, all_states=None):
        fold = SieveFold(fitted, train_rows, self.features)
        parts = [t.sieve(fold, held) for t in bound]
        return (np.concatenate([p.value for p in parts]), np.hstack([p.phi for p in parts]),
                np.hstack([p.alpha for p in parts]), np.hstack([p.policy for p in parts]),
                np.hstack([p.kernel for p in parts]), [None] * len(parts))


def _contrasts(md, law, held, kernel_given=False):
    """For an efficient projection (``md``: ``_algebra.MinimumDistance``): the held-out rows' sum of
    the one-step estimates of the reward's contrasts, their count and ``n V_z`` (the pieces of ``J``)."""
    if md is None:
        return None
    state, policy, kernel = alg.influence_terms(md.cells, law, held.s, held.a, held.s_next, held.cont, held.has_next)
    chi = state + policy + (0.0 if kernel_given else kernel)
    z = (md.cells.value[None] + chi) @ md.basis
    n = z.shape[0]
    return dict(sum=z.sum(axis=0) - n * md.shift, n=n, cov=n * md.cov, design=md.design)


def _cross_fit(full, bound, data, rows, cross_fit, random_state, progress, step) -> _Run:
    n = data.n
    folds = [(np.arange(n), np.arange(n))] if cross_fit is None else data.episode_folds(int(cross_fit), random_state)
    template = None if cross_fit is None else fold_template(full)
    m = sum(len(t.components()) for t in bound)
    run = _Run(n, m)
    run.route = step.route
    run.distance = [None] * len(bound)
    # no refit (the full-sample nuisances): nothing to wait for, no bar
    disable = True if template is None else None if progress is None else not progress
    for k, (train, test) in enumerate(tqdm(folds, desc="inference folds", disable=disable, ncols=bar_width())):
        fitted = full if template is None else fit_quietly(template, data.subset(train))
        value, phi, alpha, policy, kernel, distance = step(fitted, bound, rows.take(train), rows.take(test),
                                                           0.0 if template is None else STATE_PRIOR,
                                                           rows.s if np.ndim(rows.s) == 1 else None)
        run.phi[test], run.alpha[test], run.fold[test] = phi, alpha, k
        run.policy[test], run.kernel[test] = policy, kernel
        run.fold_values.append(np.asarray(value, dtype=np.float64))
        run.fold_rows.append(int(test.size))
        for t, part in enumerate(distance):
            if part is not None:
                run.distance[t] = part if run.distance[t] is None else {
                    key: part[key] if key == "design" else run.distance[t][key] + part[key] for key in part}
        for j in range(m):
            run.records.append(dict(fold=k, component=j, n_rows=int(test.size), plug_in=float(value[j]),
                                    correction=float(phi[:, j].mean() - value[j]), estimate=float(phi[:, j].mean())))
    if template is not None and any(d is not None for d in run.distance):
        # J at the full-sample nuisances: the folds thin the cells, and a test of every contrast
        # (the thin cells' included) is not reliable at the fold's (docs/inference.md)
        run.distance = step(full, bound, rows, rows, 0.0, None)[5]
    return run


def clustered_cov(influence, episodes, codes=None) -> np.ndarray:
    """``sum_e c_e c_e^T / n^2`` with ``c_e`` the influence summed over episode ``e`` (``codes``:
    the rows' episodes coded ``0..E-1``, ``episode_codes`` of ``genpqr.stage1._latent_types``, when already known)."""
    sums = episode_sums(influence, episode_codes(episodes)[1] if codes is None else codes)
    n = influence.shape[0]
    return sums.T @ sums / n ** 2, sums


def episode_sums(values, codes) -> np.ndarray:
    """``values`` (n, ...) summed within episodes (``codes`` 0..E-1): (E, ...)."""
    flat = values.reshape(values.shape[0], -1)
    E = int(codes.max()) + 1
    sums = np.column_stack([np.bincount(codes, weights=flat[:, c], minlength=E) for c in range(flat.shape[1])])
    return sums.reshape((E,) + values.shape[1:])


def split_by_input(infl, policy, kernel, episodes, codes=None):
    """The influence's terms by input (n, m, 3) in :data:`INPUTS`' order (first stage, kernel, state
    law; they add up to ``infl``) and their episode-clustered covariance per component (m, 3, 3):
    the entries of each 3 x 3 block add up to the component's variance."""
    first = policy - policy.mean(axis=0)
    bellman = kernel - kernel.mean(axis=0)
    terms = np.stack([first, bellman, infl - first - bellman], axis=2)
    n = terms.shape[0]
    sums = episode_sums(terms, episode_codes(episodes)[1] if codes is None else codes)
    return terms, np.einsum("ejt,eju->jtu", sums, sums) / n ** 2


def _result(run, names, described, plug, data, rows, cross_fit, level, warn, start, owner=None) -> InferenceResult:
    estimate = run.phi.mean(axis=0)
    infl = run.phi - estimate
    codes = episode_codes(rows.episodes)[1]
    n_episodes = int(codes.max()) + 1
    cov, sums = clustered_cov(infl, rows.episodes, codes)
    se = np.sqrt(np.diag(cov))
    terms, cov_inputs = split_by_input(infl, run.policy, run.kernel, rows.episodes, codes)
    folds = pd.DataFrame({key: [r[key] if key != "component" else names[r[key]] for r in run.records]
                          for key in ("fold", "component", "n_rows", "plug_in", "correction", "estimate")})
    fold_plug = np.average(np.vstack(run.fold_values), axis=0, weights=run.fold_rows)  # by rows
    diag = _diagnostics(names, estimate, fold_plug, se, run.alpha, sums)
    if any(d is not None for d in getattr(run, "distance", [])):
        diag = diag.join(_specification(run.distance, owner, diag.index))
    messages = _warnings(diag, described, n_episodes, cov_inputs)
    if warn:
        for message in messages:
            warnings.warn(message, InferenceWarning, stacklevel=3)
    return InferenceResult(names, described, estimate, se, cov, np.asarray(plug, dtype=np.float64), float(level),
                           int(data.n), n_episodes, None if cross_fit is None else int(cross_fit), run.route,
                           folds, diag, infl, rows.episodes, messages, time.perf_counter() - start,
                           influence_by_input=terms, cov_by_input=cov_inputs)


def _diagnostics(names, estimate, fold_plug, se, alpha, sums) -> pd.DataFrame:
    a = np.abs(alpha)
    mean = np.maximum(a.mean(axis=0), 1e-300)
    second = np.maximum((a ** 2).sum(axis=0), 1e-300)
    share = (sums ** 2).max(axis=0) / np.maximum((sums ** 2).sum(axis=0), 1e-300)
    return pd.DataFrame({
        "correction_to_se": np.abs(estimate - fold_plug) / se,
        "weight_max": a.max(axis=0) / mean,
        "weight_q99": np.quantile(a, 0.99, axis=0) / mean,
        "effective_rows": a.sum(axis=0) ** 2 / second,
        "top_row_share": (a ** 2).max(axis=0) / second,
        "top_episode_share": share,
    }, index=pd.Index(names, name="component"))


def _specification(distance, owner, index) -> pd.DataFrame:
    r"""The overidentification test of each efficient projection: ``J = n min_theta (z - Phi theta)^T
    V_z^+ (z - Phi theta)`` at the one-step estimates ``z`` of the reward's contrasts at the
    full-sample nuisances (also when the estimate is cross-fitted), chi-square with ``rank V_z - p``
    degrees of freedom when the linear form holds (``_algebra.distance_statistic``); NaN for other
    components."""
    from scipy.stats import chi2

    out = pd.DataFrame({"J": np.nan, "J_dof": np.nan, "J_p_value": np.nan}, index=index)
    for t, part in enumerate(distance):
        if part is None:
            continue
        n = part["n"]
        J, dof = alg.distance_statistic(part["sum"] / n, part["cov"] / n, part["design"], n)
        rows = np.flatnonzero(owner == t)
        out.iloc[rows] = [J, dof, float(chi2.sf(J, dof)) if dof > 0 else np.nan]
    return out


def _warnings(diag: pd.DataFrame, described, n_episodes: int, cov_inputs=None) -> list:
    out = []
    columns = {c: diag[c].to_numpy() for c in ("effective_rows", "top_row_share", "weight_max", "top_episode_share",
                                               "correction_to_se")}
    for j, (name, what) in enumerate(zip(diag.index, described)):
        row = SimpleNamespace(**{c: v[j] for c, v in columns.items()})
        why = []
        if row.effective_rows < ESS_WARN or row.top_row_share > WEIGHT_WARN:
            why.append(f"the Riesz weights rest on few rows (effective {row.effective_rows:.0f} rows; one row holds "
                       f"{row.top_row_share:.0%} of their square, the largest is {row.weight_max:.0f}x their mean): thin "
                       f"overlap between the target and the behaviour")
        if n_episodes >= 20 and row.top_episode_share > EPISODE_WARN:
            why.append(f"one episode carries {row.top_episode_share:.0%} of the variance")
        if row.correction_to_se > CORRECTION_WARN:
            why.append(f"the correction is {row.correction_to_se:.1f} standard errors: the first stage is far from "
                       f"the truth and the second-order remainder may not be small")
        if why:
            source = "" if cov_inputs is None else _dominant(cov_inputs[j])
            out.append(f"{name} ({what}): the interval may not be reliable: " + "; ".join(why) + source)
    if "J" in diag:
        tested = diag.dropna(subset=["J_p_value"])
        for J, f in tested.groupby("J", sort=False):
            row = f.iloc[0]
            if row.J_p_value < SPECIFICATION_WARN:
                out.append(f"{', '.join(f.index)} (efficient projection): the data reject the linear form (J = {J:.1f} "
                           f"on {row.J_dof:.0f} degrees of freedom, p = {row.J_p_value:.2g}): the estimate is the "
                           f"covariance-weighted pseudo-true value, which depends on the weighting, and its SE omits "
                           f"the weights' estimation error; the data-weighted projection (weights=None) has a target "
                           f"that does not")
    return out


def _dominant(block) -> str:
    """``"; the first stage carries 71% of its variance"``: the input of the largest share, from a
    component's 3 x 3 covariance block by input."""
    total = float(np.sum(block))
    if not total > 0:
        return ""
    shares = np.diag(block) / total
    k = int(np.argmax(shares))
    return f"; the {INPUTS[k]} carries {shares[k]:.0%} of its variance"
