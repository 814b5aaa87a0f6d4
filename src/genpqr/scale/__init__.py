"""Out-of-core and distributed fits: Parquet streaming (chunked statistics, FQE and tabular
passes) and the same passes on a Dask cluster.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._stream import DEFAULT_CHUNK_ROWS, ParquetSource, Partition, RowGroup, RowGroupScan, as_source, scan_row_groups
    from ._stream_fit import DEFAULT_SAMPLE_ROWS, check_sample_rows, fit_parquet
    from ._stream_fqe import StreamedFQE, check_structure, fit_streamed_fqe, fqe_pass
    from ._stream_stats import (ChoiceSummary, ClipSummary, LSTDPart, RowDraws, TabularCounts, add_parts, bellman_chunk,
                                choice_frame, choice_summary, chunk_choice_summary, clip_chunk, clip_pass,
                                concatenate_chunks, lstd_pass, row_count_pass, sample_pass, tabular_chunk_counts,
                                tabular_pass)
    from ._stream_steps import (check_actions, clone_estimator, closed_form_model, finish_closed_form, make_diagnostics,
                                path_kind, prefitted_policy, resolve_clip, sample_policy, start)
    from ._stream_tabular import check_tabular, counts_of_source, fit_counts, fit_tabular
    from ._stream_scan import (SourceScan, check_sorted, checked_batches, dataset_columns, open_dataset, read_footer,
                               scan_frames, unified_schema)
    from ._distributed import POLICIES, fit_dask, plan_partitions
    from ._distributed_fqe import (BellmanBlock, ClusterBoostedQ, advance_block, bellman_block_pass, block_features,
                                   check_boosted, fit_boosted_fqe, is_boosted_q_model, lightgbm_regressor_params)

__all__ = ["ParquetSource", "Partition", "RowGroup", "RowGroupScan", "scan_row_groups", "as_source",
           "DEFAULT_CHUNK_ROWS", "fit_parquet", "DEFAULT_SAMPLE_ROWS", "check_sample_rows", "StreamedFQE", "fqe_pass",
           "fit_streamed_fqe", "check_structure", "TabularCounts", "ChoiceSummary", "ClipSummary", "LSTDPart",
           "RowDraws", "tabular_chunk_counts", "bellman_chunk", "choice_summary", "chunk_choice_summary", "clip_chunk",
           "concatenate_chunks", "tabular_pass", "row_count_pass", "sample_pass", "clip_pass", "lstd_pass",
           "choice_frame", "add_parts", "start", "path_kind", "resolve_clip", "prefitted_policy", "sample_policy",
           "closed_form_model", "finish_closed_form", "check_actions", "make_diagnostics", "clone_estimator",
           "fit_tabular", "fit_counts", "counts_of_source", "check_tabular", "SourceScan", "scan_frames",
           "unified_schema", "open_dataset", "dataset_columns", "checked_batches", "read_footer", "check_sorted",
           "fit_dask", "plan_partitions", "POLICIES", "BellmanBlock", "ClusterBoostedQ", "bellman_block_pass",
           "advance_block", "block_features", "is_boosted_q_model", "lightgbm_regressor_params", "check_boosted",
           "fit_boosted_fqe"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
