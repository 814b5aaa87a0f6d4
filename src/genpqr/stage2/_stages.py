r"""The fitted stage-2 objects of :class:`genpqr.GenPQR` (finite actions): ``q``, ``mu``, ``g``
and ``u`` at any states.

``ExactStage2`` holds tables on a finite state space (the exact tabular solve);
``SampleStage2`` holds a fitted Q-evaluation (FQE or a closed-form solve) with callables
for ``mu``, ``g`` and ``u``. ``ReferenceWeights`` is ``mu(.|s)`` of a bound normalization
at any states (the fitted policy for ``mu = pi``).
"""

from __future__ import annotations

from ..data._validation import check_state_indices

__all__ = ["ExactStage2", "SampleStage2", "ReferenceWeights"]


class ExactStage2:
    """Tables on a finite state space (states are indices)."""

    def __init__(self, recovery, kernel, counts):
        self.recovery, self.kernel, self.counts = recovery, kernel, counts
        self.n_states = recovery.log_policy.shape[0]

    def _idx(self, states):
        return check_state_indices(states, self.n_states)

    def index(self, states):
        """State indices (checked against the table)."""
        return self._idx(states)

    def q(self, states):
        return self.recovery.q[self._idx(states)]

    def mu(self, states, proba=None):
        return self.recovery.mu[self._idx(states)]

    def g(self, states):
        return self.recovery.g[self._idx(states)]

    def u(self, states):
        return self.recovery.log_policy[self._idx(states)]


class ReferenceWeights:
    """``mu(.|s)`` of a bound normalization at any states (the fitted policy for ``mu = pi``)."""

    def __init__(self, normalization, policy, n_actions):
        self.normalization, self.policy, self.n_actions = normalization, policy, n_actions

    def __call__(self, states, proba=None):
        if proba is None and self.normalization.mu.needs_policy:
            proba = self.policy.proba(states)
        return self.normalization.weights(states, self.n_actions, proba)


class SampleStage2:
    """FQE's fitted Q with callables for mu, g and u (an FQE that regressed the continuation
    ``f = P mu Q`` is given ``base = u - g`` at the states asked)."""

    def __init__(self, fqe, normalization, policy, g_fn, n_actions: int):
        self.fqe, self.normalization, self.policy, self.g_fn, self.n_actions = fqe, normalization, policy, g_fn, n_actions

    def q(self, states):
        if not getattr(self.fqe, "continuation_", False):
            return self.fqe.predict_q(states)
        return self.fqe.predict_q(states, base=self.u(states) - self.g(states)[:, None])

    def mu(self, states, proba=None):
        return ReferenceWeights(self.normalization, self.policy, self.n_actions)(states, proba)

    def g(self, states):
        return self.g_fn(states)

    def u(self, states):
        return self.policy.log_policy(states)
