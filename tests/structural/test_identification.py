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
