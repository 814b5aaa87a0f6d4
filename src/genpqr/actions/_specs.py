"""What users name over a box of actions: the closed-form ``gaussian`` policy density
(:data:`genpqr.registry.DENSITIES`; the neural ones are declared in :mod:`genpqr.models`) and the
rules of the mu-integrals (:data:`genpqr.registry.INTEGRATION_RULES`: ``mc:N``,
``gauss-hermite:N``, ``gauss-legendre:N``), beside the classes they build.
"""

from __future__ import annotations

from ..registry import DENSITIES, INTEGRATION_RULES, Argument

__all__: list = []


@DENSITIES.register("gaussian", help="a heteroscedastic degree-2 linear Gaussian (closed form)")
def _linear_gaussian(_, *, space, **context):
    from ._densities import LinearGaussianDensity, SquashedDensity

    base = LinearGaussianDensity(degree=2, heteroscedastic=True)
    return SquashedDensity(base, space.low, space.high) if space.is_bounded else base


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError("a positive integer N")
    return n


def _rule(name: str):
    def build(n, **context):
        from . import _integration

        return getattr(_integration, name)(n)
    return build


INTEGRATION_RULES.add("mc", argument=Argument("N", _count), aliases=("monte-carlo", "montecarlo"),
                      factory=_rule("MonteCarlo"), help="Monte Carlo: N draws from mu per next state")
INTEGRATION_RULES.add("gauss-hermite", argument=Argument("N", _count), factory=_rule("GaussHermite"),
                      help="Gauss-Hermite quadrature of N nodes per dimension (a Gaussian mu)")
INTEGRATION_RULES.add("gauss-legendre", argument=Argument("N", _count), factory=_rule("GaussLegendre"),
                      help="Gauss-Legendre quadrature of N nodes per dimension (bounded actions)")
