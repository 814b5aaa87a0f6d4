"""What users name in structural estimation: the ``increment:MAX[:RESET]`` transition model
(:data:`genpqr.registry.TRANSITION_MODELS`, beside :class:`~genpqr.structural.IncrementKernel`)
and the estimators of the flow utility's parameters (:data:`genpqr.registry.STRUCTURAL_ESTIMATORS`,
beside :func:`~genpqr.structural.estimate_structural`).
"""

from __future__ import annotations

from ..registry import GIVEN, ORDERED, STRUCTURAL_ESTIMATORS, TRANSITION_MODELS, TYPES, Argument

__all__: list = []


def _increment(text: str) -> tuple:
    """``MAX[:RESET]`` -> ``(MAX, RESET or None)``."""
    head, _, reset = text.partition(":")
    try:
        max_increment = int(head)
    except ValueError:
        max_increment = -1
    if max_increment < 0:
        raise ValueError("a non-negative integer MAX")
    return max_increment, reset or None


@TRANSITION_MODELS.register("increment", argument=Argument("MAX[:RESET]", _increment), capabilities=(GIVEN, ORDERED),
                            help="the state grows by 0..MAX with a state-independent distribution; under the RESET "
                                 "action it restarts at 0 and the period's increment is added from 0, Rust's timing: "
                                 "P(.|x, reset) = P(.|0, keep)")
def _increment_kernel(value, *, label, **context):
    from ._kernels import IncrementKernel

    max_increment, reset = value
    return IncrementKernel(max_increment, None if reset is None else label(reset, "reset action"))


STRUCTURAL_ESTIMATORS.add("npl", capabilities=(TYPES,), factory=lambda _, **c: "npl",
                          help="nested pseudo-likelihood iterated to convergence (the maximum likelihood estimator)")
STRUCTURAL_ESTIMATORS.add("nfxp", capabilities=(TYPES,), factory=lambda _, **c: "nfxp",
                          help="Rust's nested fixed point (the same estimate)")
STRUCTURAL_ESTIMATORS.add("pml", factory=lambda _, **c: "pml", help="Hotz-Miller two-step pseudo-likelihood")
STRUCTURAL_ESTIMATORS.add("projection", factory=lambda _, **c: "projection",
                          help="weighted least squares of the reward table on the features")
