"""Hookscope's engine: load a model, plan captures and interventions, run, compare.

Pure torch + numpy; never imports Qt, so it works from a script or notebook::

    from hookscope.core import load_model, Plan, compare
    lm = load_model("demo:clamp")
    r = compare(lm.module, lm.example_input, Plan(capture=["0"], clamp={"0": (-0.5, 0.5)}))
    r.output_without, r.output_with, r.captures["0"][0].stats
"""

from .directions import Add, Project
from .devices import available_devices, resolve_device
from .errors import (Cancelled, DeviceError, ForwardError, HookscopeError, InputError, PlanError,
                     SpecError)
from .exercises import feature_extraction_test, modify_hook_test
from .at import At
from .capture_record import CaptureRecord
from .hooks import HookSession
from .inputs import parse_input
from .intervention_base import InterventionContext, Param, param
from .intervention_registry import get_kind, kinds, parse_intervention, register
from .interventions import Clamp, Intervention, MeanAblate, Noise, Patch, Scale, Zero
from .memory import apply_default as _apply_memory_default
from .memory import freed_memory_kept, keep_freed_memory, release_freed_memory
from .generation import Continuation, GenerateRequest, Generation, generate
from .logit_lens import LensHead, LensRequest, LensResult, find_lens_head, logit_lens
from .plan import Plan
from .receipts import Receipt
from .sae import SaeError, SparseAutoencoder, attach_sae, attached_sae, detach_sae, load_sae
from .sae_features import SaeFeatures, SaeReport, SaeRequest, sae_features
from .sae_interventions import SaeAblate, SaeClamp, SaeEdit, SaeScale
from .run import Baseline, ForwardResult, RunResult, compare, run
from .session import Options, Session, SessionEvent
from .session_file import SessionFileError
from .sources import LoadedModel, demo_names, load_model
from .steer_vector import SteeringVector, load_vector_file
from .stats import HIST_BINS, TensorStats, summarize
from .tree import TreeNode, module_tree, observe

__all__ = [
    "available_devices", "resolve_device",
    "Cancelled", "DeviceError", "ForwardError", "HookscopeError", "InputError", "PlanError", "SpecError",
    "feature_extraction_test", "modify_hook_test",
    "CaptureRecord", "HookSession", "parse_input",
    "Add", "Project", "SteeringVector", "load_vector_file", "Receipt",
    "At", "Clamp", "Intervention", "MeanAblate", "Noise", "Patch", "Scale", "Zero",
    "InterventionContext", "Param", "param", "get_kind", "kinds", "parse_intervention", "register",
    "Continuation", "GenerateRequest", "Generation", "generate",
    "LensHead", "LensRequest", "LensResult", "find_lens_head", "logit_lens",
    "SaeError", "SparseAutoencoder", "attach_sae", "attached_sae", "detach_sae", "load_sae",
    "SaeFeatures", "SaeReport", "SaeRequest", "sae_features", "SaeAblate", "SaeClamp", "SaeEdit", "SaeScale",
    "Plan", "keep_freed_memory", "release_freed_memory", "freed_memory_kept",
    "Baseline", "ForwardResult", "RunResult", "compare", "run",
    "Options", "Session", "SessionEvent", "SessionFileError",
    "LoadedModel", "demo_names", "load_model",
    "HIST_BINS", "TensorStats", "summarize",
    "TreeNode", "module_tree", "observe",
]

# Keep freed memory for reuse by default (HOOKSCOPE_KEEP_FREED_MEMORY=0 opts out):
# see hookscope.core.memory for what it changes and why.
_apply_memory_default()
