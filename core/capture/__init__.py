"""The engine: run/compare, HookSession, CaptureRecord, statistics, nested outputs, forward
state, output difference, verdict, observe. It is complete and correct on its own (the
reference path); the speed-ups of hookscope.core.fast plug in through :mod:`.fast_slot`,
and ``HOOKSCOPE_FAST=0`` switches them off.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .capture_budget import fit_plan_to_budget
from .fast_slot import FAST_ENV
from .generation import Continuation, GenerateRequest, Generation
from .logit_lens import LensRequest, LensResult, find_lens_head, target_id
from .output_diff import flat_array, flat_floats
from .record_stats import reference_of
from .sae_features import SaeFeatures, SaeReport, SaeRequest
from .sweep import SweepRequest, SweepResult, sweep, sweep_result, sweep_size
from .sweep_axes import DEFAULT_MAX_CELLS
from .sweep_cells import CellValue, SweepContext, prepare_sweep, sweep_cells
from .sweep_metrics import METRICS
from .steer_diff import is_file_spec, parse_vector_option, resolve_vectors, with_built_vectors
from .verdict import output_verdict
from .receipts import plan_effect

__all__ = ["FAST_ENV", "DEFAULT_MAX_CELLS", "METRICS", "SweepRequest", "SweepResult", "sweep", "sweep_size",
           "CellValue", "SweepContext", "prepare_sweep", "sweep_cells", "sweep_result", "Continuation", "GenerateRequest", "Generation", "LensRequest", "LensResult",
           "SaeFeatures", "SaeReport", "SaeRequest", "find_lens_head", "fit_plan_to_budget",
           "flat_array", "flat_floats", "is_file_spec", "output_verdict", "parse_vector_option", "plan_effect",
           "reference_of", "resolve_vectors", "target_id", "with_built_vectors"]
