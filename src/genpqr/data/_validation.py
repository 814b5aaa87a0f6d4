"""Input validation shared by all modules: messages name the argument, what was
received and what was expected."""

from __future__ import annotations

import numbers

import numpy as np


def as_float_array(x, name: str, *, ndim: int | None = None, allow_1d_as_column: bool = False) -> np.ndarray:
    """Copy-free float64 view of ``x`` after checking dtype, shape and finiteness.

    Parameters
    ----------
    x : array-like
    name : str
        Argument name used in error messages.
    ndim : int, optional
        Required number of dimensions.
    allow_1d_as_column : bool
        If True and ``ndim == 2``, a 1-D input of length n is read as shape (n, 1).
    """
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if ndim == 2 and arr.ndim == 1 and allow_1d_as_column:
        arr = arr[:, None]
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise if ``arr`` holds NaN or inf, reporting how many and where the first is."""
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must be finite, but holds {int(bad.sum())} NaN/inf value(s) (first at index {first})"
        )


def check_gamma(gamma) -> float:
    """Discount factor in [0, 1)."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a real number in [0, 1), got {gamma!r}")
    gamma = float(gamma)
    if not (0.0 <= gamma < 1.0):
        raise ValueError(f"gamma must be in [0, 1), got {gamma}")
    return gamma


def check_length(arr: np.ndarray, n: int, name: str, reference: str) -> None:
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} rows but {reference} has {n}; they must match")


def check_probability_rows(p: np.ndarray, name: str, *, atol: float = 1e-8) -> np.ndarray:
    """Check that every row of ``p`` (n, K) is a probability distribution."""
    p = as_float_array(p, name, ndim=2)
    if (p < -atol).any():
        raise ValueError(f"{name} must be a distribution over actions, but has negative entries (min {p.min():.3g})")
    sums = p.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0))) if len(sums) else 0
    if len(sums) and abs(sums[worst] - 1.0) > atol:
        raise ValueError(
            f"{name} must be a distribution over actions (rows summing to 1), "
            f"but row {worst} sums to {sums[worst]:.10g}"
        )
    return np.clip(p, 0.0, None)


def check_random_state(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer)):
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy Generator, got {type(random_state).__name__}")


def seed_from(random_state) -> int | None:
    """An int seed for learners that take ``random_state`` (None stays None)."""
    if random_state is None:
        return None
    if isinstance(random_state, (numbers.Integral, np.integer)):
        return int(random_state)
    return int(check_random_state(random_state).integers(0, 2**31 - 1))


def check_state_indices(states: np.ndarray, n_states: int, name: str = "states") -> np.ndarray:
    """Integer state indices in [0, n_states) from an (n,) or (n, 1) array."""
    arr = np.asarray(states)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be tabular state indices of shape (n,) or (n, 1), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        as_float = arr.astype(np.float64)
        if not np.all(np.isfinite(as_float)) or not np.all(as_float == np.round(as_float)):
            raise ValueError(f"{name} must hold integer state indices, got non-integer values")
    idx = arr.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= n_states):
        raise ValueError(f"{name} must be indices in [0, {n_states}), got values in [{idx.min()}, {idx.max()}]")
    return idx


def plain(value):
    """``value`` for a message: numpy scalars become Python scalars (``np.int64(1)`` -> ``1``),
    arrays and sequences lists of them; everything else is returned as is."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def short_list(values, limit: int = 8) -> str:
    """A list of values for a message, at most ``limit`` shown. A longer list reads
    ``[1, 2, 3, ... (1,248 more)]``."""
    items = [plain(v) for v in (values.tolist() if isinstance(values, np.ndarray) else list(values))]
    if len(items) <= limit:
        return repr(items)
    shown = ", ".join(repr(v) for v in items[:limit])
    return f"[{shown}, ... ({len(items) - limit:,} more)]"


def looks_continuous(values, n_rows: int) -> bool:
    """The rule for action labels that look like real-valued (continuous) actions: floats with
    more than 50 distinct values, more than 10% of the rows distinct, and some not integers."""
    labels = np.unique(np.asarray(values))
    return bool(labels.dtype.kind == "f" and labels.size > 50 and labels.size > 0.1 * n_rows
                and np.any(labels != np.round(labels)))


def clone_learner(model):
    """An unfitted copy of a learner: ``sklearn.base.clone`` when it has ``get_params`` (the
    scikit-learn contract; ``genpqr.data._estimator_base.clone``, the same without importing
    scikit-learn, for the package's light estimators), otherwise ``copy.deepcopy`` -- so any object with ``fit`` and
    ``predict_proba`` (or ``predict``) can be a stage model. A deep copy keeps whatever state
    the object holds; pass an unfitted one."""
    if hasattr(model, "get_params"):
        from ._estimator_base import clone  # scikit-learn's clone; without it for a LightEstimator

        return clone(model)
    import copy

    return copy.deepcopy(model)


def data_row(row: int) -> str:
    """A 0-based position in a frame read from a file, as the user finds it in the file."""
    return f"data row {row + 1} (line {row + 2} of a CSV file with a header)"
