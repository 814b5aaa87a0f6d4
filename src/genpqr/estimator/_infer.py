"""``GenPQR.infer``: the estimator's door to :func:`genpqr.inference.infer` (a one-line
convenience, as ``GenPQR.counterfactual`` is to :mod:`genpqr.counterfactuals`)."""

from __future__ import annotations

__all__ = []  # reached as GenPQR.infer


def infer(self, target, data=None, *, riesz=None, cross_fit="auto", level: float = 0.95, random_state=None,
          progress=None, warn: bool = True):
    r"""Debiased estimates of what you ask of the recovered reward, with efficient-influence-function
    standard errors (:func:`genpqr.inference.infer`; docs/inference.md).

    Parameters
    ----------
    target : Target, list of Target, or str
        :func:`genpqr.inference.policy_value`, :func:`~genpqr.inference.softmax_value`,
        :func:`~genpqr.inference.value_difference`, :func:`~genpqr.inference.reward_mean`,
        :func:`~genpqr.inference.reward_at`, :func:`~genpqr.inference.reward_projection` (or
        their differences), or the text ``genpqr fit --infer`` takes
        (:func:`genpqr.inference.parse_target`: ``"value:uniform;gamma=0.8"``,
        ``"reward-at:3=b"``, ...; a projection needs its features: pass the Target).
    data : Transitions, optional
        The rows. Default: the data this model was fitted on (a model saved without its data
        needs them: ``save(path, include_data=True)``, or pass ``data``). An unfitted model with
        ``data`` is fitted on them first (as :func:`genpqr.inference.infer` does).
    riesz, cross_fit, level, random_state, progress, warn
        As :func:`genpqr.inference.infer` (``cross_fit="auto"``: no splitting for the tabular
        rule's low-complexity first stage, 5 episode folds otherwise).

    Returns
    -------
    InferenceResult
        ``params``, ``bse``, ``conf_int()``, ``cov_params()``, ``summary()``, ``to_frame()``; the
        plug-in (this fit's answer) beside the debiased estimate, and the diagnostics.
    """
    from ..inference import infer as infer_, parse_target
    from ._persistence import require_data

    if data is None:
        self._check_fitted()
        require_data(self, "infer(target) without data")
        data = self.training_data_
    if isinstance(target, str) or (isinstance(target, (list, tuple)) and any(isinstance(t, str) for t in target)):
        labels = data.encoder.labels if getattr(data, "is_finite", False) else None
        many = target if isinstance(target, (list, tuple)) else [target]
        target = [parse_target(t, labels=labels) if isinstance(t, str) else t for t in many]
    return infer_(self, target, data, riesz=riesz, cross_fit=cross_fit, level=level, random_state=random_state,
                  progress=progress, warn=warn)
