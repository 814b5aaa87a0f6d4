"""Parameters the choices do not identify: shown alike by NPL and NFXP, with the identified combination."""

import warnings

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, datasets, from_pandas, normalization as N
from genpqr.structural import fit_structural, identification

#: NPL and NFXP stop at different points of the flat ridge but reach the same maximum: the identified
#: combination and the identified parameter agree to the optimizers' tolerance (1e-6), their standard
#: errors (the same generalized inverse of the OPG at nearly the same point) to 1e-4 relative.
EST_TOL, SE_RTOL = 1e-6, 1e-4


def test_identification_of_a_duplicated_column():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(200, 3))
    scores[:, 2] = scores[:, 0]  # the third feature repeats the first: only theta_0 + theta_2 matters
    opg = scores.T @ scores
    ident = identification(opg, np.array([0.5, 2.0, -0.2]), ["a", "b", "c"])
    assert list(ident.identified) == [False, True, False] and ident.null_space.shape == (3, 1)
    (combo,) = ident.combinations
    assert combo.coefficients == pytest.approx({"a": 1.0, "c": 1.0}) and combo.describe() == "a + c"
    assert combo.estimate == pytest.approx(0.3, abs=1e-12)
    # its variance is that of the one-feature model's parameter
    reduced = np.linalg.inv(scores[:, :2].T @ scores[:, :2])
    assert combo.std_error == pytest.approx(np.sqrt(reduced[0, 0]), rel=1e-8)
    full = identification(scores[:, :2].T @ scores[:, :2], np.zeros(2), ["a", "b"])
    assert full.all_identified and full.combinations == ()


@pytest.fixture(scope="module")
def collinear():
    """The shipped choices with the features bonus, level and bonus2 = bonus."""
    frame = pd.read_csv(datasets.path("choices"))
    feats = pd.read_csv(datasets.path("features"))
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact").fit(data)
    labels = list(model.encoder_.labels)
    X = np.zeros((*model.reward_table().shape, 3))
    X[feats["state"], [labels.index(a) for a in feats["action"]]] = feats[["bonus", "level", "bonus"]].to_numpy()
    return model, X


def test_npl_and_nfxp_show_the_same(collinear):
    model, X = collinear
    names = ["bonus", "level", "bonus2"]
    fits = {}
    for est in ("npl", "nfxp"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits[est] = fit_structural(model, X, names=names, estimator=est)
        messages = [str(w.message) for w in caught]
        assert any("not identified" in m for m in messages)
        assert not any(w.category.__name__ == "ConvergenceWarning" for w in caught), messages
        assert fits[est].converged
    one = fit_structural(model, X[:, :, :2], names=["bonus", "level"], estimator="npl")
    frames = {est: fit.to_frame() for est, fit in fits.items()}
    for est, frame in frames.items():
        assert list(frame.index) == ["bonus", "level", "bonus2", "bonus + bonus2"]
        assert list(frame["identified"]) == [False, True, False, True]
        assert frame.loc[["bonus", "bonus2"], ["estimate", "std_error", "ci_low", "ci_high"]].isna().all().all()
        assert fits[est].params_[["bonus", "bonus2"]].isna().all()
        text = str(fits[est].summary())
        assert "not identified by the choices" in text and "bonus + bonus2" in text
        # the identified combination is the one-feature model's bonus; level is unchanged
        assert frame.loc["bonus + bonus2", "estimate"] == pytest.approx(one.theta[0], abs=EST_TOL)
        assert frame.loc["bonus + bonus2", "std_error"] == pytest.approx(one.std_error[0], rel=SE_RTOL)
        assert frame.loc["level", "estimate"] == pytest.approx(one.theta[1], abs=EST_TOL)
        assert frame.loc["level", "std_error"] == pytest.approx(one.std_error[1], rel=SE_RTOL)
    pd.testing.assert_frame_equal(frames["npl"].drop(columns="std_error_robust"),
                                  frames["nfxp"].drop(columns="std_error_robust"), atol=EST_TOL, rtol=SE_RTOL)


@pytest.fixture(scope="module")
def bus_design():
    """Rust's bus engine (60 mileage states, two types of RC pooled: 9,000 choices) and the fit
    of its two features RC and theta11 (every parameter identified)."""
    from genpqr.envs._rust import TYPED_RC, bus_engine, simulate_typed_buses
    from genpqr.structural import estimate_structural
    from genpqr.structural._kernels import choice_counts

    engines = tuple(bus_engine(n_states=60, rc=rc, cost_scale=0.005) for rc in TYPED_RC)
    panel = simulate_typed_buses(engines, 60, 150, random_state=0)
    m = engines[0]
    X, n = m.features("rust"), choice_counts(panel.transitions, 60)
    base = estimate_structural("npl", X, n, m.kernel, m.beta, names=["RC", "theta11"])
    return m, X, n, base


#: Third columns that change no choice probability: a copy of RC's (only RC + dup identified), a
#: column of zeros and a column of ones (a constant on every state and action: the policy is that of
#: the reward shifted by a constant), whose parameter the choices do not identify at all.
FLAT_COLUMNS = {"dup": lambda X: X[..., :1], "zero": lambda X: np.zeros_like(X[..., :1]),
                "const": lambda X: np.ones_like(X[..., :1])}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("column", list(FLAT_COLUMNS))
@pytest.mark.parametrize("estimator", ["npl", "nfxp"])
def test_single_type_fit_on_a_flat_column_reaches_the_maximum(bus_design, estimator, column, threads):
    """A third feature along which the likelihood is flat: the maximizers step on the identified
    directions (a ones column once sent NPL to 2e14 and NFXP's inner solve to a residual of 6e14,
    after a stalled Newton reported converged), so npl and nfxp reach the two-feature maximum at
    any BLAS thread count, report the flat parameter as not identified (NaN, identified False)
    and the identified combination with the two-feature fit's estimate and standard error."""
    from threadpoolctl import threadpool_limits

    from genpqr.exceptions import ConvergenceWarning
    from genpqr.structural import estimate_structural

    m, X, n, base = bus_design
    X3 = np.concatenate([X, FLAT_COLUMNS[column](X)], axis=-1)
    with threadpool_limits(threads), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", ConvergenceWarning)
        fit = estimate_structural(estimator, X3, n, m.kernel, m.beta, names=["RC", "theta11", column])
    messages = [str(w.message) for w in caught]
    assert any(f"the combination of {['RC', column] if column == 'dup' else [column]}" in t
               and "not identified" in t for t in messages), messages
    assert fit.converged and "NOT CONVERGED" not in fit.convergence and "flat ridge" in fit.convergence
    assert fit.loglik == pytest.approx(base.loglik, abs=1e-8)
    assert np.all(np.abs(fit.theta) < 100)  # nothing ran off along the flat direction
    frame = fit.to_frame()
    assert frame.loc[column, ["estimate", "std_error"]].isna().all() and not frame.loc[column, "identified"]
    assert frame.loc["theta11", "estimate"] == pytest.approx(base.theta[1], rel=1e-8)
    assert frame.loc["theta11", "std_error"] == pytest.approx(base.std_error[1], rel=1e-6)
    rc = "RC + dup" if column == "dup" else "RC"
    assert frame.loc[rc, "estimate"] == pytest.approx(base.theta[0], rel=1e-8)
    assert frame.loc[rc, "std_error"] == pytest.approx(base.std_error[0], rel=1e-6)
    assert frame.loc[rc, "identified"]


@pytest.mark.parametrize("threads", [1, 2])
def test_npl_logit_steps_on_the_identified_directions(bus_design, threads):
    """``fit_npl`` itself (the logit solve of each NPL step) does not step along a flat direction:
    with a ones column its parameter stays at its start and RC, theta11 are the two-feature MLE."""
    from threadpoolctl import threadpool_limits

    from genpqr.structural._ccp import fit_npl

    m, X, n, base = bus_design
    X3 = np.concatenate([X, np.ones_like(X[..., :1])], axis=-1)
    with threadpool_limits(threads), warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_npl(np.full(n.shape, 0.5), X3, n, m.kernel, m.beta)
    assert res.converged and abs(res.theta[2]) < 1e-10
    np.testing.assert_allclose(res.theta[:2], base.theta, rtol=1e-8)
