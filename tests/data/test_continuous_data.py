"""Continuous-action transitions, the action space, and the discrete/continuous type errors."""

import numpy as np
import pytest

import genpqr
from genpqr import GenPQR
from genpqr.data import BoxActions
from genpqr.stage2 import FQE
from genpqr.estimator import ContinuousOptions


def from_arrays(states, actions, next_states, **kwargs):
    """Transitions with continuous actions (a box action space)."""
    return genpqr.from_arrays(states, actions, next_states, action_space="box", **kwargs)


def _arrays(rng, n=50, d=2, m=1):
    return rng.normal(size=(n, d)), rng.uniform(-1, 1, size=(n, m)), rng.normal(size=(n, d))


def test_from_arrays_shapes_and_defaults(rng):
    s, a, s2 = _arrays(rng)
    data = from_arrays(s, a[:, 0], s2)
    assert isinstance(data, genpqr.Transitions) and not data.is_finite
    assert data.actions.shape == (50, 1) and data.action_dim == 1 and data.state_dim == 2
    assert data.action_space.is_unbounded and data.action_space.describe() == "R^1"
    assert data.action_space.reference_measure() == "Lebesgue measure on R^1"
    assert np.all(data.weights == 1.0) and data.n_episodes == 50
    with pytest.raises(ValueError):  # read-only arrays
        data.actions[0, 0] = 1.0


def test_actions_outside_the_stated_support_are_an_error(rng):
    s, a, s2 = _arrays(rng)
    a[3, 0] = 1.5
    with pytest.raises(ValueError, match=r"outside the stated support \[-1, 1\].*first at row 3:"):
        from_arrays(s, a, s2, action_low=-1, action_high=1)
    data = from_arrays(s, np.clip(a, -1, 1), s2, action_low=-1, action_high=1)
    assert data.action_space.is_bounded and data.action_space.volume == 2.0


def test_action_space_validation():
    with pytest.raises(ValueError, match="below action_high"):
        BoxActions.create(1, 1.0, 0.0)
    box = BoxActions.create(2, [-1, 0], [1, 2])
    assert box.describe() == "[-1, 1] x [0, 2]"
    assert box.contains(np.array([[0.0, 1.0], [2.0, 1.0]])).tolist() == [True, False]


def test_string_actions_point_to_the_discrete_api(rng):
    s, _, s2 = _arrays(rng, n=4)
    with pytest.raises(TypeError, match="genpqr.from_arrays and genpqr.GenPQR"):
        from_arrays(s, np.array(["left", "right", "left", "up"]), s2)


def test_integer_actions_with_few_values_warn(rng):
    s, _, s2 = _arrays(rng, n=100)
    with pytest.warns(UserWarning, match="discrete choices"):
        from_arrays(s, rng.integers(0, 3, size=100), s2)


def test_validation_messages(rng):
    s, a, s2 = _arrays(rng)
    with pytest.raises(ValueError, match="next_states has 49 rows but actions has 50"):
        from_arrays(s, a, s2[:-1])
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        from_arrays(s, a, s2, sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="actions must be finite"):
        from_arrays(s, np.full(50, np.nan), s2)


def test_subset_split_and_pandas(rng):
    s, a, s2 = _arrays(rng, n=60)
    data = from_arrays(s, a, s2, episode_ids=np.repeat(np.arange(12), 5), sample_weight=rng.uniform(1, 2, 60))
    train, test = data.split_episodes(0.25, random_state=0)
    assert train.n + test.n == 60 and not set(train.episode_ids) & set(test.episode_ids)
    assert len(data.episode_folds(3, random_state=0)) == 3
    frame = data.to_pandas()
    assert {"a0", "s0", "next_s1", "sample_weight"} <= set(frame.columns)


def test_genpqr_fits_continuous_actions(rng):
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    from genpqr.data import BoxActions

    s, a, s2 = _arrays(rng, n=200)
    data = genpqr.from_arrays(s, a, s2, action_space="box", episode_ids=np.arange(200) // 10)
    assert isinstance(data, genpqr.Transitions)
    assert isinstance(data.action_space, BoxActions) and not data.is_finite
    params = dict(gamma=0.5, random_state=0)
    new = GenPQR(q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=20, tol=None),
                 **params).fit(data)
    assert {"q_model__structure", "continuous__integration", "continuous__reference", "continuous__min_log_density",
            "continuous__check_density"} <= set(new.set_params(continuous=ContinuousOptions()).get_params())
    with pytest.raises(ValueError, match="needs the actions"):
        new.reward(s[:20])
