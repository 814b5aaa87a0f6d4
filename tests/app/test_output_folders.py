"""Outputs are transactions (issue 20): every command that writes a folder builds it aside and
swaps it in with ``manifest.json`` last (genpqr.estimator._manifest), readers refuse a folder that does not
match its manifest, and an experiment folder stays true to its manifest at every instant
(genpqr.experiments._folder).

Fault tests: a fit killed at each file boundary (a writer patched to raise between writes,
the clean-up switched off as under SIGKILL) leaves the earlier fit intact or the new one
complete, never a mix, and the counterfactual reader keeps working on it; a full disk (a
writer raising ``OSError(ENOSPC)``) gives a non-zero exit and one line naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from functools import partial
from pathlib import Path

import pandas as pd
import pytest

from genpqr.estimator import _manifest as M
from genpqr.app.cli import main
from genpqr.app.flags import console_text
from genpqr.exceptions import IntegrityError
from genpqr.experiments import _folder as F, _methods as methods_mod

from ..estimator.test_bad_inputs import base_frame

FLAGS = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", "0.9",
         "--cross-fit", "0", "--quiet"]


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so no command catches it."""


def snapshot(folder: Path) -> dict:
    """``{relative name: bytes (a link: its target)}`` of every file under ``folder``, genpqr's
    leftovers (hidden ``.partial``, ``.old``, ``.tmp`` names) left out."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not M.is_leftover(d)]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root) / name
            if not M.is_leftover(name):
                key = path.relative_to(folder).as_posix()
                out[key] = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return out


def fit(data, out, *extra, capsys=None) -> int:
    code = main(["fit", str(data), *FLAGS, "--out", str(out), *[str(e) for e in extra]])
    if capsys is not None:
        capsys.readouterr()
    return code


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.csv"
    base_frame().to_csv(path, index=False)
    features = pd.DataFrame({"state_index": [s for s in range(4) for _ in "ab"], "action": ["a", "b"] * 4,
                             "x": [float(s * (a == "b")) for s in range(4) for a in "ab"]})
    features.to_csv(tmp_path / "features.csv", index=False)
    return path


def one_line_error(stderr: str, prefix: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr and lines, stderr
    assert lines[-1].startswith(prefix), stderr
    return lines[-1]


# ------------------------------------------------------------------------------ the building block
def test_output_folder_replaces_an_earlier_output_as_a_whole(tmp_path):
    target = tmp_path / "out"
    with M.output_folder(target, kind="t", command=["genpqr", "x"]) as staging:
        (staging / "a.txt").write_text("first")
        (staging / "stale.txt").write_text("only in the first run")
    manifest = M.verify_folder(target, kind="t", require=["a.txt"])
    assert set(manifest["files"]) == {"a.txt", "stale.txt"} and manifest["command"] == ["genpqr", "x"]
    assert manifest["files"]["a.txt"]["size"] == 5 and M.manifest_trusted(manifest)
    with M.output_folder(target, kind="t") as staging:
        (staging / "a.txt").write_text("second")
    assert snapshot(target).keys() == {"a.txt", "manifest.json"} and (target / "a.txt").read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or earlier folder left beside it


def test_two_renames_where_the_exchange_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setattr(M, "exchange", lambda a, b: False)
    for text in ("first", "second"):
        with M.output_folder(tmp_path / "out", kind="t") as staging:
            (staging / "a.txt").write_text(text)
    assert (tmp_path / "out" / "a.txt").read_text() == "second" and len(list(tmp_path.iterdir())) == 1


def test_exchange_swaps_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    if not M.exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    assert (tmp_path / "b" / "x").read_text() == "a" and not (tmp_path / "a" / "x").exists()


TARGETS = {  # name: (make the target in tmp, check_target keywords, phrase of the ValueError or None)
    "absent": (lambda t: t / "new", {}, None),
    "empty": (lambda t: (t / "e").mkdir() or t / "e", {}, None),
    "leftovers only": (lambda t: (t / "e" / ".e.x1.partial").mkdir(parents=True) or t / "e", {}, None),
    "a foreign file": (lambda t: _file(t / "f" / "notes.txt"), {}, "holds files genpqr did not write (notes.txt)"),
    "a symlinked file": (lambda t: _link(t / "f" / "rewards.csv", t / "precious.csv"), {},
                         "holds files genpqr did not write (rewards.csv)"),
    "a symlink": (lambda t: _link(t / "link", t), {}, "is a symlink"),
    "a file": (lambda t: _file(t / "file") / "file", {}, "is a file"),
    "an input inside": (lambda t: t / "f", {"inputs": ["{t}/f/data.csv"]}, "holds an input of this run"),
    "a linked input inside": (lambda t: _link(t / "f" / "d.csv", t / "precious.csv"), {"inputs": ["{t}/f/d.csv"]},
                              "holds an input of this run"),
    "inside an input folder": (lambda t: (t / "parquet").mkdir() or t / "parquet" / "out",
                               {"inputs": ["{t}/parquet"]}, "lies inside the input folder"),
    "an output of another kind": (lambda t: _genpqr(t / "g", "experiment"), {"kind": "fit"},
                                  "holds a genpqr 'experiment' output"),
    "an output of its kind": (lambda t: _genpqr(t / "g", "fit"), {"kind": "fit"}, None),
    "its kind, a file added": (lambda t: _file(_genpqr(t / "g", "fit") / "notes.txt"), {"kind": "fit"},
                               "holds files genpqr did not write (notes.txt)"),
    "its kind, a file gone": (lambda t: _unlink(_genpqr(t / "g", "fit") / "a.txt").parent, {"kind": "fit"}, None),
    "its kind, a nested output": (lambda t: _genpqr(_genpqr(t / "g", "fit") / "cf", "counterfactual").parent,
                                  {"kind": "fit"}, None),
    "the working folder": (lambda t: Path("."), {}, "is the working folder"),
    "above the working folder": (lambda t: Path(".."), {}, "is the working folder or above it"),
    "no manifest, a nested output": (lambda t: _genpqr(t / "runs" / "fit1", "fit").parent, {},
                                     "holds files genpqr did not write (fit1)"),
}


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path.parent


def _link(path: Path, to: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not to.exists():
        to.write_text("precious")
    path.symlink_to(to)
    return path if path.name == "link" else path.parent


def _unlink(path: Path) -> Path:
    path.unlink()
    return path


def _genpqr(path: Path, kind: str) -> Path:
    with M.output_folder(path, kind=kind) as staging:
        (staging / "a.txt").write_text(kind)
    return path


@pytest.mark.parametrize("case", list(TARGETS))
def test_check_target(case, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    make, kwargs, phrase = TARGETS[case]
    target = make(tmp_path)
    kwargs = {k: [v.replace("{t}", str(tmp_path)) for v in val] if k == "inputs" else val for k, val in kwargs.items()}
    before = snapshot(tmp_path)
    if phrase is None:
        M.check_target(target, **kwargs)
        with M.output_folder(target, kind=kwargs.get("kind", "t"), inputs=kwargs.get("inputs", ())) as staging:
            (staging / "new.txt").write_text("new")
        assert snapshot(target).keys() == {"new.txt", "manifest.json"}
    else:
        with pytest.raises(ValueError, match="^target ") as info:  # the library names its parameter
            M.check_target(target, **kwargs)
        assert console_text(info.value).startswith("--out "), console_text(info.value)  # the command line, its flag
        assert phrase in str(info.value), str(info.value)
        with pytest.raises(ValueError):
            with M.output_folder(target, kind=kwargs.get("kind", "t"), inputs=kwargs.get("inputs", ())):
                raise AssertionError("refused before the block runs")
        assert snapshot(tmp_path) == before
    assert (tmp_path / "precious.csv").read_text() == "precious" if (tmp_path / "precious.csv").exists() else True


VERIFY = {  # name: (break the folder, phrase of the IntegrityError)
    "manifest gone": (lambda f: (f / "manifest.json").unlink(), "has no valid manifest.json"),
    "manifest not JSON": (lambda f: (f / "manifest.json").write_text("{"), "has no valid manifest.json"),
    "a file gone": (lambda f: (f / "a.csv").unlink(), "a.csv is missing"),
    "a file emptied": (lambda f: (f / "a.csv").write_bytes(b""), "a.csv does not match manifest.json"),
    "a file edited, same size": (lambda f: (f / "a.csv").write_text("2,1\n"), "a.csv does not match"),
    "a file added": (lambda f: (f / "parameters.csv").write_text("x"), "parameters.csv is not in its manifest.json"),
    "a folder added": (lambda f: (f / "sub").mkdir(), "sub/ is not in its manifest.json"),
    "a file replaced by a link": (lambda f: ((f / "a.csv").unlink(), (f / "a.csv").symlink_to(f / "b.csv")),
                                  "a.csv does not match"),
}


@pytest.mark.parametrize("case", list(VERIFY))
def test_verify_folder_names_the_file(case, tmp_path):
    folder = tmp_path / "out"
    with M.output_folder(folder, kind="t") as staging:
        (staging / "a.csv").write_text("1,2\n")
        (staging / "b.csv").write_text("3,4\n")
    (folder / ".out.leftover.tmp").write_text("a killed write's leftover")  # ignored
    (folder / "nested").mkdir()
    _genpqr(folder / "nested" / "cf", "counterfactual")  # a nested genpqr output: its own business
    M.verify_folder(folder, kind="t", require=["a.csv"])
    with pytest.raises(IntegrityError, match="holds a genpqr 't' output, not a 'fit' output"):
        M.verify_folder(folder, kind="fit")
    with pytest.raises(IntegrityError, match="c.csv is not in its manifest.json"):
        M.verify_folder(folder, require=["c.csv"])
    VERIFY[case][0](folder)
    with pytest.raises(IntegrityError) as info:
        M.verify_folder(folder, kind="t")
    assert VERIFY[case][1] in str(info.value) and str(folder) in str(info.value)


# ------------------------------------------------------------------------------ genpqr fit: kills
def _kill_hooks(monkeypatch, kill_at):
    """Wrap every writer of a fit folder; the ``kill_at``-th call (0-based) raises Killed before
    it writes (None: record only). Returns the list of calls made."""
    import genpqr.app.report as report
    from genpqr.app.config import FitConfig
    from genpqr.estimator import GenPQR

    calls = []

    def wrap(name, original):
        def hooked(*args, **kwargs):
            if len(calls) == kill_at:
                raise Killed(name)
            calls.append(name)
            return original(*args, **kwargs)
        return hooked

    for owner, attr in ((GenPQR, "save"), (pd.DataFrame, "to_csv"), (FitConfig, "to_json"), (report, "write_report"),
                        (M, "write_manifest"), (M, "exchange")):
        monkeypatch.setattr(owner, attr, wrap(f"{getattr(owner, '__name__', owner)}.{attr}", getattr(owner, attr)))
    return calls


def test_a_fit_killed_at_each_file_boundary_leaves_the_earlier_fit_or_the_new_one(data, tmp_path, monkeypatch,
                                                                                  capsys):
    """The earlier fit A (no features), the new fit B (with --features, five files): killed
    before each of B's writes, the folder is A byte for byte; never killed, it is B. The
    counterfactual reader answers on whichever is there; a kill leaves only hidden leftovers."""
    out = tmp_path / "fit"
    assert fit(data, out, "--normalization", "anchor:a", capsys=capsys) == 0
    earlier = snapshot(out)
    new_flags = ["--normalization", "anchor:b", "--features", tmp_path / "features.csv"]
    (tmp_path / "dry").mkdir()  # an existing target: the swap is an exchange, as over `out`
    with monkeypatch.context() as m:
        calls = _kill_hooks(m, None)
        assert fit(data, tmp_path / "dry", *new_flags, capsys=capsys) == 0
    assert len(calls) >= 7, calls  # model, rewards, parameters, config, report, manifest, swap
    for kill_at in range(len(calls) + 1):
        shutil.rmtree(out)
        for name, content in earlier.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(content)
        with monkeypatch.context() as m:
            _kill_hooks(m, kill_at)
            m.setattr(M.shutil, "rmtree", lambda *a, **k: None)  # SIGKILL: no clean-up
            if kill_at < len(calls):
                with pytest.raises(Killed):
                    fit(data, out, *new_flags)
            else:
                assert fit(data, out, *new_flags) == 0
        capsys.readouterr()
        now = snapshot(out)
        if kill_at < len(calls):
            assert now == earlier, (kill_at, calls[kill_at], sorted(now))
        else:
            assert now.keys() == earlier.keys() | {"parameters.csv"} and now != earlier
        M.verify_folder(out, kind="fit")
        assert main(["counterfactual", str(out), "--reward-change", "b=-0.5", "--bootstrap", "0", "--quiet",
                     "--out", str(tmp_path / "cf")]) == 0, (kill_at, capsys.readouterr().err)
        capsys.readouterr()
    leftovers = [p.name for p in tmp_path.iterdir() if M.is_leftover(p.name)]
    assert leftovers and all(p.startswith(".fit.") for p in leftovers)
    assert fit(data, out, "--normalization", "anchor:a", capsys=capsys) == 0  # leftovers do not block a rerun
    assert snapshot(out).keys() == earlier.keys()


def test_a_killed_fit_cleans_up_after_itself(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    with monkeypatch.context() as m:
        _kill_hooks(m, 2)
        with pytest.raises(Killed):
            fit(data, out, "--normalization", "anchor:a")
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "features.csv"]


def test_a_full_disk_while_fitting_is_a_named_error_and_the_earlier_fit_stays(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    assert fit(data, out, "--normalization", "anchor:a", capsys=capsys) == 0
    earlier = snapshot(out)
    for owner, attr, name in ((pd.DataFrame, "to_csv", "rewards.csv"), (M, "write_manifest", "manifest.json")):
        with monkeypatch.context() as m:
            m.setattr(owner, attr, _no_space)
            code = fit(data, out, "--normalization", "anchor:b")
        message = one_line_error(capsys.readouterr().err, "genpqr fit: error: ")
        assert code == 2 and "No space left on device" in message and f"{out / name}" in message, message
        assert f"{out} is unchanged" in message and snapshot(out) == earlier
        assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "features.csv", "fit"]


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_out_of_core_fit_is_a_transaction_too(tmp_path, monkeypatch, capsys):
    path = tmp_path / "data.parquet"
    base_frame().assign(state=lambda f: f.state.astype("int64")).to_parquet(path)
    out = tmp_path / "fit"
    argv = [path, "--normalization", "anchor:a", "--chunk-rows", "50", "--q-model", "exact"]
    assert fit(*argv[:1], out, *argv[1:], capsys=capsys) == 0
    assert set(M.verify_folder(out, kind="fit")["files"]) == {"model.joblib", "rewards.csv", "config.json"}
    earlier = snapshot(out)
    with monkeypatch.context() as m:
        m.setattr(pd.DataFrame, "to_csv", _no_space)
        assert fit(*argv[:1], out, *argv[1:]) == 2
    assert "rewards.csv" in one_line_error(capsys.readouterr().err, "genpqr fit: error: ")
    assert snapshot(out) == earlier


# ------------------------------------------------------------------------------ counterfactual, demo
def test_counterfactual_output_is_a_transaction_and_the_fit_stays_valid(data, tmp_path, capsys):
    out = tmp_path / "fit"
    assert fit(data, out, "--normalization", "anchor:a", capsys=capsys) == 0
    argv = ["counterfactual", str(out), "--reward-change", "b=-0.5", "--bootstrap", "0", "--quiet"]
    for _ in range(2):  # the default --out FIT/counterfactual, twice
        assert main(argv) == 0
    capsys.readouterr()
    assert set(M.verify_folder(out / "counterfactual", kind="counterfactual")["files"]) == {
        "summary.csv", "states.csv", "support.csv", "identification.json", "counterfactual.npz", "welfare.csv"}
    M.verify_folder(out, kind="fit")  # a nested genpqr output does not break the fit folder
    for target, phrase in ((out, "holds an input of this run"), (tmp_path, "holds an input of this run"),
                           (data, "is a file")):
        assert main([*argv, "--out", str(target)]) == 2
        assert phrase in one_line_error(capsys.readouterr().err, "genpqr counterfactual: error: ")
    assert fit(data, out, "--normalization", "anchor:b", capsys=capsys) == 0  # replaces the fit and its counterfactual
    assert not (out / "counterfactual").exists()


def test_demo_runs_twice_into_the_same_folder(tmp_path, capsys):
    argv = ["demo", "--out", str(tmp_path / "demo"), "--states", "6", "--episodes", "60"]
    assert main(argv) == 0 and main(argv) == 0
    assert set(M.verify_folder(tmp_path / "demo", kind="demo")["files"]) == {"demo.png"}
    assert f"Figure written to {tmp_path / 'demo' / 'demo.png'}" in capsys.readouterr().out


# ------------------------------------------------------------------------------ experiments
def _fake_deeppqr(monkeypatch, fail_seeds=()):
    from ..experiments.test_experiments import _fake

    monkeypatch.setitem(methods_mod.METHODS, "DeepPQR", _fake("DeepPQR", fail_seeds=fail_seeds))


def _experiment(out, seeds=1) -> int:
    return main(["experiment", "exp2", "--tiny", "--seeds", str(seeds), "--methods", "DeepPQR", "--out", str(out),
                 "--quiet"])


def _no_space_for(name, original, limit=0):
    """``atomic_write_bytes`` that fails for ``name`` after ``limit`` successful writes of it."""
    count = [0]

    def write(path, chunks):
        if Path(path).name == name:
            count[0] += 1
            if count[0] > limit:
                raise OSError(errno.ENOSPC, "No space left on device")
        return original(path, chunks)
    return write


@pytest.mark.parametrize("seeds, saved", [(1, 0), (2, 1)])
def test_experiment_accounts_for_every_task_when_rows_cannot_be_saved(seeds, saved, tmp_path, monkeypatch, capsys):
    _fake_deeppqr(monkeypatch)
    out = tmp_path / "exp"
    with monkeypatch.context() as m:
        m.setattr(F, "atomic_write_bytes", _no_space_for("results.csv", F.atomic_write_bytes, limit=saved))
        assert _experiment(out, seeds) == 1
    captured = capsys.readouterr()
    assert (f"exp2-tiny: {seeds} task(s): {saved} run, 0 already in {out}/results.csv, 0 failed, "
            f"{seeds - saved} finished but not saved") in captured.out
    assert captured.err.count("NOT SAVED seed") == seeds - saved and "No space left on device" in captured.err
    assert f"{out / 'results.csv'}" in captured.err
    M.verify_folder(out, kind="experiment")  # what was saved is whole and listed
    assert _experiment(out, seeds) == 0  # the rerun saves the rest
    assert f"{seeds - saved} run, {saved} already in" in capsys.readouterr().out
    assert len(pd.read_csv(out / "results.csv")) == seeds
    M.verify_folder(out, kind="experiment", require=["results.csv", "config.json"])


def test_experiment_on_a_full_disk_is_a_named_error(tmp_path, monkeypatch, capsys):
    _fake_deeppqr(monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(F, "atomic_write_bytes", _no_space)
        assert _experiment(tmp_path / "exp") == 2
    message = one_line_error(capsys.readouterr().err, "genpqr experiment: error: ")
    assert f"cannot write {tmp_path / 'exp' / 'config.json'}: No space left on device" in message


def test_summary_counts_every_task(tmp_path, monkeypatch):
    from genpqr.experiments import get_config, run_experiment

    _fake_deeppqr(monkeypatch, fail_seeds=(1,))
    config = get_config("exp2", tiny=True).with_methods(["DeepPQR"])
    with monkeypatch.context() as m:
        m.setattr(F, "atomic_write_bytes", _no_space_for("results.csv", F.atomic_write_bytes, limit=1))
        summary = run_experiment(config, [0, 1, 2], tmp_path, progress=False)
    parts = (summary.executed, summary.skipped, summary.failures, summary.unsaved)
    assert [len(p) for p in parts] == [1, 0, 1, 1] and summary.n_tasks == 3 and not summary.ok


def test_a_killed_row_update_leaves_a_folder_that_verifies_and_resumes(tmp_path, monkeypatch):
    """Killed between the manifest naming the next results.csv and the file's rename (and
    between the rename and the final manifest): the folder verifies, the next run settles it."""
    out = tmp_path / "exp"
    F.update_folder(out.mkdir() or out, {"results.csv": b"h\r\n1\r\n"})
    for kill_after in (0, 1):  # atomic writes done before the kill: 0 = the pending manifest only
        with monkeypatch.context() as m:
            m.setattr(F, "atomic_write_bytes", partial(_kill_after, kill_after, [0], F.atomic_write_bytes))
            m.setattr(M, "atomic_write_bytes", partial(_kill_after, 1, [0], M.atomic_write_bytes))
            with pytest.raises(Killed):
                F.update_folder(out, {"results.csv": b"h\r\n1\r\n2\r\n"})
        manifest = M.verify_folder(out, kind="experiment")
        assert "next" in manifest["files"]["results.csv"]
        F.open_results_folder(out)  # settles it
        settled = M.read_manifest(out)["files"]["results.csv"]
        assert "next" not in settled and settled["size"] == (out / "results.csv").stat().st_size
    assert (out / "results.csv").read_bytes() == b"h\r\n1\r\n2\r\n"


def _kill_after(n, count, original, path, chunks):
    if count[0] >= n:
        raise Killed(str(path))
    count[0] += 1
    return original(path, chunks)


def test_report_lists_its_files_in_the_manifest(tmp_path, monkeypatch, capsys):
    _fake_deeppqr(monkeypatch)
    out = tmp_path / "exp"
    assert _experiment(out) == 0 and main(["report", str(out)]) == 0
    capsys.readouterr()
    files = M.verify_folder(out, kind="experiment")["files"]
    assert {"results.csv", "config.json", "results.md", "exp2-tiny_methods.png"} <= set(files)
    assert _experiment(out) == 0  # the report's files are part of the folder a resumed run accepts
    (out / "results.csv").write_bytes((out / "results.csv").read_bytes() + b"exp2-tiny,x,9,DeepPQR\r\n")
    for argv, prefix in ((["report", str(out)], "genpqr report: error: "),
                         (["experiment", "exp2", "--tiny", "--seeds", "1", "--methods", "DeepPQR", "--out", str(out),
                           "--quiet"], "genpqr experiment: error: ")):
        assert main(argv) == 2
        assert "results.csv does not match manifest.json" in one_line_error(capsys.readouterr().err, prefix)


def test_continuous_experiment_replaces_its_folder_as_a_whole(tmp_path, monkeypatch, capsys):
    import genpqr.experiments._continuous as C

    frame = pd.DataFrame({"n": [1], "method": ["m"]})
    frame.attrs["config"] = {"n_values": [1]}
    monkeypatch.setattr(C, "run_continuous_experiment", lambda **kw: frame)
    monkeypatch.setattr(C, "write_report", lambda out: (Path(out) / "results.md").write_text("table"))
    out = tmp_path / "cont"
    argv = ["experiment", "continuous", "--tiny", "--seeds", "1", "--out", str(out), "--quiet"]
    assert main(argv) == 0 and main(argv) == 0
    assert set(M.verify_folder(out, kind="continuous-experiment")["files"]) == {"results.csv", "config.json",
                                                                               "results.md"}
    assert json.loads((out / "config.json").read_text()) == {"n_values": [1]}
    _fake_deeppqr(monkeypatch)
    assert _experiment(out) == 2  # a discrete sweep does not resume into it
    assert "holds a genpqr 'continuous-experiment' output" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["cont"]
