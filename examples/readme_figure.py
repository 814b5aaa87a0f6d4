"""The picture at the top of README.md: from logged choices to the reward behind them.

Left, what the data show: how often each action is chosen at each state of the bundled data set
(``genpqr.datasets.load("choices")``, 600 episodes of 10 steps). Right, what GenPQR recovers from
them: the reward of each action at each state, with 95% bootstrap intervals over episodes, beside
the reward the data were simulated from (known here: ``examples/make_example_data.py``). The fit
is the one of the README's example.

    python examples/readme_figure.py --out readme.png

takes about 10 s (the bootstrap's 200 refits). The README's copy is docs/readme.png,
made by this script.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from genpqr import GenPQR, datasets, from_pandas  # noqa: E402
from genpqr import normalization as N  # noqa: E402
from genpqr.evaluation import bootstrap  # noqa: E402

#: The reward the bundled data were simulated from (examples/make_example_data.py):
#: r(s, a) = 0, r(s, b) = bonus + level x(s), r(s, c) = bonus - level x(s), x(s) = s / 14.
BONUS, LEVEL = -0.3, 1.2


def make_figure(n_boot: int = 200, random_state: int = 0):
    frame = datasets.load("choices")
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", random_state=random_state).fit(data)
    table = model.reward_table()
    lo, hi = bootstrap(model, data, n_boot=n_boot, random_state=random_state, fitted=model, progress=False).interval()
    states = table.index.to_numpy()
    x = states / 14
    truth = {"a": 0 * x, "b": BONUS + LEVEL * x, "c": BONUS - LEVEL * x}
    shares = frame.groupby("state").action.value_counts(normalize=True).unstack(fill_value=0.0)

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.3), layout="constrained")
    colors = {"a": "0.45", "b": "C0", "c": "C3"}
    for action in table.columns:
        left.plot(shares.index, shares[action], "o-", ms=3.5, color=colors[action], label=f"action {action}")
    left.set(title="the data: how often each action is chosen", xlabel="state", ylabel="share of the choices",
             ylim=(0, 1))
    left.legend(frameon=False, fontsize=8)
    for j, action in enumerate(table.columns):
        right.plot(states, truth[action], "--", lw=1, color=colors[action])
        right.errorbar(states + (j - 1) * 0.12, table[action], yerr=[table[action] - lo[:, j], hi[:, j] - table[action]],
                       fmt="o", ms=3.5, lw=1, color=colors[action],
                       label=f"r(s, {action})" + (" = 0: the anchor" if action == "a" else ", 95% interval"))
    right.plot([], [], "--", lw=1, color="0.3", label="true reward")
    right.set(title="genpqr: the reward behind them", xlabel="state", ylabel="reward")
    right.legend(frameon=False, fontsize=8, ncol=2)
    return fig


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="readme.png", help="the PNG to write (default: readme.png)")
    parser.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates (default: 200)")
    args = parser.parse_args(argv)
    fig = make_figure(args.n_boot)
    out = Path(args.out)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
