"""The analyses built on runs: sweeps, the logit lens, generation, SAE features,
steering vectors computed from inputs, scans over input sets, and observing a model's
shapes. Each one prepares its runs with :mod:`hookscope.core.engine` and reads their
records; none of them is needed by a single run.

Each analysis is a request following :class:`~.analysis.Analysis` (a frozen dataclass with
a ``name``, its parameters and ``compute(...)``) answered by a result with its JSON form,
registered by name (:func:`register_analysis`); ``Session.analyse(request)`` runs any of them.

Attention patterns (:mod:`.attention_patterns`) are each head's probabilities at an
attention module, computed from the module's own queries and keys.

A scan streams many inputs through one model in batches, giving per-layer statistics,
exact top-k inputs per unit and an intervention's effect per input (accuracy, changed
predictions, a metric without and with).

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .analysis import Analysis, AnalysisResult
from .analysis_registry import (analysis_from_text, get_analysis, register_analysis,
                                registered_analyses, unregister_analysis)
from .attention_families import attention_modules
from .capture_budget import fit_plan_to_budget
from .attention_patterns import AttentionRequest, AttentionResult, LayerAttention
from .generation import Continuation, GenerateRequest, Generation
from .layer_accumulator import LayerAccumulator
from .logit_lens import LensRequest, LensResult, find_lens_head, target_id
from .model_diff import DEFAULT_TOLERANCE, DTYPES, DiffRequest, diff, dtype_of
from .model_diff_layers import LayerPairRequest, LayerPairs, ModelBCache, b_description
from .model_diff_result import DiffResult, DiffRow
from .running_stats import AlignedHistogram, Moments
from .sae_features import SaeFeatures, SaeReport, SaeRequest
from .scan_parts import EffectRow, ScanPartial, merge
from .scan_result import LayerSummary, ScanResult, TopInput, finish
from .scan_saved import SavedInputs, ScanDataError, scan_from_data, scan_to_data
from .scanning import DEFAULT_BUDGET, LABEL_METRICS, ScanJob, ScanRequest, scan, scan_shard, shards
from .steer_diff import (is_file_spec, parse_vector_option, resolve_vectors, vector_spec_files,
                         with_built_vectors)
from .sweep import (SweepRequest, SweepResult, sweep, sweep_result, sweep_size, template_plan,
                    template_sources)
from .sweep_axes import DEFAULT_MAX_CELLS
from .sweep_cells import CellValue, SweepContext, prepare_sweep, sweep_cells
from .sweep_estimate import EstimateRefused, check_estimable, check_metric_estimable, spearman
from .sweep_inputs import check_grids, sweep_over_inputs
from .sweep_metrics import METRICS

__all__ = ["Analysis", "AnalysisResult", "fit_plan_to_budget", "AttentionRequest", "AttentionResult", "LayerAttention",
           "attention_modules",
           "analysis_from_text", "get_analysis", "register_analysis",
           "registered_analyses", "unregister_analysis", "AlignedHistogram", "CellValue", "check_estimable", "check_metric_estimable", "Continuation", "DEFAULT_BUDGET", "DEFAULT_MAX_CELLS",
           "DEFAULT_TOLERANCE", "DTYPES", "DiffRequest", "DiffResult", "DiffRow", "diff", "dtype_of",
           "LayerPairRequest", "LayerPairs", "ModelBCache", "b_description",
           "EffectRow", "EstimateRefused", "GenerateRequest", "Generation", "LABEL_METRICS", "LayerAccumulator",
           "LayerSummary", "LensRequest", "LensResult", "METRICS", "Moments", "SaeFeatures",
           "SaeReport", "SaeRequest", "SavedInputs", "ScanDataError", "ScanJob", "ScanPartial",
           "ScanRequest", "ScanResult", "SweepContext", "SweepRequest", "SweepResult", "TopInput",
           "find_lens_head", "finish", "is_file_spec", "merge", "parse_vector_option",
           "prepare_sweep", "check_grids", "resolve_vectors", "scan", "scan_from_data", "scan_shard",
           "scan_to_data", "shards", "spearman", "sweep", "sweep_cells", "sweep_over_inputs",
           "sweep_result", "sweep_size", "target_id", "template_plan", "template_sources",
           "vector_spec_files", "with_built_vectors"]
