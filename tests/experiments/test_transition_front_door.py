"""benchmarks/transition_front_door.py runs ``genpqr fit`` end to end on a small data set and prints its table."""

import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "transition_front_door.py"


def test_small_front_door(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("transition_front_door", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    keep = tmp_path / "runs"
    rows = script.main(["--episodes", "100", "--flags", "auto,counts", "--keep", str(keep)])
    out = capsys.readouterr().out
    assert "| transition flag | transition model used | seconds | peak RSS (MB) | policy TV under the true kernel |" in out
    assert [r["flag"] for r in rows] == ["auto", "counts"]
    assert rows[0]["model"] in ("counts", "shrinkage", "lowrank")
    assert rows[1]["model"].startswith("counts")
    for r in rows:
        assert np.isfinite(r["tv"]) and 0.0 <= r["tv"] <= 1.0
        assert r["seconds"] > 0 and r["rss_mb"] > 0
        assert (keep / f"fit-{r['flag']}" / "rewards.csv").is_file()
    assert not (keep / "true.npy").exists()


def test_icu_sepsis_loader_on_a_small_stand_in(tmp_path):
    """The ICU-Sepsis path on a made-up dynamics file of the same layout (the real one is not needed)."""
    import io
    import zipfile

    spec = importlib.util.spec_from_file_location("transition_front_door", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rng = np.random.default_rng(0)
    L, K = 6, 4  # live states, then death, discharge, absorbing
    P = rng.dirichlet(np.ones(L + 2), size=(L, K))
    P = np.concatenate([np.concatenate([P, np.zeros((L, K, 1))], axis=2), np.zeros((3, K, L + 3))])
    P[L:, :, -1] = 1.0
    expert = np.zeros((L + 3, K))
    expert[:L] = rng.dirichlet(np.ones(K), size=L)
    expert[:L, 0] = 0.0  # the clinicians never take action 0
    expert[:L] /= expert[:L].sum(axis=1, keepdims=True)
    d0 = np.r_[np.ones(L) / L, np.zeros(3)]
    buf = io.BytesIO()
    np.savez(buf, tx_mat=P, expert_policy=expert, d_0=d0)
    wheel = tmp_path / "stand_in-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("icu_sepsis/envs/assets/dynamics.npz", buf.getvalue())
    mdp, behaviour, initial, facts = script.icu_sepsis_mdp(wheel)
    assert mdp.n_states == L and mdp.n_actions == K and behaviour.shape == (L, K) and initial.shape == (L,)
    assert facts["ends_absorbing"] and facts["live_to_715"] == 0.0 and facts["expert_zeros"] == L
    assert np.allclose(mdp.kernel.dense().sum(axis=2), P[:L, :, :L].sum(axis=2))
    visits, frame = script.write_data(mdp, behaviour, 200, 0, tmp_path / "data.csv", horizon=5, initial=initial)
    assert visits.sum() == len(frame) and not (frame["action"] == 0).any()
    ends = frame.groupby("patient").tail(1)
    assert frame["terminated"].sum() == ends["terminated"].sum() > 0  # only a stay's last row ends it
    assert frame.groupby("patient").size().max() <= 5
