r"""Rust's (1987) bus-engine replacement model in the Monte Carlo design of Su and Judd (2012).

The model
---------
A bus has mileage ``x`` in ``N = 175`` bins ``0..174``. Each month the manager keeps the
engine (``"keep"``) or replaces it (``"replace"``); flow utilities (Su-Judd's parameters)

    u(x, keep)    = -c(x) = -0.001 * theta11 * x,      theta11 = 2.4569,
    u(x, replace) = -RC,                                RC      = 11.7257,

plus i.i.d. Gumbel shocks (temperature 1: the MaxEnt / logit model), discount
``beta = 0.975``. Mileage then grows by ``j = 0..4`` bins with probabilities
``theta3 = (0.0937, 0.4475, 0.4459, 0.0127, 0.0002)``, capped at the last bin (the mass of
increments past bin 174 stays in bin 174).

**Timing convention** (Rust 1987, Su-Judd 2012): replacement resets the mileage to 0 *at
the start of the month* and the month's increment then applies from 0, so
``P(x' | x, replace) = P(x' | 0, keep) = theta3[x']`` for ``x' = 0..4``. A row of the panel
is ``(x_t, d_t, x_{t+1})``.

Ground truth under GenPQR's normalization
-----------------------------------------
Behaviour identifies the flow utility only up to potential shaping. With replacement as
the anchor action and ``g = 0`` (Rust's own normalization, paper Sec. 2), the
representative is

    r(x, keep) = RC - 0.001 * theta11 * x,      r(x, replace) = 0:

``P(. | x, replace)`` does not depend on ``x``, so the shaping potential is the constant
``c = RC / (1 - beta)`` and ``r + c - beta P c = u + RC`` (checked against
:func:`genpqr.stage2.normalized_reward` in the tests). Both parametrizations are linear
in ``theta = (RC, theta11)``; :meth:`BusEngine.features` returns either.

True counterfactuals: :meth:`BusEngine.with_parameters` solves the same engine with other
parameters (e.g. twice the replacement cost) and :meth:`BusEngine.replacement_rate` gives its
long-run replacement rate, the truth an estimated counterfactual is checked against
(benchmarks/rust_counterfactual_coverage.py).

Panels
------
:func:`simulate_buses` draws ``n_buses`` independent buses for ``n_periods`` months (Su and
Judd: 50 buses x 120 months). Initial mileage: ``"stationary"`` (default) draws it from the
stationary distribution of mileage under the true policy, so every month of the panel is a
draw from the same long-run distribution (the panel looks like a fleet observed in mid-life);
``"zero"`` starts every bus with a new engine. The likelihood is conditional on the initial
state, so both give consistent estimators; stationary starts give more replacements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..data._validation import check_random_state
from ..data import Transitions, from_arrays
from ..stage2 import TabularMDP, soft_optimal_solution
from ..stage2._tabular import SoftOptimalSolution, TransitionKernel

__all__ = ["BusEngine", "RustPanel", "bus_engine", "simulate_buses", "simulate_typed_buses", "increment_matrix",
           "SU_JUDD", "TYPED_RC"]

#: Su and Judd (2012), Table 1 design (true parameter values).
SU_JUDD = dict(n_states=175, beta=0.975, rc=11.7257, theta11=2.4569,
               theta3=(0.0937, 0.4475, 0.4459, 0.0127, 0.0002), cost_scale=0.001)

#: Replacement costs of the two bus types of :func:`simulate_typed_buses` (other parameters Su-Judd's).
TYPED_RC = (10.0, 13.0)

ACTIONS = ("keep", "replace")
KEEP, REPLACE = 0, 1


def increment_matrix(theta3, n_states: int, n_actions: int = 2, reset: int | None = REPLACE) -> sp.csr_matrix:
    """``(S*K, S)`` kernel of "mileage grows by j bins with probability theta3[j], capped at
    the last bin"; action ``reset`` first resets the state to 0."""
    theta3 = np.asarray(theta3, dtype=np.float64)
    S, K, J = int(n_states), int(n_actions), theta3.size
    rows, cols, vals = [], [], []
    for a in range(K):
        base = np.zeros(S, dtype=np.int64) if a == reset else np.arange(S)
        for j in range(J):
            rows.append(np.arange(S) * K + a)
            cols.append(np.minimum(base + j, S - 1))
            vals.append(np.full(S, theta3[j]))
    m = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(S * K, S))
    m.sum_duplicates()  # capped increments pile up on the last bin
    return m


@dataclass(frozen=True, eq=False)
class BusEngine:
    """The bus-engine model with its true parameters and exact solution.

    Attributes
    ----------
    n_states : int
    beta : float
        Discount factor (``gamma`` elsewhere in genpqr).
    rc, theta11 : float
        Replacement cost and linear maintenance-cost slope (cost ``0.001 * theta11 * x``).
    theta3 : ndarray of shape (J,)
        Mileage-increment probabilities for increments ``0..J-1`` bins.
    kernel : TransitionKernel
        ``(S*K, S)`` with actions ``0 = "keep"``, ``1 = "replace"``.
    flow_utility : ndarray of shape (S, 2)
        Rust's ``u(x, keep) = -c(x)``, ``u(x, replace) = -RC``.
    solution : SoftOptimalSolution
        Soft-optimal (logit) policy, Q and V of ``flow_utility``.
    """

    n_states: int
    beta: float
    rc: float
    theta11: float
    theta3: np.ndarray
    cost_scale: float
    kernel: TransitionKernel = field(repr=False)
    flow_utility: np.ndarray = field(repr=False)
    solution: SoftOptimalSolution = field(repr=False)

    action_labels = ACTIONS
    anchor = "replace"

    @property
    def theta(self) -> np.ndarray:
        """True structural parameters ``(RC, theta11)``."""
        return np.array([self.rc, self.theta11])

    @property
    def mileage(self) -> np.ndarray:
        """Bin indices ``0..S-1``, shape (S,)."""
        return np.arange(self.n_states, dtype=np.float64)

    @property
    def policy(self) -> np.ndarray:
        """True choice probabilities ``P(d | x)``, shape (S, 2)."""
        return self.solution.policy

    @property
    def mdp(self) -> TabularMDP:
        return TabularMDP(self.kernel, self.beta, self.flow_utility)

    def normalized_reward(self) -> np.ndarray:
        """Closed-form truth under the anchor normalization (replace = 0):
        ``r(x, keep) = RC - 0.001 theta11 x``, ``r(x, replace) = 0``; shape (S, 2)."""
        r = np.zeros((self.n_states, 2))
        r[:, KEEP] = self.rc - self.cost_scale * self.theta11 * self.mileage
        return r

    def features(self, parametrization: str = "anchor") -> np.ndarray:
        """Reward features ``(S, 2, 2)`` with ``reward = features @ (RC, theta11)``.

        ``"anchor"``: keep ``(1, -0.001 x)``, replace ``(0, 0)`` (the normalized reward, what
        GenPQR recovers with replacement as anchor); ``"rust"``: keep ``(0, -0.001 x)``,
        replace ``(-1, 0)`` (Rust's flow utility).
        """
        X = np.zeros((self.n_states, 2, 2))
        X[:, KEEP, 1] = -self.cost_scale * self.mileage
        if parametrization == "anchor":
            X[:, KEEP, 0] = 1.0
        elif parametrization == "rust":
            X[:, REPLACE, 0] = -1.0
        else:
            raise ValueError(f"parametrization must be 'anchor' or 'rust', got {parametrization!r}")
        return X

    def stationary_distribution(self) -> np.ndarray:
        """Long-run distribution of mileage under the true policy, shape (S,)."""
        P_pi = self.kernel.under(self.policy)
        P_pi = P_pi.toarray() if sp.issparse(P_pi) else np.asarray(P_pi)
        # d (I - P_pi) = 0 with sum(d) = 1: replace one (redundant) balance equation by the sum
        A = np.eye(self.n_states) - P_pi.T
        A[-1] = 1.0
        b = np.zeros(self.n_states)
        b[-1] = 1.0
        d = np.clip(np.linalg.solve(A, b), 0.0, None)
        return d / d.sum()

    def state_action_frequencies(self) -> np.ndarray:
        """Population weights ``stationary(x) * P(d | x)``, shape (S, 2), summing to 1."""
        return self.stationary_distribution()[:, None] * self.policy

    def replacement_rate(self) -> float:
        """Long-run share of bus-months with a replacement, ``sum_x stationary(x) P(replace | x)``
        (the ``rate[replace]`` of a stationary counterfactual)."""
        return float(self.state_action_frequencies()[:, REPLACE].sum())

    def with_parameters(self, *, rc: float | None = None, theta11: float | None = None,
                        beta: float | None = None) -> "BusEngine":
        """The same engine (states, increments, cost scale) with other true parameters, solved
        exactly: the true counterfactual against which an estimated one is checked, e.g.
        ``truth.with_parameters(rc=2 * truth.rc).replacement_rate()``."""
        return bus_engine(n_states=self.n_states, beta=self.beta if beta is None else beta,
                          rc=self.rc if rc is None else rc, theta11=self.theta11 if theta11 is None else theta11,
                          theta3=self.theta3, cost_scale=self.cost_scale)


def bus_engine(*, n_states: int = 175, beta: float = 0.975, rc: float = 11.7257, theta11: float = 2.4569,
               theta3=(0.0937, 0.4475, 0.4459, 0.0127, 0.0002), cost_scale: float = 0.001) -> BusEngine:
    """Rust's bus-engine model; defaults are the Su-Judd (2012) Monte Carlo design."""
    theta3 = np.asarray(theta3, dtype=np.float64)
    if theta3.ndim != 1 or theta3.size < 1 or theta3.min() < 0 or abs(theta3.sum() - 1.0) > 1e-6:
        raise ValueError(f"theta3 must be increment probabilities summing to 1, got {theta3.tolist()}")
    theta3 = theta3 / theta3.sum()
    if n_states < theta3.size:
        raise ValueError(f"n_states must be at least len(theta3) = {theta3.size}, got {n_states}")
    kernel = TransitionKernel(increment_matrix(theta3, n_states), int(n_states), 2)
    x = np.arange(n_states, dtype=np.float64)
    u = np.column_stack([-cost_scale * theta11 * x, np.full(n_states, -rc)])
    solution = soft_optimal_solution(u, kernel, beta, tol=1e-13)
    return BusEngine(int(n_states), float(beta), float(rc), float(theta11), theta3, float(cost_scale), kernel, u,
                     solution)


@dataclass(frozen=True, eq=False)
class RustPanel:
    """A simulated panel: genpqr :class:`~genpqr.data.Transitions` and the same rows as a
    long-format frame (columns ``bus, month, mileage, action, next_mileage``; with latent types
    also ``type``). ``types``: the true type of each bus, shape (n_buses,) (None without types)."""

    transitions: Transitions
    frame: object
    types: np.ndarray | None = None


def simulate_buses(model: BusEngine | None = None, n_buses: int = 50, n_periods: int = 120, *,
                   initial: str = "stationary", random_state=None) -> RustPanel:
    """Simulate ``n_buses`` buses for ``n_periods`` months under the true logit policy.

    Parameters
    ----------
    model : BusEngine, optional
        Default :func:`bus_engine` (Su-Judd design).
    n_buses, n_periods : int
        Panel size (Su-Judd: 50 x 120). Each bus is an episode; its last month is
        ``truncated`` (the logging stops, the bus does not).
    initial : {"stationary", "zero"}
        Initial mileage: a draw from the stationary distribution under the true policy, or 0.
    random_state : int or Generator

    Returns
    -------
    RustPanel
        ``transitions`` (states = mileage bins, actions labelled ``"keep"``/``"replace"``,
        rewards = Rust's flow utility) and ``frame``.
    """
    model = bus_engine() if model is None else model
    if n_buses < 1 or n_periods < 1:
        raise ValueError(f"n_buses and n_periods must be positive, got {n_buses}, {n_periods}")
    return _simulate((model,), np.zeros(n_buses, dtype=np.int64), n_periods, initial,
                     check_random_state(random_state), typed=False)


def simulate_typed_buses(models=None, n_buses: int = 50, n_periods: int = 120, *, mixing=None,
                         initial: str = "stationary", random_state=None) -> RustPanel:
    """A panel of buses of latent types: each bus draws its type ``m`` with probability
    ``mixing[m]`` once, then behaves as ``models[m]`` for all its months (a finite mixture,
    Arcidiacono and Miller 2011).

    Parameters
    ----------
    models : sequence of BusEngine, optional
        One engine per type, on the same states (default: two Su-Judd engines with replacement
        costs ``TYPED_RC`` = (10, 13), the other parameters shared).
    n_buses, n_periods : int
    mixing : sequence of float, optional
        Type probabilities (default uniform: 0.5/0.5 for two types).
    initial : {"stationary", "zero"}
        Initial mileage: a draw from the stationary distribution of the bus's own type, or 0.
    random_state : int or Generator

    Returns
    -------
    RustPanel
        With ``types`` (n_buses,), the true type of each bus, and a ``type`` column in ``frame``;
        the rows' rewards are each bus's own type's flow utility.
    """
    models = tuple(bus_engine(rc=rc) for rc in TYPED_RC) if models is None else tuple(models)
    if len(models) < 1 or not all(isinstance(m, BusEngine) for m in models):
        raise TypeError(f"models must be a sequence of BusEngine, got {models!r}")
    if len({m.n_states for m in models}) != 1:
        raise ValueError(f"models must share their states, got n_states {[m.n_states for m in models]}")
    mixing = np.full(len(models), 1.0 / len(models)) if mixing is None else np.asarray(mixing, dtype=np.float64)
    if mixing.shape != (len(models),) or mixing.min() < 0 or abs(mixing.sum() - 1.0) > 1e-8:
        raise ValueError(f"mixing must be {len(models)} probabilities summing to 1, got {np.ravel(mixing).tolist()}")
    if n_buses < 1 or n_periods < 1:
        raise ValueError(f"n_buses and n_periods must be positive, got {n_buses}, {n_periods}")
    rng = check_random_state(random_state)
    types = _draw(rng, np.broadcast_to(mixing, (n_buses, len(models))))
    return _simulate(models, types, n_periods, initial, rng, typed=True)


def _simulate(models, types, n_periods, initial, rng, typed) -> RustPanel:
    """The months of ``len(types)`` buses, bus ``b`` following ``models[types[b]]``."""
    import pandas as pd

    n_buses, S = types.size, models[0].n_states
    if initial == "stationary":
        stationary = np.stack([m.stationary_distribution() for m in models])
        x = _draw(rng, stationary[types])
    elif initial == "zero":
        x = np.zeros(n_buses, dtype=np.int64)
    else:
        raise ValueError(f"initial must be 'stationary' or 'zero', got {initial!r}")
    p_replace = np.stack([m.policy[:, REPLACE] for m in models])
    inc_cdf = np.stack([np.cumsum(m.theta3) for m in models])[types]
    n_inc = np.array([m.theta3.size for m in models])[types]
    states = np.empty((n_periods, n_buses), dtype=np.int64)
    actions = np.empty((n_periods, n_buses), dtype=np.int64)
    nexts = np.empty((n_periods, n_buses), dtype=np.int64)
    for t in range(n_periods):
        d = (rng.random(n_buses) < p_replace[types, x]).astype(np.int64)
        draw = rng.random(n_buses) * inc_cdf[:, -1]
        j = np.minimum((inc_cdf <= draw[:, None]).sum(axis=1), n_inc - 1)
        x_next = np.minimum(np.where(d == REPLACE, 0, x) + j, S - 1)
        states[t], actions[t], nexts[t] = x, d, x_next
        x = x_next
    # bus-major order: all months of bus 0, then bus 1, ...
    s, a, s2 = (arr.T.ravel() for arr in (states, actions, nexts))
    bus = np.repeat(np.arange(n_buses), n_periods)
    month = np.tile(np.arange(n_periods), n_buses)
    labels = np.asarray(ACTIONS)[a]
    utility = np.stack([m.flow_utility for m in models])
    row_type = types[bus]
    transitions = from_arrays(s, labels, s2, truncated=month == n_periods - 1, episode_ids=bus,
                              rewards=utility[row_type, s, a], timesteps=month, action_labels=list(ACTIONS),
                              state_names=["mileage"])
    frame = pd.DataFrame({"bus": bus, "month": month, "mileage": s, "action": labels, "next_mileage": s2})
    if typed:
        frame["type"] = row_type
    return RustPanel(transitions, frame, types.copy() if typed else None)


def _draw(rng, probs: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(cdf.shape[0]) * cdf[:, -1]
    return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1)
