"""The stage-2 models and tabular transition models users name: entries of
:data:`genpqr.registry.Q_MODELS` (``auto``, ``exact``, ``linear``, ``lstd``, ``hgb``),
:data:`~genpqr.registry.CONTINUOUS_Q_MODELS` (``linear``, ``hgb``, ``mlp``) and
:data:`~genpqr.registry.TRANSITION_MODELS` (``auto``, ``counts``, ``shrinkage``, ``lowrank``,
``classifier``, a kernel file), beside the classes they build. Q factories return
``q_model`` with FQE's settings (iterations, tolerance, early stopping, encoding), which
``genpqr.app.build.q_model`` makes one ``GenPQR(q_model=)``.

Transition factories, by capability: :data:`~genpqr.registry.SELECTED` (``auto``) receive
``data``, ``n_states``, ``seed`` (and ``progress``, the comparison's bar) and return
``(model or None, TransitionSelection)``, GenPQR's own rule (``resolve_transition_model``);
:data:`~genpqr.registry.COMPARED` ones receive ``seed`` and ``state_features`` and return the
candidate compared with counts;
:data:`~genpqr.registry.GIVEN` ones receive ``n_actions`` (and ``label``) and return the kernel;
``counts`` returns None (the estimator's counts).
"""

from __future__ import annotations

from ..registry import (COMPARED, CONTINUOUS_Q_MODELS, GIVEN, INPUT_FILE, ORDERED, Q_MODELS, SELECTED, STREAMS,
                        TABULAR, TRANSITION_MODELS, Argument)

__all__: list = []


# ------------------------------------------------------------------------------ Q models, finite actions
@Q_MODELS.register("auto", capabilities=(SELECTED,),
                   help="GenPQR()'s default: the exact solve on tabular states; on continuous states the "
                        "closed-form LSTD fixed point per action on a spline and product basis of the state, or FQE "
                        "with hgb where that does not apply (many actions, an encoding other than per_action)")
def _default(_, *, n_iterations, **context):
    """No ``q_model``: :class:`genpqr.GenPQR` picks its own default (the estimator's
    ``default_q_model``), so the command line and the library give one answer by construction."""
    return {} if n_iterations is None else {"n_iterations": n_iterations}


@Q_MODELS.register("exact", capabilities=(TABULAR, STREAMS), streamed="tabular",
                   elsewhere=" (the exact solver needs discrete actions and tabular states)",
                   help="the exact tabular solve (tabular states)")
def _exact(_, **context):
    return {"q_model": "exact"}


@Q_MODELS.register("linear", help="ridge regression per action, 500 FQE iterations")
def _ridge(_, *, n_iterations, **context):
    from sklearn.linear_model import Ridge

    return dict(q_model=Ridge(alpha=1.0), encoding="per_action", n_iterations=n_iterations or 500, tol=1e-6)


@Q_MODELS.register("lstd", capabilities=(STREAMS,), streamed="closed-form LSTD Q", help="least-squares temporal differences: a closed-form solve")
def _lstd(_, *, seed, n_iterations, **context):
    from ._lstd import LSTDQ

    return dict(q_model=LSTDQ(n_iterations=n_iterations, random_state=seed))


@Q_MODELS.register("hgb", help="scikit-learn's HistGradientBoostingRegressor, iterations chosen on 20% held-out "
                               "episodes")
def _hgb(_, *, seed, n_iterations, **context):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return dict(q_model=HistGradientBoostingRegressor(max_iter=100, random_state=seed),
                n_iterations=n_iterations or 50, validation_fraction=0.2)


# ------------------------------------------------------------------------------ Q models, a box of actions
@CONTINUOUS_Q_MODELS.register("linear", help="degree-2 polynomial features and least squares on [s, a]")
def _polynomial(_, *, n_iterations, **context):
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    return dict(q_model=make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=n_iterations or 500,
                tol=1e-6)


@CONTINUOUS_Q_MODELS.register("hgb", help="scikit-learn's HistGradientBoostingRegressor on [s, a]")
def _hgb_box(_, *, seed, n_iterations, **context):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return dict(q_model=HistGradientBoostingRegressor(max_iter=100, random_state=seed),
                n_iterations=n_iterations or 50, tol=1e-4)


@CONTINUOUS_Q_MODELS.register("mlp", help="scikit-learn's MLPRegressor on standardized [s, a]")
def _mlp_box(_, *, seed, n_iterations, **context):
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return dict(q_model=make_pipeline(StandardScaler(), MLPRegressor((64, 64), max_iter=200, random_state=seed)),
                n_iterations=n_iterations or 30, tol=1e-4)


# ------------------------------------------------------------------------------ transition models
@TRANSITION_MODELS.register("auto", capabilities=(SELECTED, STREAMS),
                            help="counts, shrinkage or lowrank, whichever predicts held-out episodes' next states "
                                 "best; counts unless another beats them by 2 standard errors")
def _auto(_, *, data, n_states, seed, progress=None, **context):
    from ._transition_spec import resolve_transition_model

    return resolve_transition_model("auto", data, n_states, random_state=seed, progress=progress)


@TRANSITION_MODELS.register("counts", capabilities=(STREAMS,), help="the observed frequencies (maximum likelihood)")
def _counts(_, **context):
    return None


@TRANSITION_MODELS.register("shrinkage", capabilities=(COMPARED,),
                            help="counts shrunk toward pooled next-state distributions")
def _shrinkage(_, *, seed, **context):
    from ._transition_models import ShrinkageKernel

    return ShrinkageKernel(random_state=seed)


@TRANSITION_MODELS.register("lowrank", capabilities=(COMPARED,), help="a low-rank mixture of next-state distributions")
def _lowrank(_, *, seed, **context):
    from ._transition_lowrank import LowRankKernel

    return LowRankKernel(random_state=seed)


@TRANSITION_MODELS.register("classifier", capabilities=(COMPARED,),
                            help="a next-state logistic regression on the state columns and the action")
def _classifier(_, *, state_features, **context):
    from ._transition_classifier import ClassifierKernel

    return ClassifierKernel(state_features=state_features)


@TRANSITION_MODELS.register("FILE", form="FILE.npy|FILE.npz", argument=Argument("FILE"),
                            capabilities=(GIVEN, ORDERED, INPUT_FILE),
                            match=lambda text: text.endswith((".npy", ".npz")),
                            help="a kernel file: dense (S, K, S) or (S*K, S) (numpy.save), or sparse (S*K, S) "
                                 "(scipy.sparse.save_npz)")
def _kernel_file(path, *, n_actions, **context):
    from ._kernel_files import load_kernel

    return load_kernel(path, n_actions=n_actions)
