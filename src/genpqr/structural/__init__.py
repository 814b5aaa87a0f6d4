"""Structural econometrics of dynamic discrete choice, built on the core.

:mod:`~genpqr.structural.ddc`
    Transition kernels of panels (increment kernels with a reset action), choice counts,
    the projection of a reward table on features, the Hotz-Miller step and NPL.
:mod:`~genpqr.structural.estimation`
    Structural estimation of flow-utility parameters (``estimate_structural``: NPL to
    convergence, NFXP, PML, projection), the full likelihood's score and Hessian, the MLE's
    OPG and sandwich standard errors, the relative-value solve for beta near 1.
:mod:`~genpqr.structural.nfxp`
    Rust's nested fixed point (:class:`~genpqr.structural.nfxp.NFXP`), also offered as a
    baseline in :mod:`genpqr.baselines`.

Counterfactuals on a fitted model live in the core (:mod:`genpqr.counterfactual`), since
they serve every tabular fit, structural or not.
"""
