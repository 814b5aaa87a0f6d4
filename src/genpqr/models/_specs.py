"""The torch and LightGBM models users name: entries of :data:`genpqr.registry.POLICY_MODELS`
(``mlp``, ``lightgbm``, ``two-tower``, ``bilinear``), :data:`~genpqr.registry.DENSITIES`
(``mlp-gaussian``, ``mdn``, ``flow``), :data:`~genpqr.registry.Q_MODELS` (``mlp``,
``lightgbm``) and :data:`~genpqr.registry.CONTINUOUS_Q_MODELS` (``lightgbm``), beside the
classes they build. Nothing here imports torch or LightGBM until an entry is built.
"""

from __future__ import annotations

from ..messages import Mention, Message
from ..registry import (ACTION_FEATURES, CONTINUOUS_Q_MODELS, CONTINUOUS_STATES, DENSITIES, MANY_ACTIONS,
                        POLICY_MODELS, Q_MODELS, STREAMS, STREAMS_ON_CLUSTER)

__all__: list = []


def _lightgbm(param: str, name: str):
    try:
        import lightgbm
    except ImportError:
        raise ValueError(Message(Mention(param), f" {name} needs the lightgbm package (pip install "
                                                 "genpqr[lightgbm])")) from None
    return lightgbm


# ------------------------------------------------------------------------------ stage 1, finite actions
@POLICY_MODELS.register("mlp", capabilities=(STREAMS,), help="a multilayer perceptron classifier (torch)")
def _mlp_classifier(_, *, seed, **context):
    from ._nn import MLPClassifier

    return MLPClassifier(random_state=seed)


@POLICY_MODELS.register("lightgbm", capabilities=(STREAMS,), help="LightGBM's gradient-boosted classifier")
def _lightgbm_classifier(_, *, seed, **context):
    return _lightgbm("policy_model", "lightgbm").LGBMClassifier(verbose=-1, random_state=seed, n_jobs=1)


@POLICY_MODELS.register("two-tower", capabilities=(ACTION_FEATURES, MANY_ACTIONS, CONTINUOUS_STATES),
                        help="f(s)' h(x_a), a ReLU state tower and an affine action tower (torch): a learned state "
                             "representation, thousands to tens of thousands of actions (a sampled softmax above "
                             "2,048); continuous states")
def _two_tower(_, *, seed, **context):
    from ._two_tower import TwoTowerClassifier

    return TwoTowerClassifier(random_state=seed)


@POLICY_MODELS.register("bilinear", capabilities=(ACTION_FEATURES, MANY_ACTIONS, CONTINUOUS_STATES),
                        help="[1, s]' W x_a with W of rank at most 16 (linear towers) fitted by the two tower's "
                             "stochastic optimiser (torch): the conditional logit's score where its exact fit is too "
                             "slow, tens of thousands of actions; continuous states")
def _bilinear(_, *, seed, **context):
    from ._two_tower import TwoTowerClassifier

    return TwoTowerClassifier(state_layers=(), action_layers=(), random_state=seed)


# ------------------------------------------------------------------------------ stage 1, a box of actions
def _squashed(base, space):
    from ..actions import SquashedDensity

    return SquashedDensity(base, space.low, space.high) if space.is_bounded else base


@DENSITIES.register("mlp-gaussian", help="a heteroscedastic Gaussian whose mean and scale are MLPs (torch)")
def _mlp_gaussian(_, *, space, seed, **context):
    from ._neural_densities import MLPGaussianDensity

    return _squashed(MLPGaussianDensity(random_state=seed), space)


@DENSITIES.register("mdn", help="a mixture density network of 3 Gaussians (torch)")
def _mdn(_, *, space, seed, **context):
    from ._neural_densities import MixtureDensityNetwork

    return _squashed(MixtureDensityNetwork(n_components=3, random_state=seed), space)


@DENSITIES.register("flow", help="a normalizing flow (needs zuko)")
def _flow(_, *, space, seed, **context):
    from ._neural_densities import FlowDensity

    FlowDensity._zuko()  # a clear ImportError now rather than at fit time
    return _squashed(FlowDensity(random_state=seed), space)


# ------------------------------------------------------------------------------ stage 2
@Q_MODELS.register("mlp", capabilities=(STREAMS,), streamed="neural FQE streamed by chunk", help="a dueling Q network (torch), 30 FQE iterations")
def _dueling(_, *, seed, n_iterations, **context):
    from ._qnetwork import DuelingQNetwork

    return dict(q_model=DuelingQNetwork(random_state=seed), n_iterations=n_iterations or 30, tol=None)


@Q_MODELS.register("lightgbm", capabilities=(STREAMS_ON_CLUSTER,), streamed="boosted FQE on the Dask cluster",
                   help="boosted FQE, one LightGBM tree per Bellman update (iterations chosen on 20% held-out episodes)")
def _boosted(_, *, seed, n_iterations, **context):
    from ._boosting import BoostedQModel

    return dict(q_model=BoostedQModel(random_state=seed), n_iterations=n_iterations or 200, validation_fraction=0.2)


@CONTINUOUS_Q_MODELS.register("lightgbm", help="LightGBM's regressor on [s, a]")
def _lgbm_regressor(_, *, seed, n_iterations, **context):
    regressor = _lightgbm("q_model", "lightgbm").LGBMRegressor(verbose=-1, random_state=seed, n_jobs=1)
    return dict(q_model=regressor, n_iterations=n_iterations or 50, tol=1e-4)
