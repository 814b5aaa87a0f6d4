"""Thin transitions through the front door: ``genpqr fit`` run as a user runs it on the clustered MDP.

The MDP and its logged policy are those of ``benchmarks/transition_models.py`` (700 states in 20
clusters, 25 actions, gamma 0.99, the soft-optimal policy of a known reward). Episodes of at most
20 steps are written to a CSV (columns ``patient, t, state, action, terminated``; state and action
as integer codes) and fitted by the command line, in a child process, as

    genpqr fit DATA.csv --episode patient --time t --state state --action action --terminated terminated
        --gamma 0.99 --normalization anchor:0 --out DIR [--transition FLAG]

once per flag: none (the default, ``auto``), ``counts`` and ``true`` (the true kernel written to
``true.npy``). For each run the table gives the transition model the fit used (from its console
output), the child's wall time and peak resident memory (``os.wait4``), and the visit-weighted
total-variation distance between the logged policy and the soft-optimal policy of the reward in
``rewards.csv`` re-solved under the true kernel. ``rewards.csv`` has one row per state label; an
integer state column is its own state index, so the label is the MDP's state. A state never logged
has no observed choice: it weighs 0 in the distance (the weights are the data's visits), and its
reward is the fit's own (a row marked ``visited`` False) or, when the fit has no row for it, 0.

    python benchmarks/transition_front_door.py [--episodes 5000] [--seed 0] [--keep DIR]
        [--flags auto,counts,true] [--horizon 20] [--repeat 1] [--icu-sepsis PATH | --icu-sepsis-like]

Besides the table's wall seconds, the child's CPU seconds (user + system, steadier than wall time
on a loaded machine) and both as ratios to the counts run (the floor the transition selection is
measured against); ``--repeat N`` runs each flag N times in turn and reports the medians.

With ``--icu-sepsis-like`` the MDP is a stand-in with ICU-Sepsis' layout built from ``--seed``
without its data (:func:`icu_sepsis_like_mdp`: 713 live states, 25 actions, the clinicians never
acting in about half of the cells, a kernel estimated from a cohort as ICU-Sepsis' was). With
``--icu-sepsis PATH`` the MDP is ICU-Sepsis instead (Choudhary et al. 2024, MIT licence;
``pip download --no-deps icu-sepsis==2.0.1`` gives the wheel; PATH is the wheel or its
``dynamics.npz``, read without installing the package): 716 states, of which 0..712 are live patient
states and 713 (death), 714 (discharge) and 715 (absorbing) end a stay, 25 actions, and the
clinicians' policy ``expert_policy`` estimated from MIMIC-III. The kernel is restricted to the 713
live states; the moves into 713-715 are its missing mass, a stay's termination (``terminated`` 1 on
its last row). Stays start from ``d_0`` and follow ``expert_policy``; one cut at the horizon is
truncated. The logged policy of the distance is ``expert_policy`` on the live states.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from genpqr import stage2
from genpqr.envs._tabular import simulate_tabular

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transition_models import clustered_mdp, visit_weighted_tv  # noqa: E402  (benchmarks/ is the script's folder)

FLAGS = ("auto", "counts", "true")
COMMAND = ["--episode", "patient", "--time", "t", "--state", "state", "--action", "action", "--terminated",
           "terminated", "--gamma", "0.99", "--normalization", "anchor:0"]


def load_dynamics(path):
    """The arrays of ICU-Sepsis' ``dynamics.npz``, from the wheel (a zip) or from the file itself."""
    path = Path(path)
    if zipfile.is_zipfile(path) and path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            raw = wheel.read("icu_sepsis/envs/assets/dynamics.npz")
    else:
        raw = path.read_bytes()
    with np.load(io.BytesIO(raw)) as npz:
        return {k: npz[k] for k in npz.files}


def icu_sepsis_mdp(path, gamma=0.99):
    """``(TabularMDP, expert policy, initial distribution, facts)`` on ICU-Sepsis' live states: the
    kernel (713, 25, 713) is the full one restricted to them, its missing mass the termination.
    The last three states (713 death, 714 discharge, 715 absorbing) are the ones that end a stay."""
    d = load_dynamics(path)
    P, expert, d0 = d["tx_mat"], d["expert_policy"], d["d_0"]
    L = P.shape[0] - 3
    absorbing = bool(np.allclose(P[L:, :, -1], 1.0))  # 713, 714 and 715 all move to 715
    facts = {"states": P.shape[0], "actions": P.shape[1], "ends_absorbing": absorbing,
             "live_to_715": float(P[:L, :, L + 2].max()), "initial_off_live": float(d0[L:].sum()),
             "initial_zero": int(np.sum(d0[:L] == 0)), "expert_zeros": int(np.sum(expert[:L] == 0)),
             "states_with_zeros": int(np.sum((expert[:L] == 0).any(axis=1)))}
    behaviour = expert[:L] / expert[:L].sum(axis=1, keepdims=True)
    mdp = stage2.TabularMDP.create(np.ascontiguousarray(P[:L, :, :L]), gamma, n_actions=P.shape[1])
    return mdp, behaviour, d0[:L] / d0[:L].sum(), facts


def icu_sepsis_like_mdp(random_state=0, n_live=713, n_actions=25, cohort=250_000, gamma=0.99):
    """``(TabularMDP, clinicians' policy, initial distribution)``: a stand-in with ICU-Sepsis' layout,
    built without its data (``--icu-sepsis-like``). 713 live states ordered by a severity in [0, 1),
    25 actions (5 fluid x 5 vasopressor levels, of intensity ``(fluid + vaso) / 8``); death and
    discharge end a stay (the kernel's missing mass, about 12% a step). The clinicians act in about
    half of each state's actions (intense ones where severity is high) and never in the others.
    Each (state, action) has latent next-state rows over the 40 states nearest in severity, tilted
    toward healthier ones by an action effect that varies by state. As ICU-Sepsis' kernel was, the
    kernel is then estimated from a cohort of about ``cohort`` moves: a cell where the clinicians
    act holds the frequencies of its moves in the cohort (at least one), a cell where they never do
    the average of its state's other rows."""
    rng = np.random.default_rng(random_state)
    S, K, width = n_live, n_actions, 40
    severity = np.sort(rng.random(S))
    intensity = np.divmod(np.arange(K), 5)[0] / 8.0 + np.divmod(np.arange(K), 5)[1] / 8.0
    logit = (7.5 * (severity[:, None] - 0.5) * (2 * intensity[None, :] - 1) + 0.1
             - 1.5 * np.abs(intensity[None, :] - severity[:, None]))
    acts = rng.random((S, K)) < 1.0 / (1.0 + np.exp(-logit))
    acts[np.arange(S), rng.integers(0, K, S)] = True
    expert = np.where(acts, rng.gamma(0.6, size=(S, K)) + 1e-3, 0.0)
    expert /= expert.sum(axis=1, keepdims=True)
    start = np.clip(np.arange(S) - width // 2, 0, S - width)
    support = start[:, None] + np.arange(width)  # (S, width)
    base = rng.dirichlet(np.full(width, 0.3), size=S)
    effect = rng.normal(0.0, 0.6, (S, K)) + 1.5 * (intensity[None, :] - 0.4) * (severity[:, None] - 0.3)
    step = severity[support] - severity[:, None]  # (S, width)
    tilt = base[:, None, :] * np.exp(-8.0 * effect[:, :, None] * step[:, None, :])
    tilt /= tilt.sum(axis=2, keepdims=True)
    death = np.clip((0.02 + 0.15 * severity[:, None] ** 2) * np.exp(-0.5 * effect), 0.0, 0.5)
    home = np.broadcast_to(0.12 * (1.0 - severity[:, None]) ** 2, (S, K))
    latent = np.concatenate([tilt * (1.0 - death - home)[:, :, None], death[:, :, None], home[:, :, None]], axis=2)
    n = np.where(acts, np.maximum(rng.poisson(rng.gamma(1.0, size=S)[:, None] * cohort / S * expert), 1), 0)
    P = np.zeros((S, K, S))
    for s in range(S):
        taken = np.flatnonzero(n[s])
        draws = np.stack([rng.multinomial(n[s, a], latent[s, a] / latent[s, a].sum()) / n[s, a] for a in taken])
        P[s, taken[:, None], support[s]] = draws[:, :width]  # the cohort's moves into death or discharge end it
        P[s, n[s] == 0] = P[s, taken].mean(axis=0)
    initial = rng.dirichlet(np.full(S, 0.5))
    return stage2.TabularMDP.create(P, gamma, n_actions=K), expert, initial


def write_data(mdp, behaviour, n_episodes, seed, path, horizon=20, initial=None):
    """Simulate ``n_episodes`` episodes and write the CSV; returns the per-state visits (S,) and the rows."""
    import pandas as pd

    data = simulate_tabular(mdp, behaviour, n_episodes=n_episodes, horizon=horizon, initial=initial,
                            random_state=seed)
    s = data.states[:, 0].astype(np.int64)
    frame = pd.DataFrame({"patient": data.episode_ids, "t": data.timesteps, "state": s, "action": data.actions,
                          "terminated": data.terminated.astype(int)})
    frame.to_csv(path, index=False)
    return np.bincount(s, minlength=mdp.n_states).astype(float), frame


#: a small process between this one and ``genpqr fit``: a child's peak RSS counts the memory of the
#: process it was started from (Linux carries it over ``exec``), so the child of a fresh, small
#: interpreter is measured, by ``os.wait4``; it writes "seconds peak_kib cpu_seconds" to its first argument.
LAUNCHER = ("import os, subprocess, sys, time; t0 = time.perf_counter(); child = subprocess.Popen(sys.argv[2:]); "
            "_, status, usage = os.wait4(child.pid, 0); "
            "open(sys.argv[1], 'w').write(f'{time.perf_counter() - t0} {usage.ru_maxrss} "
            "{usage.ru_utime + usage.ru_stime}'); "
            "sys.exit(os.waitstatus_to_exitcode(status))")


def run_cli(data_path, out, flag, kernel_path):
    """``genpqr fit`` in a child process: (console output, seconds, peak RSS in MB, CPU seconds)."""
    cmd = [sys.executable, "-m", "genpqr", "fit", str(data_path), *COMMAND, "--out", str(out)]
    if flag != "auto":
        cmd += ["--transition", str(kernel_path) if flag == "true" else flag]
    log, usage = Path(str(out) + ".log"), Path(str(out) + ".usage")
    with open(log, "w") as f:
        done = subprocess.run([sys.executable, "-c", LAUNCHER, str(usage), *cmd], stdout=f, stderr=subprocess.STDOUT)
    text = log.read_text()
    if done.returncode != 0:
        raise RuntimeError(f"genpqr fit --transition {flag} failed ({done.returncode}):\n{text[-3000:]}")
    seconds, kib, cpu = usage.read_text().split()
    return text, float(seconds), int(kib) / 1024.0, float(cpu)  # ru_maxrss: KiB on Linux


def chosen_model(text, flag):
    """The transition model named in the console output (``transition model: NAME (...``)."""
    found = re.search(r"transition model: (\w+)", text)
    if found:
        return found.group(1)
    return "true kernel (the file)" if flag == "true" else f"{flag} (the flag; not printed)"


def reward_table(path, n_states, n_actions):
    """The (S, K) reward of ``rewards.csv`` on the MDP's states and actions: the state column's
    label is the MDP state, ``reward_<a>`` the action; states without a row get 0, actions
    without a column (never logged) 10 below the table's least reward. Also the unlogged count."""
    import pandas as pd

    table = pd.read_csv(path)
    r = np.zeros((n_states, n_actions))
    states = table["state"].to_numpy(dtype=np.int64)
    missing = []
    for a in range(n_actions):
        if f"reward_{a}" in table:
            r[states, a] = table[f"reward_{a}"].to_numpy()
        else:
            missing.append(a)
    if missing:
        r[:, missing] = np.min(r[states][:, [a for a in range(n_actions) if a not in missing]]) - 10.0
    no_row = n_states - np.unique(states).size
    unvisited = int((~table["visited"].astype(bool)).sum()) + no_row
    return r, {"no_row": no_row, "unvisited": unvisited, "missing_actions": missing}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--horizon", type=int, default=20, help="steps at most per episode")
    ap.add_argument("--icu-sepsis", default=None, metavar="PATH",
                    help="ICU-Sepsis' wheel or dynamics.npz: run on that MDP instead of the clustered one")
    ap.add_argument("--icu-sepsis-like", action="store_true",
                    help="run on a stand-in with ICU-Sepsis' layout built from --seed (no download; "
                         "icu_sepsis_like_mdp)")
    ap.add_argument("--repeat", type=int, default=1, help="run each flag this many times, in turn, and report "
                                                          "the medians (times under load)")
    ap.add_argument("--keep", default=None, help="keep the data, the kernel and the output folders here "
                                                 "(a new folder; default: a temporary one, removed)")
    ap.add_argument("--flags", default=",".join(FLAGS), help="comma-separated runs among auto (no --transition "
                                                             "flag), counts and true (the true kernel file)")
    args = ap.parse_args(argv)
    args.flags = [f for f in args.flags.split(",") if f]
    unknown = sorted(set(args.flags) - set(FLAGS))
    if unknown:
        ap.error(f"--flags: unknown {unknown}; choose among {list(FLAGS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    initial = None
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.icu_sepsis:
        mdp, behaviour, initial, facts = icu_sepsis_mdp(args.icu_sepsis)
        print(f"ICU-Sepsis: {facts['states']} states, {facts['actions']} actions; the last 3 move to the last: "
              f"{facts['ends_absorbing']}; largest live move into the last: {facts['live_to_715']}; d_0 mass off the "
              f"live states: {facts['initial_off_live']}, live states with d_0 = 0: {facts['initial_zero']}; "
              f"expert_policy zeros on live states: {facts['expert_zeros']} cells in {facts['states_with_zeros']} "
              f"states")
    elif args.icu_sepsis_like:
        mdp, behaviour, initial = icu_sepsis_like_mdp(random_state=args.seed)
        print(f"ICU-Sepsis-like stand-in (seed {args.seed}): {mdp.n_states} live states, {mdp.n_actions} actions; "
              f"the clinicians never take {np.mean(behaviour == 0):.0%} of the cells")
    else:
        mdp, _ = clustered_mdp(random_state=args.seed)
        behaviour = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=False)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        rows = run_all(args, mdp, behaviour, folder, initial)
    print(f"total time {time.perf_counter() - t_start:.0f} s; load average {os.getloadavg()[0]:.1f}")
    return rows


def run_all(args, mdp, behaviour, folder, initial=None):
    S, K = mdp.n_states, mdp.n_actions
    data_path = folder / "data.csv"
    visits, frame = write_data(mdp, behaviour, args.episodes, args.seed, data_path, args.horizon, initial)
    logged_actions = np.unique(frame["action"].to_numpy())
    kernel_path = folder / "true.npy"
    if "true" in args.flags:  # (S, K, S) over the data's actions in sorted label order
        np.save(kernel_path, mdp.kernel.dense()[:, logged_actions, :])
    print(f"MDP: S={S} K={K} gamma={mdp.gamma}; data: {len(frame)} rows, {args.episodes} episodes of at most "
          f"{args.horizon} steps, "
          f"{int(frame['terminated'].sum())} terminated; {np.count_nonzero(visits)} of {S} states and "
          f"{logged_actions.size} of {K} actions logged")
    print(f"command: genpqr fit data.csv {' '.join(COMMAND)} --out DIR [--transition FLAG]\n")
    runs = {flag: [] for flag in args.flags}
    for i in range(args.repeat):
        for flag in args.flags:
            out = folder / (f"fit-{flag}" if i == 0 else f"fit-{flag}-{i}")
            runs[flag].append(run_cli(data_path, out, flag, kernel_path))
    rows = []
    for flag, done in runs.items():
        text = done[0][0]
        r, info = reward_table(folder / f"fit-{flag}" / "rewards.csv", S, K)
        resolved = stage2.soft_optimal_policy(r, mdp.kernel, mdp.gamma)
        tv = visit_weighted_tv(resolved, behaviour, visits)
        rows.append({"flag": flag, "model": chosen_model(text, flag), "seconds": float(np.median([d[1] for d in done])),
                     "rss_mb": float(np.median([d[2] for d in done])), "cpu": float(np.median([d[3] for d in done])),
                     "tv": tv, **info})
    floor = next((row for row in rows if row["flag"] == "counts"), None)
    print(f"(medians of {args.repeat} runs each, in turn)" if args.repeat > 1 else "")
    print("| transition flag | transition model used | seconds | peak RSS (MB) | policy TV under the true kernel "
          "| CPU seconds | time / counts (wall; CPU) |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        flag = {"auto": "(none: auto)", "true": "true.npy"}.get(row["flag"], row["flag"])
        ratio = ("" if floor is None else
                 f"{row['seconds'] / floor['seconds']:.2f}x; {row['cpu'] / floor['cpu']:.2f}x")
        print(f"| {flag} | {row['model']} | {row['seconds']:.1f} | {row['rss_mb']:.0f} | {row['tv']:.3f} "
              f"| {row['cpu']:.1f} | {ratio} |")
    for row in rows:
        if row["unvisited"] or row["missing_actions"]:
            print(f"{row['flag']}: {row['unvisited']} states never logged (weight 0; {row['no_row']} without a row "
                  f"in rewards.csv, reward 0), actions never logged: {row['missing_actions']}")
    s = frame["state"].to_numpy()
    freq = np.bincount(s * K + frame["action"].to_numpy(), minlength=S * K).reshape(S, K).astype(float)
    freq /= np.maximum(freq.sum(axis=1, keepdims=True), 1)
    print(f"\nsampling floor: the logged policy's empirical frequencies are "
          f"{visit_weighted_tv(freq, behaviour, visits):.3f} from it (policy TV)")
    return rows


if __name__ == "__main__":
    main()
