"""Separation decided on the data (genpqr.structural._separation): the static logit's linear
programme, the dynamic model's value differences, and the estimators' one deterministic
message when the MLE does not exist."""

import re
import warnings

import numpy as np
import pytest

import genpqr
from genpqr.structural import _estimation as structural, find_separation
from genpqr.structural._separation import Separation
from genpqr.structural._likelihood import likelihood_derivatives

from .test_structural import rust9999_case



@pytest.fixture(scope="module")
def bus():
    model, kernel, counts = rust9999_case()
    separated = counts.copy()
    separated[:, 1] = 0.0
    separated[89] = [0.0, 1.0]  # one replacement, at the top state
    return model, kernel, counts, separated


def test_static_logit_quasi_complete_and_overlapping():
    """x(s, 0) = s - 1, x(s, 1) = 0 at s = 0, 1, 2: action 1 at s = 0, action 0 at s = 2 and both at
    s = 1 is quasi-completely separated (d > 0; tie at s = 1): no MLE. Action 0 at s = 0 as well
    overlaps: no direction, and that is a proof."""
    X = np.zeros((3, 2, 1))
    X[:, 0, 0] = [-1.0, 0.0, 1.0]
    counts = np.array([[0.0, 4.0], [3.0, 2.0], [5.0, 0.0]])
    sep = find_separation(X, counts)
    assert sep.kind == "quasi-complete" and sep.mle_exists is False and not sep.dynamic
    assert sep.direction.tolist() == [1.0] and (sep.n_strict, sep.n_rows) == (2, 4)
    counts[0, 0] = 1.0
    sep = find_separation(X, counts)
    assert sep.kind == "none" and sep.direction is None and sep.exact and sep.mle_exists is True
    # without the tie, complete separation
    counts = np.array([[0.0, 4.0], [0.0, 2.0], [5.0, 0.0]])
    X[1, 0, 0] = -0.5
    assert find_separation(X, counts).kind == "complete"


def test_the_dynamic_direction_makes_every_choice_certain(bus):
    """One replacement at the top state: the value differences of the dynamic model are
    completely separated; along the direction found, the full likelihood rises to 0."""
    model, kernel, counts, separated = bus
    X = model.features("anchor")
    sep = find_separation(X, separated, kernel, model.beta)
    assert sep.kind == "complete" and sep.dynamic and sep.exact and sep.mle_exists is False
    assert np.max(np.abs(sep.direction)) == 1.0 and sep.n_strict == sep.n_rows == 90
    logliks = [likelihood_derivatives(t * sep.direction, X, separated, kernel, model.beta).loglik
               for t in (1e2, 1e3, 1e4, 1e5)]
    assert np.all(np.diff(logliks) > 0) and logliks[-1] > -1e-3
    # the static check sees it too, with another direction; Rust's parametrization: the same answer
    assert find_separation(X, separated).kind == "complete"
    assert find_separation(model.features("rust"), separated, kernel, model.beta).kind == "complete"
    # the simulated panel itself is not separated, and every state has a choice: a proof
    sep = find_separation(X, counts, kernel, model.beta)
    assert sep.kind == "none" and sep.exact and sep.mle_exists is True


def test_states_without_choices(bus):
    """States without a choice leave the optimal action there free: a separation found is still a
    proof; none found is not."""
    model, kernel, counts, separated = bus
    X = model.features("anchor")
    cut = separated.copy()
    cut[60:] = 0.0
    cut[59] = [0.0, 1.0]
    sep = find_separation(X, cut, kernel, model.beta)
    assert sep.kind == "complete" and sep.mle_exists is False and sep.n_rows == 60
    thin = counts.copy()
    thin[60:] = 0.0
    sep = find_separation(X, thin, kernel, model.beta)
    assert sep == Separation("none", None, 0, sep.n_rows, True, False) and sep.mle_exists is None


@pytest.mark.parametrize("estimator", ["npl", "nfxp", "pml", "projection"])
def test_separated_choices_give_one_deterministic_message(bus, estimator):
    """Every estimator says "the maximum likelihood estimate does not exist", once, whatever its
    optimizer does; no convergence warning beside it, no standard error, no crash."""
    model, kernel, _, separated = bus
    X = model.features("anchor")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = structural.estimate_structural(estimator, X, separated, kernel, model.beta, names=["RC", "theta11"],
                                             reward_table=model.normalized_reward())
    messages = [str(w.message) for w in caught]
    assert sum("maximum likelihood estimate does not exist" in m for m in messages) == 1, messages
    assert not any(issubclass(w.category, genpqr.ConvergenceWarning) for w in caught), messages
    assert any(re.search(r"completely separated by the features: along the direction \(RC \S+, theta11 \S+\) of "
                         r"the parameters, the value differences of the dynamic model make every observed choice "
                         r"certain", m) for m in messages), messages
    assert fit.separation.kind == "complete" and not fit.converged
    assert np.all(np.isnan(fit.std_error)) and np.all(np.isnan(fit.std_error_robust))
    assert fit.convergence.endswith("stopped: the MLE does not exist (separated choices)")
    assert "the maximum likelihood estimate does not exist" in " ".join(str(fit.summary()).split())
