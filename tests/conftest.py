import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from threadpoolctl import threadpool_limits

from genpqr import normalization as N

os.environ.setdefault("MPLBACKEND", "Agg")
# genpqr signs the files it writes with a per-user key (genpqr.estimator._manifest); tests use their own key,
# never the user's ~/.config/genpqr (subprocesses of a test inherit it)
os.environ.setdefault("GENPQR_CONFIG_DIR", tempfile.mkdtemp(prefix="genpqr-test-config-"))
# property tests: the same examples on every machine and run (derandomize), no time limits (CI
# machines differ in speed), no example database written into the checkout
settings.register_profile("genpqr", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "genpqr"))
# tests run two xdist workers on two cores: one BLAS thread each (set by `make test` too)
threadpool_limits(1)


def all_normalizations(S: int, K: int, rng: np.random.Generator):
    """Every normalization kind the library offers, with random parameters, on S states."""
    mu_table = rng.dirichlet(np.ones(K), size=S)
    mu_vec = rng.dirichlet(np.ones(K))
    g = rng.normal(size=S)
    h = rng.normal(size=S)
    anchors = rng.integers(0, K, size=S)
    return {
        "anchor": N.anchor_action(0),
        "anchor-last-g": N.anchor_action(K - 1, g=g),
        "anchor-callable-g": N.anchor_action(1 % K, g=lambda s: np.cos(s[:, 0])),
        "state-anchor": N.state_anchor(anchors),
        "state-anchor-callable": N.state_anchor(lambda s: (s[:, 0].astype(int) % K), g=g),
        "mean-zero": N.mean_zero(),
        "mean-zero-g": N.mean_zero(g=g),
        "weighted-table": N.weighted(mu_table, g=g),
        "weighted-vector": N.weighted(mu_vec, g=1.5),
        "value-behavior": N.value(h),
        "value-uniform": N.value(h, mu=N.mean_zero()),
        "value-anchor-const": N.value(2.0, mu=N.anchor_action(0)),
        "behavior": N.behavior(g=g),
    }


ROOT = Path(__file__).resolve().parents[1]


def checkout_status():
    """``git status --porcelain`` of the checkout (changed tracked files and untracked files git
    does not ignore); ``None`` outside a git checkout (an unpacked sdist)."""
    try:
        proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


@pytest.fixture
def checkout_unchanged():
    """The test must leave the checkout as it found it: the documented commands and code blocks
    the doc tests run write into fresh folders, never into tracked files (or new files beside them)."""
    before = checkout_status()
    yield
    after = checkout_status()
    if before is not None and after is not None:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        assert not changed, ("the checkout changed while this test ran (a documented command wrote into it; "
                             f"or it was edited meanwhile): {changed}")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def dask_client():
    """A real local Dask cluster: two single-threaded worker processes (shared by the
    distributed tests of one pytest process)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c
