"""Input sets and scans over them: many inputs through one model, streamed in batches,
giving per-layer statistics, exact top-k inputs per unit and an intervention's effect
per input (accuracy, changed predictions, a metric without and with).

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .input_sets import (IMAGE_PATTERNS, SET_PATTERNS, ImageFolder, InputSet, JsonLines,
                         TensorBatch, TextLines, image_set_root, open_inputs)
from .layer_accumulator import LayerAccumulator
from .running_stats import AlignedHistogram, Moments
from .scanning import DEFAULT_BUDGET, LABEL_METRICS, ScanJob, ScanRequest, scan, scan_shard, shards
from .scan_parts import EffectRow, ScanPartial, merge
from .scan_saved import SavedInputs, ScanDataError, scan_from_data, scan_to_data
from .scan_result import LayerSummary, ScanResult, TopInput, finish

__all__ = ["AlignedHistogram", "DEFAULT_BUDGET", "EffectRow", "ImageFolder", "InputSet",
           "SavedInputs", "ScanDataError", "scan_from_data", "scan_to_data",
           "JsonLines", "LABEL_METRICS", "LayerAccumulator", "LayerSummary", "Moments",
           "ScanJob", "ScanPartial", "ScanRequest", "ScanResult", "TensorBatch", "TextLines", "TopInput",
           "finish", "merge", "open_inputs", "IMAGE_PATTERNS", "SET_PATTERNS", "image_set_root", "scan", "scan_shard", "shards"]
