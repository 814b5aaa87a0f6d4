"""Every exp2 method gives bit-identical results for a seed on the same machine: twice in one
process, and once more in a fresh process with another hash seed (same thread count).

The closed-form LSTD rows are checked within one process only: their linear solve goes
through OpenBLAS's LAPACK, whose last bits (about 1e-13 relative) depend on how the library
was initialized (threads at start-up, libraries loaded before it), not only on the current
thread count; see docs/benchmarks.md."""

import json
import os
import subprocess
import sys
import warnings

import pytest

from genpqr.envs import make_synthetic_data
from genpqr.experiments._configs import EXPERIMENTS
from genpqr.experiments._methods import get_method

#: exp2's rows, and the closed-form rows (in-process only, see the module docstring).
EXP2 = tuple(EXPERIMENTS["exp2"].methods)
METHODS = EXP2 + ("GenPQR (BC, LSTD)", "GenPQR (BC, LSTD, RFF)", "GenPQR (BC wd, LSTD, RFF)", "GenPQR (default path)")
_FIELDS = ("reward_mse", "reward_corr", "policy_nll")


def run_methods(methods, seed=2, n_train=40):
    """``{method: {field: float.hex(value)}}`` at the methods' tiny settings (hex: every bit shows)."""
    data = make_synthetic_data(seed, n_train, n_test=30)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in methods:
            method = get_method(name)
            row = method(data, seed, method.resolve(tiny=True))
            out[name] = {f: float(row[f]).hex() for f in _FIELDS}
    return out


@pytest.mark.filterwarnings("ignore")
def test_each_exp2_method_is_bit_for_bit_reproducible(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("lightgbm")
    first = run_methods(METHODS)
    second = run_methods(METHODS)
    assert first == second
    # a fresh interpreter with another hash seed (set and dict orders differ), same thread count
    script = f"import json, sys; sys.path.insert(0, {os.getcwd()!r}); from tests.experiments.test_reproducibility import " \
             f"run_methods, EXP2; print(json.dumps(run_methods(EXP2)))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # thread settings inherited: the same counts
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.getcwd(), "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    diff = {m: (first[m], fresh[m]) for m in EXP2 if first[m] != fresh[m]}
    assert not diff, diff
