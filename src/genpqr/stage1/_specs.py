"""The policy models users name for finite actions (``auto``, ``frequency``, ``spline``,
``basis-logit``, ``logistic``, ``conditional-logit``): entries of :data:`genpqr.registry.POLICY_MODELS`, beside
the classifiers they build. The torch and LightGBM ones are declared in :mod:`genpqr.models`.

Factories receive ``tabular`` (tabular states: an index), ``n_states`` and ``seed``; the
:data:`~genpqr.registry.CHOSEN` ones also ``data`` (the transitions) and ``ordered`` (whether
the state index is an ordered quantity, ``genpqr.stage1._first_stage.state_is_ordered``) and return
``(classifier, FirstStageChoice)`` (``genpqr.stage1._first_stage.choose_tabular_policy``).
"""

from __future__ import annotations

from ..registry import ACTION_FEATURES, CHOSEN, MANY_ACTIONS, ORDERED, POLICY_MODELS, STREAMS, TABULAR

__all__: list = []


def _choose(force):
    def choose(_, *, data, n_states, ordered, seed, **context):
        from ._first_stage import choose_tabular_policy

        return choose_tabular_policy(data, n_states, ordered=ordered, force=force, random_state=seed)
    return choose


POLICY_MODELS.add("auto", factory=_choose(None), capabilities=(TABULAR, CHOSEN, STREAMS),
                  help="tabular states: a spline logit chosen by cross-validation when the state is ordered and "
                       "its cells are sparse, else cell frequencies (out of core: cell frequencies)")
POLICY_MODELS.add("frequency", capabilities=(TABULAR, STREAMS), help="cell frequencies (tabular states)",
                  factory=lambda _, *, n_states, **context: _frequency(n_states))
POLICY_MODELS.add("spline", factory=_choose("spline"), capabilities=(TABULAR, CHOSEN, ORDERED),
                  help="a multinomial logit on a cubic spline basis of an ordered tabular state")


def _frequency(n_states):
    from ._policy import FrequencyClassifier

    return FrequencyClassifier(n_states=n_states)


@POLICY_MODELS.register("basis-logit", help="continuous states, GenPQR()'s default: a multinomial logit on splines and "
                                           "pairwise products of the standardized state, shrunk toward the linear "
                                           "logit")
def _basis_logit(_, **context):
    from ._basis_logit import BasisLogit

    return BasisLogit()


@POLICY_MODELS.register("logistic", capabilities=(STREAMS,),
                        help="multinomial logistic regression (one-hot tabular states, standardized continuous ones)")
def _logistic(_, *, tabular, **context):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    first = OneHotEncoder(handle_unknown="ignore") if tabular else StandardScaler()
    return make_pipeline(first, LogisticRegression(max_iter=2000))


@POLICY_MODELS.register("conditional-logit", capabilities=(ACTION_FEATURES, MANY_ACTIONS),
                        help="pi(a|s) ~ exp(b(s)' W x_a) on the actions' features x_a (b(s): one-hot tabular states "
                             "or [1, standardized s]; C=1) by exact penalised likelihood: probabilities log-linear in "
                             "the features, up to thousands of actions")
def _conditional_logit(_, *, tabular, n_states, **context):
    from ._conditional_logit import ConditionalLogit

    return (ConditionalLogit(state_basis="onehot", n_states=n_states) if tabular
            else ConditionalLogit(state_basis="linear"))
