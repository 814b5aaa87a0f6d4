"""Structural econometrics of dynamic discrete choice, built on the core.

``_ddc``
    The front module: :class:`~genpqr.structural.StructuralStep` on a fitted GenPQR, and
    every public name of the modules below it (increment kernels, choice counts, projection,
    the Hotz-Miller step and NPL) importable from one place.
``_kernels``
    Transition kernels of panels (increment kernels with a reset action), choice counts.
``_projection``
    Features in a normalization (the shaping lemma), projection of a reward table on features.
``_ccp``
    The conditional-choice-probability step with GenPQR's ``v`` fixed, Hotz-Miller's
    pseudo-likelihood and its iteration NPL.
``_likelihood``
    The full likelihood's score, OPG and Hessian; the relative-value solve for beta near 1.
``_estimation``
    Structural estimation of flow-utility parameters (``estimate_structural``: NPL to
    convergence, NFXP, PML, projection) with the MLE's OPG and sandwich standard errors.
``_results``
    Results as objects in statsmodels' words (``params``, ``bse``, ``llf``, ``conf_int``, ...:
    ``LikelihoodResults``): coefficient tables, intervals, the
    likelihood-ratio test (:func:`~genpqr.structural.lr_test`).
``_summary``
    The printed summary (``StructuralSummary``): text, HTML, LaTeX.
``_covariance``
    The covariance kinds (OPG, inverse Hessian, sandwich, bootstrap) and a fit with another
    (``StructuralFit.with_cov_type``, ``StructuralFit.bootstrap``).
``_separation``
    Whether the MLE exists: choices separated by the features, decided on the data by linear
    programming (:func:`~genpqr.structural.find_separation`).
``identification`` (the module of :func:`identification`)
    Which parameters the choices identify, and the identified combinations of the others
    (collinear features), with their standard errors.
``_fit_checks``
    The warnings of a structural fit (:class:`~genpqr.structural.ProjectionWarning`).
``_maximize``
    The maximizers of the full likelihood (NPL with its safeguard, NFXP finished by Newton).
``_nfxp``
    Rust's nested fixed point (``NFXP``), also offered as a
    baseline in :mod:`genpqr.baselines`.
``_checks``
    Argument checks shared by the estimators.
``_type_model``
    Latent agent types: the augmented (type, state) space, the mixing proportions and the
    mixture likelihood with its per-episode scores.
``_types``
    Estimation with latent types (:func:`~genpqr.structural.estimate_types`, also
    ``estimate_structural(..., n_types=M, episodes=...)``): the full-information mixture MLE, the
    sequential CCP-EM, :class:`~genpqr.structural.TypedStructuralFit`.
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
    from ._estimation import StructuralFit, estimate_structural, fit_structural
    from ._ddc import StructuralStep
    from ._kernels import IncrementKernel, choice_counts
    from ._projection import project_reward
    from ._results import lr_test
    from ._separation import find_separation
    from ._identification import Identification, identification
    from ._types import TypedStructuralFit, estimate_types
    from ._type_counterfactuals import type_counterfactuals
    from ._fit_checks import ProjectionWarning

__all__ = ["fit_structural", "estimate_structural", "StructuralFit", "StructuralStep", "IncrementKernel",
           "choice_counts", "project_reward", "lr_test", "find_separation", "identification", "Identification",
           "estimate_types", "TypedStructuralFit", "type_counterfactuals", "ProjectionWarning"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
