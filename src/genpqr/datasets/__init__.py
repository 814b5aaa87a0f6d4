"""Small data sets shipped inside the package, so that an installed genpqr runs its examples.

============  ========================================================================
name          contents
============  ========================================================================
``choices``   6,000 logged choices (600 episodes of 10 steps) in a 15-state, 3-action
              tabular problem whose reward is linear in two features (``episode``,
              ``time``, ``state``, ``action`` in ``a``/``b``/``c``, ``outcome``); made by
              ``examples/make_example_data.py``, described in ``examples/README.md``
``features``  the two reward features (``bonus``, ``level``) of every (state, action)
              pair of ``choices``: ``genpqr fit --features``
``lqg``       2,000 real-valued actions of a linear-quadratic-Gaussian problem with the
              closed-form normalized reward (``episode``, ``time``, ``s``, ``a``,
              ``true_reward``); made by ``examples/make_lqg_data.py``
============  ========================================================================

In a source checkout the same files are ``examples/data/*.csv``. From the shell, ``python -m
genpqr.datasets NAME`` prints the file's path::

    genpqr fit "$(python -m genpqr.datasets choices)" --episode episode --time time \\
        --state state --action action --gamma 0.9 --normalization anchor:a --out fit-output
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The shipped data sets: name -> file name under ``genpqr/datasets/data/``.
DATASETS = {"choices": "choices.csv", "features": "features.csv", "lqg": "lqg.csv"}


def path(name: str) -> Path:
    """The path of the shipped data set ``name`` (one of :data:`DATASETS`), a CSV file.

    Parameters
    ----------
    name : {"choices", "features", "lqg"}

    Returns
    -------
    pathlib.Path
        An existing file inside the installed package (read it, do not write to it).
    """
    if name not in DATASETS:
        raise ValueError(f"name must be one of {sorted(DATASETS)}, got {name!r}")
    return Path(str(files(__name__).joinpath("data", DATASETS[name])))


def load(name: str):
    """The shipped data set ``name`` as a :class:`pandas.DataFrame` (long format: one row per
    episode and time step for ``choices`` and ``lqg``; one row per (state, action) for
    ``features``).

    Examples
    --------
    >>> from genpqr import datasets, from_pandas
    >>> frame = datasets.load("choices")
    >>> frame.shape
    (6000, 5)
    >>> data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    """
    import pandas as pd

    return pd.read_csv(path(name))


__all__ = ["DATASETS", "path", "load"]
