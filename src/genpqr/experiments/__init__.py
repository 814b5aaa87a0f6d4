"""Experiments: the paper's sweeps as configurations, a resumable parallel runner writing one
CSV row per seed x setting x method, and reports (Markdown tables, PNG figures) rebuilt from
the results files.

    genpqr experiment exp2 --seeds 10 --n-jobs 2 --out runs/exp2
    genpqr report runs/exp2
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._runner import run_experiment
    from ._configs import ExperimentConfig, Setting, get_config
    from ._report import write_report

__all__ = ["run_experiment", "get_config", "write_report", "ExperimentConfig", "Setting"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
