"""What the transition selection costs against its floor, in one process: the counts fit.

For each case the table gives the floor, ``GenPQR`` fitted with the counts kernel (cell
frequencies in stage 1, the exact solve: what ``genpqr fit --transition counts`` estimates, without
the command line's reading and writing), then ``select_transition_model`` (``random_state=0``,
the default candidates: what ``transition_model="auto"`` runs) with its time per candidate, the
low-rank model's EM fits and iterations, the choice and its settings, then ``GenPQR`` fitted with
the chosen kernel. Times are CPU seconds of this process (steadier than wall time on a shared
machine; wall seconds beside them) and ratios to the floor.

Cases: ``thin``, the clustered MDP of ``benchmarks/transition_models.py`` (700 states x 25
actions, 5,000 episodes of at most 20 steps, 60,804 moves); ``icu-like``, the ICU-Sepsis-like
stand-in of ``benchmarks/transition_front_door.py`` (713 states x 25 actions, 5,000 stays,
43,466 moves); ``docs``, the small problem of docs/choosing_a_transition_model.md (120 states x
6 actions, 3,379 moves).

    python benchmarks/transition_selection.py [--cases thin,icu-like,docs] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

from genpqr import GenPQR, normalization as N, stage2
from genpqr.envs._tabular import simulate_tabular
from genpqr.stage1 import FrequencyClassifier

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transition_front_door import icu_sepsis_like_mdp  # noqa: E402  (benchmarks/ is the script's folder)
from transition_models import clustered_mdp  # noqa: E402

CASES = ("thin", "icu-like", "docs")


def case_data(name, seed):
    """``(transitions, n_states, gamma)`` of a case."""
    if name == "thin":
        mdp, _ = clustered_mdp(random_state=seed)
        policy = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, mdp.gamma)
        return simulate_tabular(mdp, policy, n_episodes=5000, horizon=20, random_state=seed), mdp.n_states, mdp.gamma
    if name == "icu-like":
        mdp, expert, initial = icu_sepsis_like_mdp(random_state=seed)
        data = simulate_tabular(mdp, expert, n_episodes=5000, horizon=20, initial=initial, random_state=seed)
        return data, mdp.n_states, mdp.gamma
    rng = np.random.default_rng(seed)  # docs/choosing_a_transition_model.md
    S, K, groups, gamma = 120, 6, 6, 0.9
    rows = rng.dirichlet(np.full(S, 0.05), size=(groups, K))
    P = 0.95 * rows[np.arange(S) % groups]
    reward = rng.normal(size=(S, K))
    mdp = stage2.TabularMDP.create(P, gamma, reward)
    policy = stage2.soft_optimal_policy(reward, mdp.kernel, gamma)
    return simulate_tabular(mdp, policy, n_episodes=400, horizon=10, random_state=0), S, gamma


class Clock:
    """CPU and wall seconds of a block."""

    def __enter__(self):
        self.cpu, self.wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu, self.wall = time.process_time() - self.cpu, time.perf_counter() - self.wall


def genpqr_fit(data, S, gamma, kernel):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GenPQR(N.anchor_action(0), gamma=gamma, q_model="exact", n_states=S, transition_model=kernel,
                      policy_model=FrequencyClassifier(n_states=S), random_state=0, progress=False).fit(data)


def instrumented_selection(data, S):
    """``select_transition_model`` with the time of each candidate and the low-rank EM's fits."""
    from genpqr.stage2 import _transition_lowrank as lowrank
    from genpqr.stage2._transition_models import KernelModel

    per_model, em = {}, []
    patched = [(KernelModel, "_refit_held_out"),
               (stage2.CountKernel, "_fit_held_out"), (stage2.ShrinkageKernel, "_fit_held_out"),
               (stage2.LowRankKernel, "_fit_own_held_out")]
    saved = [(owner, name, owner.__dict__[name]) for owner, name in patched if name in owner.__dict__]

    def timed(method):
        def run(self, *args):
            t = time.process_time()
            try:
                return method(self, *args)
            finally:
                key = type(self).__name__
                per_model[key] = per_model.get(key, 0.0) + time.process_time() - t
        return run

    fit = lowrank.fit_low_rank
    runner = getattr(lowrank, "_EM", None)  # the resumable EM: a fit may run in two parts
    run = None if runner is None else runner.run
    fits = {}

    def counted(*args, **kwargs):
        out = fit(*args, **kwargs)
        em.append(out[2])
        return out

    def counted_run(self, max_iter, tol):
        out = run(self, max_iter, tol)
        fits[id(self)] = (self, self.it)  # iterations so far (a continued fit counted once; held: no id reuse)
        return out

    try:
        for owner, name, method in saved:
            setattr(owner, name, timed(method))
        if runner is None:
            lowrank.fit_low_rank = counted
        else:
            runner.run = counted_run
        with Clock() as clock:
            selection = stage2.select_transition_model(data, random_state=0, n_states=S, progress=False)
    finally:
        for owner, name, method in saved:
            setattr(owner, name, method)
        lowrank.fit_low_rank = fit
        if runner is not None:
            runner.run = run
    return selection, clock, per_model, em + [it for _, it in fits.values()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"--cases: unknown {unknown}; choose among {list(CASES)}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    rows = []
    for name in names:
        data, S, gamma = case_data(name, args.seed)
        genpqr_fit(data, S, gamma, "counts")  # warm: imports, first calls
        with Clock() as floor:
            genpqr_fit(data, S, gamma, "counts")
        selection, select, per_model, em = instrumented_selection(data, S)
        kernel = None if selection.chosen == "counts" else selection.model.kernel()
        with Clock() as chosen:
            genpqr_fit(data, S, gamma, "counts" if kernel is None else kernel)
        rows.append(dict(case=name, moves=selection.n_moves, floor=floor, select=select, chosen_fit=chosen,
                         selection=selection, per_model=per_model, em=em))
        print(f"\n{name}: {data.n} rows, {S} states; {selection.summary()}")
    print("\n| case | moves | floor: counts fit (CPU s) | selection (CPU s; wall s) | selection / floor (CPU) "
          "| per candidate (CPU s) | low-rank EM fits (iterations) | chosen | fit with the choice (CPU s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        parts = ", ".join(f"{k.replace('Kernel', '').lower()} {v:.1f}" for k, v in r["per_model"].items())
        settings = r["selection"].scores and next(
            (s["settings"] for s in r["selection"].scores if s["name"] == r["selection"].chosen), "")
        print(f"| {r['case']} | {r['moves']} | {r['floor'].cpu:.2f} | {r['select'].cpu:.1f}; {r['select'].wall:.1f} "
              f"| {r['select'].cpu / r['floor'].cpu:.0f}x | {parts} | {len(r['em'])} ({sum(r['em'])}) "
              f"| {r['selection'].chosen}{(settings or '').replace(';', '')} | {r['chosen_fit'].cpu:.2f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    return rows


if __name__ == "__main__":
    main()
