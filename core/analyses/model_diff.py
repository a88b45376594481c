"""Two models compared layer by layer on one input: where do they part ways?

Base against fine-tuned, float32 against bfloat16, CPU against CUDA, before and after a
port: both models run on the same input, every leaf module's output is taken per call,
and the calls are aligned by module path and call number. Each aligned call is a
:class:`~.model_diff_result.DiffRow` (largest ``|a - b|``, relative change
``||a - b|| / ||a||``, cosine), in the order A's calls finish; the first row whose
relative change passes the tolerance is named (:attr:`DiffResult.first_divergent`).

The default tolerance, :data:`DEFAULT_TOLERANCE` = 1e-3, sits between the two kinds of
difference a person asks about: the same float32 model computed in another order (another
thread count, device or kernel) moves a layer by about 1e-7 to 1e-6 relative, far below
it; the same model in bfloat16 (8 bits of mantissa, a rounding of ~4e-3 on every value)
moves every layer by ~1e-2, and float16 by ~1e-3 or more, above it; a changed weight
moves its layer by its own relative size. So at the default, arithmetic noise names no
layer, and a change of precision or weights names the first layer it reaches.

``hookscope.core.diff(model_a, model_b, inputs)`` is the function, :class:`DiffRequest`
the analysis (registered as ``diff``: ``Session.diff``/``Session.analyse`` run it on the
session's model as model A, against a spec, a module, or the same model with other
weights, dtype or device). Memory: only A's outputs are held (see :mod:`.model_diff_pass`).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from ..base.devices import resolve_device
from ..base.errors import DeviceError, ForwardError, PlanError
from ..base.meaning import OutputMeaning
from ..base.nested import map_tensors
from ..engine.forward_state import to_device
from ..engine.run import place_module
from ..model.inputs import parse_input
from ..model.loaded_model import LoadedModel
from ..model.sources import load_model
from ..model.weights import apply_weights
from ..plan.plan import Plan
from .model_diff_pass import run_a, run_b
from .model_diff_result import DiffResult, compare_outputs

#: See the module docstring: above float32 reordering (~1e-6), below bfloat16 (~1e-2).
DEFAULT_TOLERANCE = 1e-3
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64}


def dtype_of(name: str | torch.dtype | None) -> torch.dtype | None:
    """``"bfloat16"`` (or a torch dtype) as a torch dtype; a :class:`PlanError` listing the
    names otherwise."""
    if name is None or isinstance(name, torch.dtype):
        return name
    got = DTYPES.get(name.strip().lower().removeprefix("torch."))
    if got is None:
        raise PlanError(f"dtype {name!r}: choose one of {', '.join(DTYPES)}")
    return got


def _float_dtype(module: nn.Module) -> torch.dtype | None:
    return next((p.dtype for p in itertools.chain(module.parameters(), module.buffers())
                 if p.is_floating_point()), None)


def _device_of(module: nn.Module) -> torch.device:
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    return first.device if first is not None else torch.device("cpu")


def inputs_for(module: nn.Module, x: Any, dev: torch.device) -> Any:
    """``x`` on ``dev``, its floating tensors in ``module``'s floating dtype (a bfloat16 model
    takes bfloat16 pixels; token ids stay integers)."""
    want = _float_dtype(module)
    x = to_device(x, dev)
    if want is None:
        return x
    return map_tensors(lambda t: t.to(want) if t.is_floating_point() and t.dtype != want
                       else t, x)


def model_b_from(model_a: nn.Module, model_b: nn.Module | None, weights: str | None,
                 dtype: torch.dtype | None, dev: torch.device | None,
                 owned: bool = False) -> nn.Module:
    """Model B: ``model_b`` (or a copy of ``model_a`` where none is given) with ``weights``
    loaded, in ``dtype``, on ``dev``. A caller's module is never changed: a copy is
    converted (``owned``: ``model_b`` was loaded for this diff and is changed in place)."""

    changes = weights is not None or dtype is not None or dev is not None
    if model_b is None:
        if not changes:
            return model_a
        model_b = copy.deepcopy(model_a)
    elif changes and not owned:
        model_b = copy.deepcopy(model_b)
    if weights is not None:
        apply_weights(model_b, weights)
    if dtype is not None:
        model_b.to(dtype)
    if dev is not None:
        place_module(model_b, dev)
    return model_b


_DTYPE_WORDS = ("Half", "BFloat16", "Float16", "half", "bfloat16")


def _b_forward_error(exc: ForwardError, dtype: torch.dtype | None, dev: torch.device) -> Exception:
    text = str(exc)
    unsupported = any(w in text for w in ("not implemented for", "not supported",
                                           "Unsupported dtype"))
    if unsupported and any(w in text for w in _DTYPE_WORDS):
        name = str(dtype or "this dtype").removeprefix("torch.")
        cause = exc.__cause__
        why = (f"{type(cause).__name__}: {str(cause).strip().splitlines()[0]}"
               if cause is not None and str(cause).strip() else text)
        return DeviceError(f"model B in {name} cannot run on {dev}: {why}. Choose another "
                           "--b-dtype, or a device that runs it (--b-device cuda)")
    return ForwardError(f"model B cannot take the input: {text}")


def diff_modules(model_a: nn.Module, model_b: nn.Module, inputs: Any, *,
                 tolerance: float = DEFAULT_TOLERANCE, plan: Plan | None = None,
                 meaning: OutputMeaning | None = None, directions: tuple[str, ...] = (),
                 budget_bytes: int | None = None, codec: Any = None,
                 should_stop: Callable[[], bool] | None = None,
                 notes: tuple[str, ...] = ()) -> DiffResult:
    """The diff of two modules where they are (each on its device, in its dtype); see
    :func:`diff`."""
    if not tolerance >= 0:
        raise PlanError(f"tolerance {tolerance!r}: give a relative change of 0 or more, "
                        f"e.g. {DEFAULT_TOLERANCE}")
    plan = Plan() if plan is None else plan
    dev_a, dev_b = _device_of(model_a), _device_of(model_b)
    xa = inputs_for(model_a, inputs, dev_a)
    out_a, keeper = run_a(model_a, xa, plan, dev_a, codec, budget_bytes, should_stop)
    try:
        out_b, comparer, b_paths = run_b(model_b, inputs_for(model_b, inputs, dev_b), plan,
                                         dev_b, codec, keeper.kept, directions, should_stop)
    except ForwardError as exc:
        raise _b_forward_error(exc, _float_dtype(model_b), dev_b) from exc
    a_paths = list(dict.fromkeys(p for p, _ in keeper.kept))
    rows = tuple(comparer.rows[k] for k in keeper.kept if k in comparer.rows)
    keeper.kept.clear()  # A's outputs go now, not with the frames that hold the keeper
    ran_b = set(comparer.calls)
    if not rows and a_paths and ran_b:
        raise PlanError(f"model A and model B have no layer in common (A's leaves: "
                        f"{_few(a_paths)}; B's: {_few(sorted(ran_b))}); diff aligns layers by "
                        "their module path")
    missing = [p for p in directions if p not in comparer.vectors]
    if missing:
        raise PlanError(f"--save-direction {missing[0]!r}: no leaf layer of both models has "
                        "that path with a floating output; name one of the diff's rows, e.g. "
                        f"{rows[0].path if rows else '...'}")
    only_a = tuple(p for p in a_paths if p not in ran_b)
    only_b = tuple(p for p in b_paths if p in ran_b and p not in set(a_paths))
    counted = {p: keeper.calls.get(p, 0) for p in a_paths}
    uneven = [p for p in a_paths if p in ran_b and counted[p] != comparer.calls[p]]
    if uneven:
        notes = (*notes, f"{len(uneven)} layer(s) ran a different number of times in A and B "
                         f"(e.g. {uneven[0]!r}: {counted[uneven[0]]} and "
                         f"{comparer.calls[uneven[0]]}); their extra calls have no row")
    output = compare_outputs(_cpu(out_a), _cpu(out_b), meaning)
    return DiffResult(rows, float(tolerance), only_a, only_b, output, dict(comparer.vectors),
                      tuple(notes))


def _cpu(value: Any) -> Any:
    return map_tensors(lambda t: t.detach().cpu(), value)


def _few(paths: list[str], n: int = 4) -> str:
    return ", ".join(paths[:n]) + (", ..." if len(paths) > n else "") if paths else "none"


def diff(model_a: nn.Module | LoadedModel, model_b: nn.Module | LoadedModel | None = None,
         inputs: Any = None, *, tolerance: float = DEFAULT_TOLERANCE, plan: Plan | None = None,
         weights: str | None = None, dtype: str | torch.dtype | None = None,
         device: str | None = None, meaning: OutputMeaning | None = None,
         directions: tuple[str, ...] = (), budget_bytes: int | None = None,
         should_stop: Callable[[], bool] | None = None) -> DiffResult:
    """Model A against model B on ``inputs``, layer by layer: a :class:`DiffResult`.

    ``model_b`` defaults to ``model_a``: with ``weights`` (a state_dict file, read with
    ``weights_only=True``), ``dtype`` (``"bfloat16"``, ``"float16"``, ``"float64"``) or
    ``device`` it is a copy of A changed so (the caller's modules are never changed).
    Models may be modules or :func:`~hookscope.core.load_model` results; ``inputs``
    defaults to A's example input, and a string is an input spec (``text:PROMPT``...).
    ``plan``: its interventions apply to both models. ``meaning``: what the output is (A's,
    when A is a loaded model): a language model's output gets KL(A‖B) per position and
    the top-1 agreement, a classifier's both top-k lists. ``directions``: layers whose mean
    difference (B minus A) the result keeps in ``directions``. ``budget_bytes``: the most
    A's kept outputs may take (default half the free memory of A's device).
    """

    lm_a = model_a if isinstance(model_a, LoadedModel) else None
    module_a = model_a.module if isinstance(model_a, LoadedModel) else model_a
    module_b = model_b.module if isinstance(model_b, LoadedModel) else model_b
    meaning = meaning or (lm_a.meaning if lm_a is not None else None)
    codec = meaning.codec if meaning is not None else None
    if inputs is None or isinstance(inputs, str):
        example = lm_a.example_input if lm_a is not None else None
        if inputs is None and example is None:
            raise PlanError("diff needs an input: give inputs=..., or a loaded model with an "
                            "example input")
        inputs = example if inputs is None else parse_input(inputs, example, codec)
    b = model_b_from(module_a, module_b, weights, dtype_of(dtype),
                     resolve_device(device) if device is not None else None)
    notes = tuple(f"model B: {n}" for n in _b_notes(b, module_a))
    return diff_modules(module_a, b, inputs, tolerance=tolerance, plan=plan, meaning=meaning,
                        directions=tuple(directions), budget_bytes=budget_bytes, codec=codec,
                        should_stop=should_stop, notes=notes)


def _b_notes(b: nn.Module, a: nn.Module) -> list[str]:
    out = []
    da, db = _float_dtype(a), _float_dtype(b)
    if da != db and db is not None:
        out.append(f"runs in {str(db).removeprefix('torch.')} (A in "
                   f"{str(da).removeprefix('torch.')}); its inputs are cast to it and its "
                   "outputs compared in the wider dtype")
    if _device_of(a) != _device_of(b):
        out.append(f"runs on {_device_of(b)} (A on {_device_of(a)})")
    return out


@dataclass(frozen=True)
class DiffRequest:
    """The model diff as an analysis: the session's model (model A) against model B.

    Model B is ``b_module`` where given, else the model ``b_spec`` names (loaded for the
    diff, with ``b_weights``), else a copy of A (with ``b_weights``); then cast to
    ``b_dtype`` and placed on ``b_device`` where given (a copy of A starts on A's device, a
    module given stays on its own). The plan's
    interventions apply to both. ``b_trust_code``: let a pickled ``b_spec`` run (the
    command line's ``--trust-code``). ``directions``: layers whose mean difference is kept
    (:attr:`DiffResult.directions`). ``budget_bytes``: see :func:`diff`.
    """

    b_spec: str | None = None
    b_weights: str | None = None
    b_dtype: str | None = None
    b_device: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    directions: tuple[str, ...] = ()
    budget_bytes: int | None = None
    b_trust_code: bool = False
    b_module: Any = field(default=None, compare=False, repr=False)
    name: ClassVar[str] = "diff"

    def __post_init__(self) -> None:
        dtype_of(self.b_dtype)  # a typo is refused before any forward
        if not self.tolerance >= 0:
            raise PlanError(f"tolerance {self.tolerance!r}: give a relative change of 0 or "
                            f"more, e.g. {DEFAULT_TOLERANCE}")

    def model_b(self, module: nn.Module) -> nn.Module:
        """Model B against model A ``module`` (placed where A runs): loaded, given or copied,
        then converted as the fields say (``module`` itself where nothing changes it)."""
        dev_b = resolve_device(self.b_device) if self.b_device else None
        owned, given = False, self.b_module
        if isinstance(given, LoadedModel):
            given = given.module
        weights = self.b_weights
        if given is None and self.b_spec:
            given, owned, weights = load_model(self.b_spec, self.b_weights,
                                               trust_pickle=self.b_trust_code).module, True, None
        return model_b_from(module, given, weights, dtype_of(self.b_dtype), dev_b, owned)

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Callable[[], bool] | None = None) -> DiffResult:
        place_module(module, resolve_device(device))
        b = self.model_b(module)
        return diff_modules(module, b, inputs, tolerance=self.tolerance, plan=plan,
                            meaning=meaning, directions=self.directions,
                            budget_bytes=self.budget_bytes, codec=meaning.codec,
                            should_stop=should_stop,
                            notes=tuple(f"model B: {n}" for n in _b_notes(b, module)))
