"""Out-of-core and distributed fits: a Parquet dataset read in chunks of whole episodes (scan),
the sufficient statistics of each pass (statistics), the streamed fit on one machine (fit) and
the same passes on a Dask cluster. Each fit is a strategy ``GenPQR.fit`` runs
(:class:`StreamedFit`, :class:`DaskFit`): it returns the estimator's fitted state.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._scan import (DEFAULT_CHUNK_ROWS, ParquetSource, Partition, RowGroup, RowGroupScan, SourceScan, as_source,
                        check_sorted, checked_batches, dataset_columns, open_dataset, read_footer, scan_frames,
                        scan_row_groups, unified_schema)
    from ._statistics import (ChoiceSummary, ClipSummary, LSTDPart, RowDraws, TabularCounts, add_parts, bellman_chunk,
                              choice_frame, choice_summary, chunk_choice_summary, clip_chunk, clip_pass,
                              concatenate_chunks, fqe_pass, lstd_pass, row_count_pass, sample_pass, tabular_chunk_counts,
                              tabular_pass)
    from ._fit import DEFAULT_SAMPLE_ROWS, Start, StreamedFit, StreamedFQE, fit_counts, fit_parquet
    from ._distributed import POLICIES, DaskFit, fit_dask, plan_partitions
    from ._distributed_fqe import (BellmanBlock, ClusterBoostedQ, advance_block, bellman_block_pass, block_features,
                                   is_boosted_q_model)

__all__ = ["ParquetSource", "Partition", "RowGroup", "RowGroupScan", "SourceScan", "scan_row_groups", "as_source",
           "DEFAULT_CHUNK_ROWS", "scan_frames", "unified_schema", "open_dataset", "dataset_columns", "checked_batches",
           "read_footer", "check_sorted",
           "TabularCounts", "ChoiceSummary", "ClipSummary", "LSTDPart", "RowDraws", "tabular_chunk_counts",
           "bellman_chunk", "choice_summary", "chunk_choice_summary", "clip_chunk", "concatenate_chunks",
           "tabular_pass", "row_count_pass", "sample_pass", "clip_pass", "lstd_pass", "fqe_pass", "choice_frame",
           "add_parts",
           "fit_parquet", "StreamedFit", "DEFAULT_SAMPLE_ROWS", "Start", "fit_counts", "StreamedFQE",
           "fit_dask", "DaskFit", "plan_partitions", "POLICIES",
           "BellmanBlock", "ClusterBoostedQ", "bellman_block_pass", "advance_block", "block_features",
           "is_boosted_q_model"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
