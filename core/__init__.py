"""Hookscope's engine: load a model, plan captures and interventions, run, compare.

Pure torch + numpy; never imports Qt, so it works from a script or notebook::

    from hookscope.core import load_model, Plan, compare
    lm = load_model("demo:clamp")
    r = compare(lm.module, lm.example_input, Plan(capture=["0"], clamp={"0": (-0.5, 0.5)}))
    r.output_without, r.output_with, r.captures["0"][0].stats
"""

from importlib.metadata import version as _version

__version__ = _version("hookscope")  # the installed distribution's (pyproject.toml)

from .plan.directions import Add, Project
from .base.devices import available_devices, resolve_device
from .base.errors import (Cancelled, DeviceError, ForwardError, HookscopeError, InputError,
                          PlanError, SpecError)
from .analyses.exercises import feature_extraction_test, modify_hook_test
from .plan.at import At
from .engine.capture_record import CaptureRecord
from .engine.hooks import HookSession
from .model.inputs import parse_input
from .plan.intervention_base import InterventionContext
from .plan.param_values import Param, param
from .plan.intervention_registry import get_kind, kinds, parse_intervention, register
from .plan.interventions import Clamp, Intervention, MeanAblate, Noise, Patch, Scale, Zero
from . import fast as _fast  # plugs the speed-ups into capture (HOOKSCOPE_FAST=0: off)
from .fast.memory import freed_memory_kept, keep_freed_memory, release_freed_memory
from .analyses.analysis import Analysis, AnalysisResult
from .analyses.analysis_registry import get_analysis, register_analysis, registered_analyses
from .analyses.generation import Continuation, GenerateRequest, Generation, generate
from .analyses.model_diff import DiffRequest, diff
from .analyses.model_diff_result import DiffResult, DiffRow
from .analyses.logit_lens import LensHead, LensRequest, LensResult, find_lens_head, logit_lens
from .plan.plan import Plan
from .engine.receipts import Receipt
from .model.sae import (SaeError, SparseAutoencoder, attach_sae, attached_sae, detach_sae, load_sae,
                        saes_of)
from .analyses.sae_features import SaeFeatures, SaeReport, SaeRequest, sae_features
from .plan.sae_interventions import SaeAblate, SaeClamp, SaeEdit, SaeScale
from .engine.run import Baseline, ForwardResult, RunResult, compare, run
from .session.session import Options, Session, SessionEvent
from .session.session_file import SessionFileError
from .model.learned import ModelMemory
from .model.loaded_model import LoadedModel
from .model.sources import demo_names, load_model
from .plan.steer_vector import SteeringVector, load_vector_file, save_vector_file
from .engine.stats import HIST_BINS, TensorStats, summarize
from .model.tree import TreeNode, module_tree
from .analyses.observe import observe

__all__ = [
    "available_devices", "resolve_device",
    "Cancelled", "DeviceError", "ForwardError", "HookscopeError", "InputError", "PlanError", "SpecError",
    "feature_extraction_test", "modify_hook_test",
    "CaptureRecord", "HookSession", "parse_input",
    "Add", "Project", "SteeringVector", "load_vector_file", "save_vector_file", "Receipt",
    "At", "Clamp", "Intervention", "MeanAblate", "Noise", "Patch", "Scale", "Zero",
    "InterventionContext", "Param", "param", "get_kind", "kinds", "parse_intervention", "register",
    "Analysis", "AnalysisResult", "get_analysis", "register_analysis", "registered_analyses",
    "Continuation", "GenerateRequest", "Generation", "generate",
    "DiffRequest", "DiffResult", "DiffRow", "diff",
    "LensHead", "LensRequest", "LensResult", "find_lens_head", "logit_lens",
    "SaeError", "SparseAutoencoder", "attach_sae", "attached_sae", "detach_sae", "load_sae",
    "saes_of",
    "SaeFeatures", "SaeReport", "SaeRequest", "sae_features", "SaeAblate", "SaeClamp", "SaeEdit", "SaeScale",
    "Plan", "keep_freed_memory", "release_freed_memory", "freed_memory_kept",
    "Baseline", "ForwardResult", "RunResult", "compare", "run",
    "Options", "Session", "SessionEvent", "SessionFileError",
    "LoadedModel", "ModelMemory", "demo_names", "load_model",
    "HIST_BINS", "TensorStats", "summarize",
    "TreeNode", "module_tree", "observe",
]
