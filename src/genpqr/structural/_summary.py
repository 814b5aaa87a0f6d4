r"""The printed summary of a structural fit (``StructuralSummary``, what
``StructuralFit.summary()`` and ``TypedStructuralFit.summary()`` return), in statsmodels' shape:
``print`` it, or read its ``tables``; ``as_text()``, ``as_html()`` and ``as_latex()`` (a table
to paste into a paper) render it; ``summary.after(other)`` shows it below another summary (the
structural table under ``GenPQR.summary()``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..evaluation._tables import SummaryLayout, TableSummary, format_number

__all__ = ["StructuralSummary", "SE_SHORT"]

#: Column headers' names of the standard errors' kinds (the table is narrow).
SE_SHORT = {"inverse Hessian": "inv. Hessian"}


@dataclass(frozen=True, repr=False)
class StructuralSummary(TableSummary):
    """The summary of a structural fit (:meth:`StructuralFit.summary`): ``print`` it, or read its
    ``tables`` (``[header, coefficients]``, DataFrames), ``to_frame()`` (the coefficients) and
    ``notes``; ``as_text()``, ``as_html()``, ``as_latex()``; in a notebook it renders as HTML.

    Attributes
    ----------
    header : list of (str, str)
        Estimator, log-likelihood, choices, parameters, discount, iterations, standard errors.
    coefficients : DataFrame
        ``coefficient_frame``.
    level : float
    notes : list of str
    title : str
    """

    header: list
    coefficients: object
    level: float
    notes: list
    title: str = "Structural estimation results"

    @property
    def tables(self) -> list:
        import pandas as pd

        head = pd.DataFrame(self.header, columns=["item", "value"]).set_index("item")
        return [head, self.coefficients]

    def to_frame(self):
        """The coefficient table (a copy)."""
        return self.coefficients.copy()

    def layout(self) -> SummaryLayout:
        c = self.coefficients
        kind = c["std_error_kind"].iloc[0] if len(c) else "none"
        kind = SE_SHORT.get(kind, kind)
        lo, hi = (0.5 - self.level / 2), (0.5 + self.level / 2)
        se_head = f"SE ({kind})" if kind != "none" else "SE"
        se_w = max(18, len(se_head) + 2)
        columns = [("estimate", 10), (se_head, se_w), ("z", 9), ("P>|z|", 8), (f"[{lo:.3g}", 11), (f"{hi:.3g}]", 10)]
        rows = []
        for name, row in c.iterrows():
            p = "-" if np.isnan(row.p_value) else f"{row.p_value:.3f}"
            z = "-" if np.isnan(row.z) else f"{row.z:.3f}"
            rows.append((str(name), [format_number(row.estimate), format_number(row.std_error, se_w), z, p,
                                     format_number(row.ci_low, 11), format_number(row.ci_high)]))
        return SummaryLayout(self.title, list(self.header), columns, rows, list(self.notes))
