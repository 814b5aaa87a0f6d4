"""Out-of-core and distributed fits: a Parquet dataset read in chunks of whole episodes (scan),
the sufficient statistics of each pass (statistics), the streamed fit on one machine (fit) and
the same passes on a Dask cluster. Each fit is a strategy ``GenPQR.fit`` runs
(``StreamedFit``, ``DaskFit``): it returns the estimator's fitted state.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._fit import fit_parquet
    from ._distributed import fit_dask
    from ._scan import ParquetSource
    from ._distributed_fqe import ClusterBoostedQ

__all__ = ["fit_parquet", "fit_dask", "ParquetSource", "ClusterBoostedQ"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
