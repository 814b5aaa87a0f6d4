"""The registries of the names users type (genpqr.registry): parsing once into a spec, the forms
and errors, capabilities, and a listing that imports nothing heavy."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from genpqr.messages import Mention, Message, render
from genpqr.registry import (ANCHORED, COMPARED, CONTINUOUS_NORMALIZATIONS, DENSITIES, GIVEN, INPUT_FILE,
                             INTEGRATION_RULES, MANY_ACTIONS, NORMALIZATIONS, ORDERED, POLICY_MODELS, Q_MODELS,
                             SELECTED, STREAMS, STRUCTURAL_ESTIMATORS, TABULAR, TRANSITION_MODELS, Argument, Registry,
                             Spec)

SRC = Path(__file__).resolve().parents[1] / "src"
REGISTRIES = ("POLICY_MODELS", "DENSITIES", "Q_MODELS", "CONTINUOUS_Q_MODELS", "NORMALIZATIONS",
              "CONTINUOUS_NORMALIZATIONS", "TRANSITION_MODELS", "INTEGRATION_RULES", "STRUCTURAL_ESTIMATORS")


def test_a_spec_is_the_text_with_its_entry_and_argument():
    spec = NORMALIZATIONS.parse("Anchor:b")
    assert isinstance(spec, Spec) and spec == "Anchor:b" and (spec.name, spec.value) == ("anchor", "b")
    assert spec.can(STREAMS, ANCHORED) and not spec.can(TABULAR)
    assert NORMALIZATIONS.parse(spec) is spec  # parsed once
    assert pickle.loads(pickle.dumps(spec)).entry is spec.entry
    assert json.dumps({"normalization": spec}) == '{"normalization": "Anchor:b"}'
    increment = TRANSITION_MODELS.parse("increment:3:replace")
    assert increment.value == (3, "replace") and increment.can(GIVEN, ORDERED)
    kernel = TRANSITION_MODELS.parse("counts.npz")  # a file path, not the name "counts"
    assert kernel.can(INPUT_FILE) and kernel.value == "counts.npz"
    assert TRANSITION_MODELS.parse("auto").can(SELECTED) and TRANSITION_MODELS.parse("shrinkage").can(COMPARED)
    assert INTEGRATION_RULES.parse("monte-carlo:8").build().n_samples == 8
    assert STRUCTURAL_ESTIMATORS.parse("nfxp").build() == "nfxp"


def test_forms_and_capabilities_are_the_entries():
    assert NORMALIZATIONS.forms() == ("anchor:ACTION, mean-zero, state-anchor:COLUMN, value:COLUMN or "
                                      "behavior:OUTCOME_COLUMN")
    assert NORMALIZATIONS.forms(STREAMS) == "anchor:ACTION or mean-zero"
    assert INTEGRATION_RULES.forms() == "mc:N, gauss-hermite:N or gauss-legendre:N"
    assert {"two-tower", "bilinear", "conditional-logit"} <= set(POLICY_MODELS.names(MANY_ACTIONS))
    assert POLICY_MODELS.names(without=(TABULAR,))[:3] == ["basis-logit", "logistic", "conditional-logit"]
    assert Q_MODELS.names(TABULAR) == ["exact"]
    assert POLICY_MODELS.forms().endswith("or package.module:Class") and "gaussian" in DENSITIES.names()


@pytest.mark.parametrize("registry, text, phrase", [
    (NORMALIZATIONS, "anchr:1", "normalization must be one of anchor:ACTION"),
    (NORMALIZATIONS, "mean-zero:a", "normalization mean-zero takes no argument, got 'mean-zero:a'"),
    (NORMALIZATIONS, "value", "normalization value needs an argument: value:COLUMN"),
    (NORMALIZATIONS, "uniform", "normalization uniform is not supported for discrete actions: it is for continuous "
                                "actions (action_space='box')"),
    (CONTINUOUS_NORMALIZATIONS, "mean-zero", "normalization mean-zero is not supported for continuous actions"),
    (CONTINUOUS_NORMALIZATIONS, "gaussian:0,-1", "gaussian:MEAN,SCALE needs a mean and a positive scale"),
    (POLICY_MODELS, "mdn", "policy_model mdn is not supported for discrete actions: it is a density for continuous"),
    (TRANSITION_MODELS, "increment:-1", "increment:MAX[:RESET] needs a non-negative integer MAX"),
    (INTEGRATION_RULES, "mc:0", "integration mc:N needs a positive integer N, got 'mc:0'"),
    (STRUCTURAL_ESTIMATORS, 3, "estimator must be one of npl, nfxp, pml or projection, got 3"),
])
def test_errors_name_the_parameter(registry, text, phrase):
    with pytest.raises(ValueError) as info:
        registry.parse(text)
    assert str(info.value).startswith(registry.param) and phrase in str(info.value), str(info.value)
    assert info.value.args[0].mentions[0].param == registry.param  # a front end names it its own way


def test_a_registry_of_ones_own():
    toys = Registry("toy", param="toy")
    toys.add("plain", help="no argument", factory=lambda _, **c: "plain")
    toys.add("scaled", help="a number", factory=lambda x, *, base=1, **c: base * x,
             argument=Argument("X", float), capabilities=(STREAMS,), aliases=("times",))
    assert toys.parse("times:2").build(base=3) == 6.0 and toys.names(STREAMS) == ["scaled"]
    assert toys.forms() == "plain or scaled:X"
    with pytest.raises(ValueError, match="declared twice"):
        toys.add("Plain", help="", factory=lambda _, **c: None)
    toys.remove("scaled")
    assert "times" not in toys and toys.names() == ["plain"]


def test_messages_name_parameters_the_way_the_reader_calls_them():
    text = Message("raise ", Mention("n_iterations"), " or use ", Mention("clip", None), " (", Message(
        Mention("include_data", True, python="save(path, include_data=True)")), ")")
    assert text == "raise n_iterations or use clip=None (save(path, include_data=True))"
    flags = {"n_iterations": "--n-iterations", "clip": "--clip none", "include_data": "--save-data"}
    assert render(ValueError(text), lambda m: flags[m.param]) == "raise --n-iterations or use --clip none (--save-data)"
    assert pickle.loads(pickle.dumps(ValueError(text))).args[0].render(lambda m: flags[m.param]).startswith("raise --")
    assert str(pickle.loads(pickle.dumps(Mention("x")))) == "x"


def test_listing_every_registry_imports_nothing_heavy():
    """What ``genpqr fit --help`` needs (every entry's form and help) loads only the registries and
    the light ``_specs`` modules declaring them: the wings' packages are stubbed (issue 31 makes
    them lazy), and no scikit-learn, SciPy, pandas, torch, LightGBM or even NumPy is imported."""
    code = f"""
import sys, types
for name in ("genpqr", "genpqr.actions", "genpqr.normalization", "genpqr.stage1", "genpqr.stage2",
             "genpqr.structural", "genpqr.models"):
    module = types.ModuleType(name)
    module.__path__ = [{str(SRC)!r} + "/" + name.replace(".", "/")]
    sys.modules[name] = module
import genpqr.registry as R
for name in {REGISTRIES!r}:
    registry = getattr(R, name)
    assert registry.forms() and all(e.help for e in registry.entries()), name
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "scipy", "sklearn", "pandas", "torch",
                                                              "lightgbm", "matplotlib"))
print(len(R.POLICY_MODELS.entries()), heavy)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, heavy = done.stdout.split(" ", 1)
    assert int(count) >= 9 and heavy.strip() == "[]", done.stdout
