"""Structural econometrics of dynamic discrete choice, built on the core.

:mod:`~genpqr.structural.ddc`
    The front module: :class:`~genpqr.structural.ddc.StructuralStep` on a fitted GenPQR, and
    every public name of the modules below it (increment kernels, choice counts, projection,
    the Hotz-Miller step and NPL) importable from one place.
:mod:`~genpqr.structural.kernels`
    Transition kernels of panels (increment kernels with a reset action), choice counts.
:mod:`~genpqr.structural.projection`
    Features in a normalization (the shaping lemma), projection of a reward table on features.
:mod:`~genpqr.structural.ccp`
    The conditional-choice-probability step with GenPQR's ``v`` fixed, Hotz-Miller's
    pseudo-likelihood and its iteration NPL.
:mod:`~genpqr.structural.likelihood`
    The full likelihood's score, OPG and Hessian; the relative-value solve for beta near 1.
:mod:`~genpqr.structural.estimation`
    Structural estimation of flow-utility parameters (``estimate_structural``: NPL to
    convergence, NFXP, PML, projection) with the MLE's OPG and sandwich standard errors.
:mod:`~genpqr.structural.results`
    Results as objects in statsmodels' words (``params``, ``bse``, ``llf``, ``conf_int``, ...:
    :class:`~genpqr.structural.results.LikelihoodResults`): coefficient tables, intervals, the
    likelihood-ratio test (:func:`~genpqr.structural.results.lr_test`).
:mod:`~genpqr.structural.summary`
    The printed summary (:class:`~genpqr.structural.summary.StructuralSummary`): text, HTML, LaTeX.
:mod:`~genpqr.structural.covariance`
    The covariance kinds (OPG, inverse Hessian, sandwich, bootstrap) and a fit with another
    (``StructuralFit.with_cov_type``, ``StructuralFit.bootstrap``).
:mod:`~genpqr.structural.separation`
    Whether the MLE exists: choices separated by the features, decided on the data by linear
    programming (:func:`~genpqr.structural.separation.find_separation`).
``identification`` (the module of :func:`identification`)
    Which parameters the choices identify, and the identified combinations of the others
    (collinear features), with their standard errors.
:mod:`~genpqr.structural.fit_checks`
    The warnings of a structural fit (:class:`~genpqr.structural.fit_checks.ProjectionWarning`).
:mod:`~genpqr.structural.maximize`
    The maximizers of the full likelihood (NPL with its safeguard, NFXP finished by Newton).
:mod:`~genpqr.structural.nfxp`
    Rust's nested fixed point (:class:`~genpqr.structural.nfxp.NFXP`), also offered as a
    baseline in :mod:`genpqr.baselines`.
:mod:`~genpqr.structural.checks`
    Argument checks shared by the estimators.
:mod:`~genpqr.structural.type_model`
    Latent agent types: the augmented (type, state) space, the mixing proportions and the
    mixture likelihood with its per-episode scores.
:mod:`~genpqr.structural.types`
    Estimation with latent types (:func:`~genpqr.structural.types.estimate_types`, also
    ``estimate_structural(..., n_types=M, episodes=...)``): the full-information mixture MLE, the
    sequential CCP-EM, :class:`~genpqr.structural.types.TypedStructuralFit`.
:mod:`~genpqr.structural.type_counterfactuals`
    Counterfactuals per latent type and averaged over the type distribution.

Layers (no import circles): ``checks``, ``identification``, ``summary`` < ``kernels``, ``projection``,
``likelihood``, ``results`` < ``covariance`` < ``ccp``, ``nfxp``, ``separation``, ``fit_checks`` < ``maximize`` < ``type_model`` <
``types`` < ``estimation``, ``ddc`` < ``type_counterfactuals``. Counterfactuals on a fitted model live in the
core (:mod:`genpqr.counterfactuals`), since they serve every tabular fit, structural or not.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from .estimation import ESTIMATORS, StructuralFit, estimate_structural, fit_structural
    from .fit_checks import ProjectionWarning
    from .identification import Identification, IdentifiedCombination, identification
    from .results import LRTestResult, StructuralSummary, lr_test
    from .separation import Separation, find_separation
    from .types import LatentTypeWarning, TypedStructuralFit, estimate_types
    from .type_counterfactuals import type_counterfactuals, type_fit

__all__ = ["ESTIMATORS", "StructuralFit", "estimate_structural", "fit_structural", "StructuralSummary", "LRTestResult", "lr_test",
           "Separation", "find_separation", "ProjectionWarning", "Identification", "IdentifiedCombination",
           "identification", "estimate_types", "TypedStructuralFit", "LatentTypeWarning", "type_fit",
           "type_counterfactuals"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
