"""``genpqr fit --infer SPEC``'s targets, parsed once (genpqr.inference.parse_target)."""

import numpy as np
import pytest

from genpqr.inference import parse_target
from genpqr.inference._spec import TARGET_KINDS
from genpqr.inference._targets import CellReward, Difference, PolicyValue, RewardFunctional, SoftmaxValue


def test_each_kind_parses():
    labels = np.array(["keep", "replace"])
    v = parse_target("value:uniform;gamma=0.8;reward=normalized;name=V", labels=labels)
    assert isinstance(v, PolicyValue) and v.gamma == 0.8 and v.reward == "normalized" and v.name == "V"
    b = parse_target("value:behavior;reward=log_policy", labels=labels)
    assert b.policy == "behavior" and b.reward == "log_policy" and b.name == "V(behavior)"
    a = parse_target("value:action=keep", labels=labels)
    assert a.policy == {"keep": 1.0}
    d = parse_target("difference:action=replace,behavior", labels=labels)
    assert isinstance(d, Difference) and d.first.reward == "log_policy" and d.name == "V(action=replace) - V(behavior)"
    s = parse_target("softmax:keep|replace;temperature=0.5", labels=labels)
    assert isinstance(s, SoftmaxValue) and s.actions == ["keep", "replace"] and s.temperature == 0.5
    assert parse_target("reward-mean").kind == "data_mean"
    cells = parse_target("reward-at:3=keep,10=replace", labels=labels)
    assert isinstance(cells, CellReward) and cells.weights == [(3, "keep"), (10, "replace")]
    X = np.zeros((4, 2, 2))
    p = parse_target("projection", features=X, feature_names=["RC", "theta11"])
    assert isinstance(p, RewardFunctional) and p.components() == ["RC", "theta11"]
    table = np.full((4, 2), 0.5)
    assert parse_target("value:mine", policies={"mine": table}).policy is table
    assert set(TARGET_KINDS) == {"value", "difference", "softmax", "reward-mean", "reward-at", "projection"}


@pytest.mark.parametrize("spec, match", [
    ("valu:behavior", "unknown inference target 'valu'"),
    ("value", "value needs an argument"),
    ("value:optimal", "is not behavior, uniform or action=LABEL"),
    ("value:behavior;temperature=2", "takes the options"),
    ("difference:behavior", "needs two policies"),
    ("softmax:fly", "not one of the data's actions"),
    ("reward-at:3", "STATE=ACTION"),
    ("reward-at:x=keep", "state index"),
    ("projection", "needs the features"),
    ("reward-mean:3", "takes no argument"),
    ("", "must be a string"),
])
def test_bad_specs_say_what_is_expected(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_target(spec, labels=["keep", "replace"])
