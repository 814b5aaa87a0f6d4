"""Experiments: the paper's sweeps as configurations, a resumable parallel runner writing one
CSV row per seed x setting x method, and reports (Markdown tables, PNG figures) rebuilt from
the results files.

    genpqr experiment exp2 --seeds 10 --n-jobs 2 --out runs/exp2
    genpqr report runs/exp2
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from .configs import EXPERIMENTS, ExperimentConfig, Setting, get_config
    from .methods import METHODS, Method, get_method, register
    from .report import write_report
    from .runner import RunSummary, run_experiment

__all__ = ["EXPERIMENTS", "ExperimentConfig", "Setting", "get_config", "METHODS", "Method", "get_method", "register",
           "run_experiment", "RunSummary", "write_report"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
