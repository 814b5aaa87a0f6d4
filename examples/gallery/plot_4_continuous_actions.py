"""
Continuous actions: a linear-quadratic-Gaussian problem
=======================================================

One :class:`~genpqr.GenPQR` serves both kinds of action space. With real-valued actions the
first stage is a conditional density ``pi(a|s)`` (here a linear Gaussian,
:class:`genpqr.actions.LinearGaussianDensity`), the normalization a reference kernel over
actions (here a point mass at ``a = 0``: ``r(s, 0) = 0``), and the ``mu``-integrals of stage 2
a quadrature rule. :mod:`genpqr.envs` is a benchmark with closed-form truth: the 1-D
problem ``s' = 0.8 s + 0.5 a + noise`` with a quadratic reward, whose soft-optimal policy,
and whose reward under any normalization, are known exactly.
"""

# %%
# Logged transitions
# ------------------
# 2,000 transitions ``(s, a, s')`` with ``s`` from the problem's state distribution and ``a``
# from its soft-optimal (Gaussian) policy. ``problem.sample`` builds them with
# ``from_arrays(..., action_space="box")``.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from genpqr import GenPQR, normalization as N
from genpqr.actions import GaussHermite, LinearGaussianDensity
from genpqr.envs import make_lqg
from genpqr.estimator import ContinuousOptions
from genpqr.stage2 import FQE

problem = make_lqg()
data = problem.sample(2000, random_state=0)
print(f"{data.n} transitions, states of dimension {data.state_dim}, "
      f"actions of dimension {data.action_dim}")

# %%
# Fit
# ---
# Stage 2 is fitted Q evaluation with a degree-2 polynomial regression (the true Q is
# quadratic), and ``mu Q`` at the next state is integrated by an 8-node Gauss-Hermite rule.
normalization = N.point_anchor(0.0)
model = GenPQR(normalization=normalization, gamma=problem.gamma,
               policy_model=LinearGaussianDensity(),
               q_model=FQE(make_pipeline(PolynomialFeatures(2), LinearRegression()), n_iterations=200),
               continuous=ContinuousOptions(integration=GaussHermite(8)), random_state=0).fit(data)
print(model.summary())

# %%
# Against the closed form
# -----------------------
# ``problem.normalized_reward`` gives the true reward under the same
# normalization; compare at fresh (state, action) pairs of the behaviour.
truth = problem.normalized_reward(normalization)
s, a = problem.evaluation_pairs(500, random_state=1)
recovered, true = model.reward(s, a), problem.evaluate(truth, s, a)
print(f"reward MSE {np.mean((recovered - true) ** 2):.4f} "
      f"(variance of the true reward {np.var(true):.3f}), "
      f"correlation {np.corrcoef(recovered, true)[0, 1]:.4f}")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
grid = np.linspace(-2.5, 2.5, 101)[:, None]
for k, state in enumerate((-1.5, 0.0, 1.5)):
    states = np.full_like(grid, state)
    axes[0].plot(grid[:, 0], problem.evaluate(truth, states, grid), color=f"C{k}", lw=1,
                 ls="--")
    axes[0].plot(grid[:, 0], model.reward(states, grid), color=f"C{k}",
                 label=f"s = {state:g}")
axes[0].axvline(0.0, color="grey", lw=0.8)
axes[0].set(xlabel="action a", ylabel="r(s, a)",
            title="recovered (solid) and true (dashed) reward")
axes[0].legend()
axes[1].scatter(true, recovered, s=8, alpha=0.5)
lims = [min(true.min(), recovered.min()), max(true.max(), recovered.max())]
axes[1].plot(lims, lims, color="black", lw=1, ls="--")
axes[1].set(xlabel="true normalized reward", ylabel="recovered reward",
            title="at 500 pairs of the behaviour")
