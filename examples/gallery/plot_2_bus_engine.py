"""
The bus engine: a structural fit and a counterfactual
=====================================================

Rust's (1987) engine-replacement problem (:mod:`genpqr.envs`): each month a bus is kept
(its mileage bin grows by a random increment) or its engine is replaced (mileage back to 0).
The flow utility is ``RC - 0.001 theta11 x`` for keeping, relative to replacing, and the
discount is 0.9999. We simulate a panel, estimate the model with GenPQR's exact tabular path
and :func:`genpqr.structural.fit_structural` (NPL iterated to convergence: the maximum
likelihood estimator), then ask what happens to replacements if engines cost twice as much.
The counterfactual is answered on the estimated structural model, with the nonparametric
reward table's answer beside it, and compared with the truth, which is known here.
"""

# %%
# A simulated panel
# -----------------
# 90 mileage bins, 37 buses observed for 117 months (the size of Rust's group 4).
import warnings

import matplotlib.pyplot as plt
import numpy as np

from genpqr import CoverageWarning, GenPQR
from genpqr import normalization as N
from genpqr.envs import bus_engine, simulate_buses
from genpqr.structural import fit_structural
from genpqr.structural import IncrementKernel

truth = bus_engine(n_states=90, beta=0.9999, rc=10.075, theta11=2.293,
                   theta3=(0.3919, 0.5953, 0.0128))
panel = simulate_buses(truth, n_buses=37, n_periods=117, random_state=0).transitions
print(f"{panel.n} bus-months, {int((panel.actions == 1).sum())} replacements")

# %%
# GenPQR, then the structural parameters
# --------------------------------------
# Stage 1 and the exact solve give the reward table under Rust's normalization (replacing is
# worth 0); mileage moves by a pooled increment kernel estimated from the panel. The
# structural step then fits ``(RC, theta11)`` by maximum likelihood.
#
# Replacement, the anchor of this normalization, is chosen in about 1% of the months, so the
# fit warns ``CoverageWarning: the recovered reward ... rests on rarely taken actions``. It
# concerns the nonparametric reward table (and the nonparametric column below), not the
# structural estimates: the maximum likelihood estimator does not use the normalization.
# We record it and print it.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", CoverageWarning)
    model = GenPQR(N.anchor_action("replace"), gamma=0.9999, q_model="exact", n_states=90,
                   transition_model=IncrementKernel(2, "replace"), random_state=0)
    model.fit(panel)
for w in caught:
    print(f"{w.category.__name__}: {str(w.message)[:110]}...")

# features of u(x, keep) = RC - 0.001 theta11 x; u(x, replace) = 0
X = np.zeros((90, 2, 2))
X[:, 0, 0], X[:, 0, 1] = 1.0, -0.001 * np.arange(90)
structural = fit_structural(model, X, names=["RC", "theta11"])
print(structural.summary())

# %%
# Engines twice as expensive
# --------------------------
# ``parameter_change={"RC": "*2"}`` re-solves the estimated model with ``RC`` doubled; the
# interval is the delta method's, from the estimate's covariance. The same change of flow
# payoffs is also applied to the reward table (the ``nonparametric_counterfactual`` column),
# and ``route_gap`` says how far the two answers are apart. The true answer comes from the
# true model with ``RC`` doubled (:meth:`~genpqr.envs.BusEngine.with_parameters`).
res = model.counterfactual(parameter_change={"RC": "*2"}, structural=structural)
table = res.to_frame().set_index(["distribution", "statistic"])
shown = {"baseline": "baseline", "counterfactual": "counterfactual", "counterfactual_lo": "lo",
         "counterfactual_hi": "hi", "nonparametric_counterfactual": "nonparametric"}
print(table[list(shown)].rename(columns=shown).round(4).to_string())

doubled = truth.with_parameters(rc=2 * truth.rc)
rate = table.loc[("stationary", "rate[replace]")]
print("long-run replacement rate, %:")
print(f"  estimated: {100 * rate.baseline:.3f} -> {100 * rate.counterfactual:.3f} "
      f"[{100 * rate.counterfactual_lo:.3f}, {100 * rate.counterfactual_hi:.3f}] (structural), "
      f"{100 * rate.nonparametric_counterfactual:.3f} (nonparametric)")
print(f"  true:      {100 * truth.replacement_rate():.3f} -> "
      f"{100 * doubled.replacement_rate():.3f}")
print(res.describe())

# %%
# Where the answer rests
# ----------------------
# Doubling the cost of an engine is a large change: replacements become five times rarer and
# most buses run to the top mileage bin, where the model's state space ends (bin 89 holds all
# higher mileage), in the true model as in the estimate. ``res.support`` says how much of the
# counterfactual's long-run occupancy lies on states the panel saw fewer than 10 times; here
# the top bin itself is well observed (buses reach it in the panel too), so the answer rests on
# the model's functional form in the bins between, and on the top bin's meaning.
print(res.support.describe())

policies = res.policy_frame()
mileage = np.arange(90)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
axes[0].plot(mileage, truth.policy[:, 1], color="C0", lw=1, ls="--", label="true, RC")
axes[0].plot(mileage, policies["baseline_policy[replace]"], color="C0", label="estimated, RC")
axes[0].plot(mileage, doubled.policy[:, 1], color="C1", lw=1, ls="--", label="true, 2 RC")
axes[0].plot(mileage, policies["counterfactual_policy[replace]"], color="C1",
             label="estimated, 2 RC (structural)")
axes[0].set(xlabel="mileage bin", ylabel="P(replace | mileage)",
            title="replacement probability")
axes[0].legend()
visits = np.bincount(panel.states[:, 0].astype(int), minlength=90)
axes[1].bar(mileage, visits / panel.n, color="lightgrey", label="the panel's bus-months")
axes[1].plot(mileage, truth.stationary_distribution(), color="C0", lw=1, ls="--", label="true, RC")
axes[1].plot(mileage, policies["baseline_stationary"], color="C0", label="estimated, RC")
axes[1].plot(mileage, doubled.stationary_distribution(), color="C1", lw=1, ls="--",
             label="true, 2 RC")
axes[1].plot(mileage, policies["counterfactual_stationary"], color="C1",
             label="estimated, 2 RC (structural)")
axes[1].set(xlabel="mileage bin", ylabel="share of months (log scale)", yscale="log",
            title="long-run distribution of mileage")
axes[1].legend()
plt.show()
