r"""When a counterfactual is identified: the shaping rule (module docstring of
:mod:`genpqr.counterfactuals`; Kalouptsidi, Scott & Souza-Rodrigues 2021).

A normalization ``mu r = g`` picks one reward among ``r + (I - gamma P_a) c``; a counterfactual
is invariant to that choice iff every shaping term of the fitted ``(P, gamma)`` is one of the new
``(P', gamma')`` (:func:`shaping_preserved`) and the reward change does not depend on the
reward level (``identification_rule``).
"""

from __future__ import annotations

import numpy as np

from ..stage2._kernels import as_kernel
from ..stage2._linear_bellman import solve_linear_bellman
from ..data._validation import check_gamma
from ..exceptions import GenPQRWarning

__all__ = ["IdentificationWarning", "shaping_preserved", "identification_rule"]


class IdentificationWarning(GenPQRWarning):
    """A counterfactual depends on the normalization: identified only if the normalization is
    true of the real reward."""


# ============================================================================ the rules
def shaping_preserved(kernel, gamma, new_kernel, new_gamma, *, n_probes: int = 3, rtol: float = 1e-7,
                      random_state=0) -> tuple[bool, float]:
    r"""Whether every shaping term of ``(kernel, gamma)`` is a shaping term of ``(new_kernel, new_gamma)``.

    The rewards that explain the behaviour are ``r + (I - gamma P_a) c`` for every ``c`` (S,).
    Under the new primitives they all have the same soft-optimal policy iff for every ``c`` some
    ``c'`` gives ``(I - gamma P_a) c = (I - gamma' P'_a) c'`` for every action ``a``, i.e. iff
    ``M_a = (I - gamma' P'_a)^{-1} (I - gamma P_a)`` is one matrix for all actions: then a
    counterfactual with these primitives is identified under every normalization. It is checked
    on ``n_probes`` Gaussian vectors ``c`` (equal products for random ``c`` imply equal matrices
    with probability one).

    Returns
    -------
    preserved : bool
        ``discrepancy <= rtol``.
    discrepancy : float
        ``max_a max |M_a C - M_0 C| / max |M_0 C|`` over the probe matrix ``C``.
    """
    kernel, new_kernel = as_kernel(kernel), as_kernel(new_kernel)
    S, K = kernel.n_states, kernel.n_actions
    if (new_kernel.n_states, new_kernel.n_actions) != (S, K):
        raise ValueError(f"new_kernel must have {S} states and {K} actions like kernel, got "
                         f"{new_kernel.n_states} and {new_kernel.n_actions}")
    gamma, new_gamma = check_gamma(gamma), check_gamma(new_gamma)
    C = np.random.default_rng(random_state).standard_normal((S, n_probes))
    images = []
    for a in range(K):
        P_a, new_P_a = kernel.matrix[a::K], new_kernel.matrix[a::K]
        B = C - gamma * np.asarray(P_a @ C)
        images.append(np.column_stack([solve_linear_bellman(new_P_a, B[:, j], new_gamma)[0]
                                       for j in range(n_probes)]))
    scale = max(float(np.max(np.abs(images[0]))), np.finfo(float).tiny)
    discrepancy = max(float(np.max(np.abs(m - images[0]))) for m in images) / scale
    return discrepancy <= rtol, discrepancy


def identification_rule(changes: tuple, reward_depends_on_level: bool,
                        shaping_preserved: bool | None = None) -> tuple[bool, str]:
    """Whether a counterfactual is invariant to the normalization, and why (module docstring).

    ``shaping_preserved``: the result of :func:`shaping_preserved` for a change of the
    transitions or discount (None when the kernels are not known, e.g. on the sample path:
    such a change is then taken to break the shaping term, as it generically does)."""
    if reward_depends_on_level:
        return False, ("the reward change depends on the level of the recovered reward, which the normalization "
                       "sets: identified only if the normalization is true of the real reward")
    if "transitions" in changes or "gamma" in changes:
        what = " and ".join(c for c in ("transitions", "gamma") if c in changes)
        if shaping_preserved:
            return True, (f"changes the {what}, but every shaping term of the fitted (P, gamma) is one of the new "
                          f"(P', gamma') ((I - gamma' P'_a)^-1 (I - gamma P_a) is the same for every action): "
                          f"the counterfactual policy is the same under every normalization")
        return False, (f"changes the {what}: identified only if the normalization is true of the real reward "
                       "(Kalouptsidi, Scott & Souza-Rodrigues 2021)")
    return True, ("a change of the flow reward by a known amount: the counterfactual policy is the same under "
                  "every normalization (shaping invariance)")
