"""Saving and loading safely (:mod:`genpqr.estimator`, :mod:`genpqr.estimator._manifest`'s signed files,
:func:`genpqr.load`, :func:`genpqr.counterfactuals.load_counterfactual`, the ``module:Class``
import paths of ``genpqr fit``).

A model file is code: a pickle runs what it holds when loaded. Loading is safe by default:
only files that genpqr signed under this user's key load without ``trusted=True``; a malicious
pickle is refused before anything in it runs (the payloads here write a marker file, and the
tests assert it was never written); damaged files are one named error.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import tempfile
import warnings
import zipfile
from pathlib import Path

import joblib
import numpy as np
import pytest

import genpqr
from genpqr import GenPQR, normalization as N, stage2 as T
from genpqr.stage2._stages import ExactStage2
from genpqr.counterfactuals import CounterfactualResult, load_counterfactual
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.exceptions import IntegrityError, ModelFormatError, UntrustedFileError
from genpqr.estimator._manifest import MAGIC, manifest_trusted, output_folder, read_header, read_signed, write_signed
from genpqr.estimator._persistence import pickled_parts, read_model

GRID = np.arange(8, dtype=float)[:, None]


class Payload:
    """A malicious pickle: unpickling it writes ``marker`` (any code could run there)."""

    def __init__(self, marker):
        self.marker = Path(marker)

    def __reduce__(self):
        return Path.write_text, (self.marker, "the payload ran")


def evil_function():  # an importable function: never to be called by a --policy-model path
    Path(os.environ["GENPQR_TEST_MARKER"]).write_text("called")


class NotAQModel:
    def fit(self, X, y):
        return self


@contextlib.contextmanager
def another_key():
    """Sign with another account's key inside the block."""
    before = os.environ["GENPQR_CONFIG_DIR"]
    os.environ["GENPQR_CONFIG_DIR"] = tempfile.mkdtemp(prefix="genpqr-other-key-")
    try:
        yield
    finally:
        os.environ["GENPQR_CONFIG_DIR"] = before


@pytest.fixture(scope="module")
def fitted():
    mdp = random_mdp(8, 3, n_next=3, gamma=0.9, random_state=0)
    policy = T.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    data = simulate_tabular(mdp, policy, n_episodes=80, horizon=10, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=8).fit(data)


# ----------------------------------------------------------------------------- signed model files
def test_save_writes_a_signed_file_that_loads(fitted, tmp_path):
    path = tmp_path / "model.joblib"
    fitted.save(path)
    header, data = read_header(path), path.read_bytes()
    assert data.startswith(MAGIC) and header["holds"] == "GenPQR" and header["signature"]
    assert header["size"] == len(data) - data.index(b"\n", len(MAGIC)) - 1
    np.testing.assert_array_equal(genpqr.load(path).reward(GRID), fitted.reward(GRID))
    np.testing.assert_array_equal(genpqr.load(str(path), trusted=True).reward(GRID), fitted.reward(GRID))


def test_a_malicious_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "model.joblib"
    with open(path, "wb") as fh:
        pickle.dump(Payload(marker), fh)
    with pytest.raises(UntrustedFileError, match="no genpqr header.*runs any code.*trusted=True"):
        genpqr.load(path)
    assert not marker.exists()
    joblib.dump(Payload(marker), path)  # joblib's own format, and compressed
    with pytest.raises(UntrustedFileError):
        genpqr.load(path)
    joblib.dump(Payload(marker), path, compress=3)
    with pytest.raises(UntrustedFileError):
        genpqr.load(path)
    assert not marker.exists()


def test_a_forged_header_over_a_malicious_pickle_is_refused(tmp_path):
    """Size and hash right, signature made up (or absent): nothing runs."""
    import hashlib

    marker = tmp_path / "marker"
    payload = pickle.dumps(Payload(marker))
    for signature in ("0" * 64, None):
        body = {"format": 1, "genpqr": genpqr.__version__, "holds": "GenPQR", "size": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest()}
        header = json.dumps(dict(body, signature=signature), sort_keys=True, separators=(",", ":")).encode()
        path = tmp_path / "model.joblib"
        path.write_bytes(MAGIC + header + b"\n" + payload)
        with pytest.raises(UntrustedFileError, match="not under this account's signing key"):
            genpqr.load(path)
    assert not marker.exists()


def test_a_file_signed_under_another_key_needs_trust(fitted, tmp_path):
    path = tmp_path / "model.joblib"
    with another_key():
        fitted.save(path)
        assert genpqr.load(path).gamma == 0.9  # its own account loads it
    with pytest.raises(UntrustedFileError, match="another machine or user"):
        genpqr.load(path)
    np.testing.assert_array_equal(genpqr.load(path, trusted=True).reward(GRID), fitted.reward(GRID))


@pytest.mark.parametrize("how", ["joblib", "joblib compressed", "pickle", "cloudpickle"])
def test_trusted_loads_files_of_older_genpqr_and_of_joblib(fitted, tmp_path, how):
    path = tmp_path / "old.joblib"
    if how.startswith("joblib"):
        joblib.dump(fitted, path, compress=3 if "compressed" in how else 0)
    else:
        module = pickle if how == "pickle" else __import__("cloudpickle")
        path.write_bytes(module.dumps(fitted))
    with pytest.raises(UntrustedFileError, match="trusted=True"):
        genpqr.load(path)
    np.testing.assert_array_equal(genpqr.load(path, trusted=True).reward(GRID), fitted.reward(GRID))


# ----------------------------------------------------------------------------- model files of another format
def _old_format(fitted):
    """A GenPQR as the 0.x code pickled it: every fitted attribute set on the estimator one by
    one (no ``fitted_``)."""
    old = GenPQR(**fitted.get_params())
    state = fitted.fitted_
    old.__dict__.update(gamma_=state.gamma, encoder_=state.action_space, action_space_=state.action_space,
                        n_actions_=state.action_space.n_actions, state_dim_=state.state_dim,
                        normalization_=state.normalization, policy_=state.policy, stage2_=state.stage2,
                        diagnostics_=state.diagnostics, n_states_=state.tabular.n_states,
                        visited_states_=state.tabular.visited_states)
    return old


@pytest.mark.parametrize("trusted", [False, True])
def test_a_model_file_of_an_older_format_asks_for_a_refit(fitted, tmp_path, trusted):
    """The fitted state is one object since format 2: a file of the 0.x format (attributes set
    one by one), of an older state format, or naming a class that is gone (the 0.x pickle
    aliases such as ``genpqr.estimator._estimator._ExactStage2``) is refused with one line
    telling the user to refit, signed or not."""
    import copy
    import dataclasses
    import sys

    older_state = copy.copy(fitted)
    older_state.__dict__["fitted_"] = dataclasses.replace(fitted.fitted_, format=1)
    files = {"attributes": _old_format(fitted), "state format 1": older_state}
    for name, model in files.items():
        write_signed(model, tmp_path / f"{name}.joblib", holds="GenPQR")

    class _ExactStage2(ExactStage2):  # the former alias, as the 0.x code pickled it
        pass

    _ExactStage2.__module__, _ExactStage2.__qualname__ = "genpqr.estimator._estimator", "_ExactStage2"
    gone = _old_format(fitted)
    gone.__dict__["stage2_"] = _ExactStage2(fitted.stage2_.recovery, fitted.stage2_.kernel, fitted.stage2_.counts)
    module = sys.modules["genpqr.estimator._estimator"]
    module._ExactStage2 = _ExactStage2
    try:
        write_signed(gone, tmp_path / "alias.joblib", holds="GenPQR")
    finally:
        del module._ExactStage2
    for name in [*files, "alias"]:
        with pytest.raises(ModelFormatError, match=r"saved by another version of genpqr.*refit it") as info:
            genpqr.load(tmp_path / f"{name}.joblib", trusted=trusted)
        assert "\n" not in str(info.value) and f"{name}.joblib" in str(info.value), str(info.value)
    assert not hasattr(__import__("genpqr.estimator._estimator", fromlist=["x"]), "_ExactStage2")


DAMAGED = {  # name: (bytes of the damaged file from the good file's bytes, phrase)
    "empty": (lambda good: b"", "is empty (0 bytes)"),
    "text": (lambda good: b"state,action\n0,a\n", "has no genpqr header and is not a pickle"),
    "truncated": (lambda good: good[: len(good) // 2], "its payload has"),
    "cut inside the header": (lambda good: good[: len(MAGIC) + 20], "header is cut short"),
    "header not JSON": (lambda good: MAGIC + b"{oops\n" + good.split(b"\n", 2)[2], "header is damaged"),
    "one byte changed": (lambda good: good[:-10] + bytes([good[-10] ^ 1]) + good[-9:], "SHA-256 does not match"),
    "bytes appended": (lambda good: good + b"\x00", "its payload has"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
@pytest.mark.parametrize("trusted", [False, True])
def test_damaged_files_are_one_integrity_error(fitted, tmp_path, case, trusted):
    damage, phrase = DAMAGED[case]
    fitted.save(tmp_path / "good.joblib")
    path = tmp_path / "model.joblib"
    path.write_bytes(damage((tmp_path / "good.joblib").read_bytes()))
    if case == "text" and trusted:
        phrase = "could not be read as a saved genpqr object"
    with pytest.raises(IntegrityError, match=phrase.replace("(", r"\(").replace(")", r"\)")) as info:
        genpqr.load(path, trusted=trusted)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_missing_file_and_wrong_contents(fitted, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        genpqr.load(tmp_path / "nope.joblib")
    write_signed({"a": 1}, tmp_path / "other.joblib", holds="dict")
    with pytest.raises(TypeError, match="holds a dict, not a GenPQR"):
        genpqr.load(tmp_path / "other.joblib")
    write_signed({"a": 1}, tmp_path / "other.joblib", holds="GenPQR")
    with pytest.raises(TypeError, match="does not hold a GenPQR model"):
        genpqr.load(tmp_path / "other.joblib")


def test_save_is_atomic(fitted, tmp_path):
    """A save that fails (an object nothing can pickle) leaves the earlier file as it was."""
    import threading

    path = tmp_path / "model.joblib"
    fitted.save(path)
    before = path.read_bytes()
    broken = fitted.__class__(**fitted.get_params()).set_params(q_model="exact")
    broken.__dict__.update(fitted.__dict__)
    broken.lock_ = threading.Lock()
    with pytest.raises(TypeError):
        broken.save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["model.joblib"]


def test_user_closures_still_save_and_load(tmp_path):
    mdp = random_mdp(6, 2, n_next=3, gamma=0.9, random_state=3)
    data = simulate_tabular(mdp, T.soft_optimal_policy(mdp.reward, mdp.kernel, 0.9), 40, 8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.mean_zero(g=lambda s: 0.1 * s[:, 0]), gamma=0.9, q_model="exact", clip=None).fit(data)
    model.save(tmp_path / "m.joblib")
    np.testing.assert_array_equal(genpqr.load(tmp_path / "m.joblib").reward(GRID[:6]), model.reward(GRID[:6]))


# ----------------------------------------------------------------------------- output folders
def _fit_folder(target, model, *, signed_model=True):
    with output_folder(target, kind="fit", command=["genpqr", "fit"]) as staging:
        if signed_model:
            model.save(staging / "model.joblib")
        else:
            joblib.dump(model, staging / "model.joblib")
        (staging / "rewards.csv").write_text("state,a\n0,0\n")


def test_load_a_fit_folder(fitted, tmp_path):
    _fit_folder(tmp_path / "fit", fitted)
    np.testing.assert_array_equal(genpqr.load(tmp_path / "fit").reward(GRID), fitted.reward(GRID))
    # an unsigned model.joblib listed in a manifest signed under this key counts as trusted
    _fit_folder(tmp_path / "old", fitted, signed_model=False)
    np.testing.assert_array_equal(genpqr.load(tmp_path / "old").reward(GRID), fitted.reward(GRID))
    with pytest.raises(UntrustedFileError):  # the file alone is not
        genpqr.load(tmp_path / "old" / "model.joblib")


def test_a_folder_whose_manifest_is_not_ours_or_is_broken(fitted, tmp_path):
    marker = tmp_path / "marker"
    with another_key():
        _fit_folder(tmp_path / "theirs", fitted, signed_model=False)
    manifest = json.loads((tmp_path / "theirs" / "manifest.json").read_text())
    assert not manifest_trusted(manifest)
    with pytest.raises(UntrustedFileError):
        genpqr.load(tmp_path / "theirs")
    assert genpqr.load(tmp_path / "theirs", trusted=True).gamma == 0.9
    # a model.joblib swapped for a payload after the fit: the manifest's hash no longer matches
    _fit_folder(tmp_path / "ours", fitted, signed_model=False)
    (tmp_path / "ours" / "model.joblib").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(IntegrityError, match="model.joblib does not match manifest.json"):
        genpqr.load(tmp_path / "ours", trusted=True)
    # a manifest edited to list the payload's hash: its signature no longer verifies
    import hashlib

    manifest = json.loads((tmp_path / "ours" / "manifest.json").read_text())
    data = (tmp_path / "ours" / "model.joblib").read_bytes()
    manifest["files"]["model.joblib"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (tmp_path / "ours" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UntrustedFileError):
        genpqr.load(tmp_path / "ours")
    assert not marker.exists()
    (tmp_path / "plain").mkdir()
    with pytest.raises(IntegrityError, match="no valid manifest.json"):
        genpqr.load(tmp_path / "plain")


# ----------------------------------------------------------------------------- counterfactual results
def _same(a, b, where="result"):
    """Deep equality with types: arrays by dtype and value (NaN equal), objects by fields."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.dtype.kind == "O":
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                _same(x, y, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dict__"):
        _same(vars(a), vars(b), where)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, (where, a, b)


def _zip_has_no_pickle(path):
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            np.load(archive.open(name), allow_pickle=False)  # raises on an object array


def test_counterfactual_result_round_trips_exactly_without_pickle(fitted, tmp_path):
    labels = fitted.encoder_.labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fitted.counterfactual(reward_change={labels[1]: -0.5}, initial=0, horizon=5, n_boot=3,
                                       random_state=0)
    path = tmp_path / "cf.joblib"
    result.save(path)
    _zip_has_no_pickle(path)
    back = load_counterfactual(path)
    _same(result, back)
    assert back.to_frame().equals(result.to_frame()) and back.describe() == result.describe()
    assert repr(back) == repr(result)


def test_structural_counterfactual_result_round_trips(tmp_path):
    """The structural route: delta-method intervals, the other route's answer, support."""
    from genpqr.envs._rust import bus_engine, simulate_buses
    from genpqr.structural._estimation import fit_structural
    from genpqr.structural._kernels import IncrementKernel

    truth = bus_engine(n_states=40, beta=0.95, rc=5.0, theta11=30.0, theta3=(0.3919, 0.5953, 0.0128))
    panel = simulate_buses(truth, n_buses=37, n_periods=117, random_state=0)
    X = np.zeros((40, 2, 2))
    X[:, 0, 0], X[:, 0, 1] = 1.0, -0.001 * np.arange(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action("replace"), gamma=0.95, q_model="exact", n_states=40,
                       transition_model=IncrementKernel(2, "replace")).fit(panel.transitions)
        sf = fit_structural(model, X, names=["RC", "theta11"])
        result = model.counterfactual(parameter_change={"RC": "*1.5"}, structural=sf, check_normalization=False,
                                      warn=False)
    assert result.delta is not None and result.alternative is not None
    result.save(tmp_path / "cf")
    _zip_has_no_pickle(tmp_path / "cf")
    back = load_counterfactual(tmp_path / "cf")
    _same(result, back)
    assert back.to_frame().equals(result.to_frame())


def test_counterfactual_results_of_older_genpqr_need_trust(fitted, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fitted.counterfactual(reward_change={fitted.encoder_.labels[1]: -0.5})
    joblib.dump(result, tmp_path / "old.joblib")
    with pytest.raises(UntrustedFileError, match="trusted=True"):
        load_counterfactual(tmp_path / "old.joblib")
    assert load_counterfactual(tmp_path / "old.joblib", trusted=True).to_frame().equals(result.to_frame())
    marker = tmp_path / "marker"
    (tmp_path / "evil.joblib").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UntrustedFileError):
        load_counterfactual(tmp_path / "evil.joblib")
    assert not marker.exists()
    result.save(tmp_path / "cf")
    good = (tmp_path / "cf").read_bytes()
    for name, data in (("cut", good[: len(good) // 2]), ("empty", b""), ("text", b"hello\n")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(IntegrityError):
            load_counterfactual(tmp_path / name)
    write_signed({"x": 1}, tmp_path / "model-like", holds="GenPQR")
    with pytest.raises(TypeError, match="holds a GenPQR, not a CounterfactualResult"):
        load_counterfactual(tmp_path / "model-like")
    assert isinstance(result, CounterfactualResult)


# ----------------------------------------------------------------------------- import paths
def import_object(path, what):
    """A learner from its import path, as ``genpqr fit --policy-model/--q-model`` makes it."""
    from genpqr.registry import DENSITIES, POLICY_MODELS, Q_MODELS, import_learner

    registry = {"policy model": POLICY_MODELS, "Q model": Q_MODELS, "density": DENSITIES}[what]
    return import_learner(path, what, registry.learner[1], registry.param)


@pytest.mark.parametrize("path, what, phrase", [
    ("tests.estimator.test_persistence:evil_function", "policy model", "is a function, not a class"),
    ("os:getcwd", "Q model", "is a function, not a class"),
    ("os:path", "policy model", "is a module, not a class"),
    ("os:environ", "Q model", "an object of type _Environ, not a class"),
    ("tests.estimator.test_persistence:NotAQModel", "Q model", "lacks predict()"),
    ("sklearn.linear_model:Ridge", "policy model", "lacks predict_proba()"),
    ("sklearn.linear_model:LogisticRegression", "density", "lacks log_prob(), sample()"),
    ("sklearn.pipeline:Pipeline", "policy model", "cannot be made with no arguments"),
    ("tests.estimator.test_persistence", "Q model", "must look like package.module:Class"),
])
def test_import_paths_accept_only_learner_classes(path, what, phrase, tmp_path, monkeypatch):
    from genpqr.app.flags import console_text

    monkeypatch.setenv("GENPQR_TEST_MARKER", str(tmp_path / "marker"))
    flag = "--q-model (config key q_model)" if what == "Q model" else "--policy-model (config key policy_model)"
    with pytest.raises(ValueError) as info:
        import_object(path, what)
    assert re.match(rf"^{flag.replace('(', '[(]').replace(')', '[)]')}: .*{phrase[:12]}", console_text(info.value))
    assert str(info.value).startswith(flag.split()[0][2:].replace("-", "_") + ": ")  # the API names the parameter
    assert not (tmp_path / "marker").exists()


def test_import_paths_make_learner_classes():
    from sklearn.linear_model import LogisticRegression, Ridge

    from genpqr.actions import LinearGaussianDensity

    assert isinstance(import_object("sklearn.linear_model:Ridge", "Q model"), Ridge)
    assert isinstance(import_object("sklearn.linear_model:LogisticRegression", "policy model"), LogisticRegression)
    assert isinstance(import_object("genpqr.actions._densities:LinearGaussianDensity", "density"), LinearGaussianDensity)


# ----------------------------------------------------------------------------- what remains pickled
def test_pickled_parts_measures_the_saved_model(fitted, tmp_path):
    parts = pickled_parts(fitted)
    assert parts["attribute"].iloc[-1] == "(all)" and parts["share"].iloc[-1] == 1.0
    whole = parts.iloc[-1]
    fitted.save(tmp_path / "m")
    size = (tmp_path / "m").stat().st_size
    assert 0.8 < (whole["array_bytes"] + whole["object_bytes"]) / size < 1.25
    assert "training_data_" not in set(parts["attribute"])
    assert "training_data_" in set(pickled_parts(fitted, include_data=True)["attribute"])
    assert "genpqr.stage2._stages:ExactStage2" in parts.set_index("attribute").loc["stage2_", "classes"]


def test_read_model_and_read_signed_are_the_same_check(fitted, tmp_path):
    fitted.save(tmp_path / "m")
    assert read_model(tmp_path / "m").gamma == read_signed(tmp_path / "m", holds="GenPQR").gamma
