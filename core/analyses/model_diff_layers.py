"""Model A against model B at a few layers, as a window's layer panels show them.

After a model diff (:mod:`.model_diff`) a person picks a layer and wants to see it the way
the panels show a run without and with the interventions: both models' outputs of that
layer in the same histogram bins, side by side, and how far apart they are.
:class:`LayerPairRequest` runs one forward of each model capturing only those layers (the
plan's interventions applied to both, as in the diff, each model with its own hooks) and
answers :class:`LayerPairs`: model B's records, each holding model A's same call as its
baseline (binned with it) and a :class:`~hookscope.core.engine.capture_record.ModelPair`
that names the two and gives their difference as the diff's row does, with their
display-ready numbers made here, in the runner's thread.

Memory: the layers asked, once per model (never the whole diff's layers); model B is
built once (a copy of A changed as asked, or loaded) and kept in the request's
:class:`ModelBCache` while its owner (the window's open comparison) keeps it.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from ..base.devices import resolve_device
from ..base.errors import ForwardError, PlanError
from ..base.meaning import OutputMeaning
from ..engine.capture_record import CaptureRecord, ModelPair, resolve_records
from ..engine.forward_state import restore, snapshot
from ..engine.record_stats import reference_of
from ..engine.run import ForwardResult, place_module, run, stop_points
from ..plan.plan import Plan
from ..views.display import ResultDisplay, record_display
from .model_diff import DiffRequest, _b_forward_error, _device_of, _float_dtype, inputs_for
from .model_diff_result import PairSums


class ModelBCache:
    """Model B kept between requests for one model A and one :class:`DiffRequest` (a
    window holds one while its comparison is open and clears it when it closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[tuple, nn.Module] | None = None

    def model_b(self, diff: DiffRequest, module_a: nn.Module) -> nn.Module:
        """``diff``'s model B against ``module_a``: the one kept where it was built for
        them, else built now (and kept in its place)."""
        key = (weakref.ref(module_a), diff, id(diff.b_module), _device_of(module_a))
        with self._lock:
            held = self._held
        if held is not None and held[0] == key:
            return held[1]
        b = diff.model_b(module_a)
        with self._lock:
            self._held = (key, b)
        return b

    def clear(self) -> None:
        """Let model B go."""
        with self._lock:
            self._held = None

    @property
    def holds(self) -> bool:
        return self._held is not None

    # Sent to another process (a Ray actor's runner) it arrives empty: model B is built
    # there, next to the model A it runs beside.
    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, _state: dict) -> None:
        self.__init__()  # type: ignore[misc]


def b_description(diff: DiffRequest, a: str) -> str:
    """Model B in words, against model A called ``a``: its spec (A's where it is a copy),
    then the weights file, dtype and device that make it differ."""
    words = diff.b_spec or ("a module" if diff.b_module is not None else a)
    if diff.b_weights:
        words += f" with {Path(diff.b_weights).name}"
    if diff.b_dtype:
        words += f" in {diff.b_dtype}"
    if diff.b_device:
        words += f" on {diff.b_device}"
    return words


@dataclass
class LayerPairs:
    """Model B's records of the layers asked, each with model A's same call as its baseline
    and a :class:`ModelPair` (``record.pair``) naming the two; ``display`` their numbers
    made ready to draw (by ``(path, call, leaf)``, as a run's ``ResultDisplay``)."""

    captures: dict[str, list[CaptureRecord]]
    a: str
    b: str
    display: ResultDisplay | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "layers": [
            {"path": r.path, "call": r.call, "leaf": r.leaf,
             "max_abs_diff": r.pair.max_abs_diff, "relative_change": r.pair.relative_change,
             "cosine": r.pair.cosine}
            for recs in self.captures.values() for top in recs for r in top.leaves
            if r.pair is not None]}


@dataclass(frozen=True)
class LayerPairRequest:
    """Model A (the session's model) and ``diff``'s model B captured at ``layers``, with the
    plan's interventions applied to both: a :class:`LayerPairs`. ``a``: model A in words
    (its spec). ``cache``: where model B is kept between requests (``None``: built for
    each)."""

    diff: DiffRequest
    layers: tuple[str, ...]
    a: str = "model A"
    cache: ModelBCache | None = field(default=None, compare=False, repr=False)
    name: ClassVar[str] = "diff_layers"

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Callable[[], bool] | None = None
                ) -> LayerPairs:
        place_module(module, resolve_device(device))
        b = self.cache.model_b(self.diff, module) if self.cache is not None \
            else self.diff.model_b(module)
        layers = tuple(dict.fromkeys(p for p in self.layers if p))
        # the layers asked, their tensors kept whatever the session keeps (a few layers)
        asked = dataclasses.replace(plan, capture=layers, keep_tensors=True)
        codec = meaning.codec
        got_a = _forward(module, inputs_for(module, inputs, _device_of(module)), asked, codec,
                         should_stop, None, "model A")
        dev_b = _device_of(b)
        try:
            got_b = _forward(b, inputs_for(b, inputs, dev_b), asked, codec, should_stop,
                             got_a.captures, "model B")
        except ForwardError as exc:
            raise _b_forward_error(exc, _float_dtype(b), dev_b) from exc
        a_name, b_name = self.a, b_description(self.diff, self.a)
        captures = {path: [rec for rec in got_b.captures.get(path, ())
                           if _paired(rec, a_name, b_name)] for path in layers}
        resolve_records(captures)   # the statistics now, in this thread
        shown = ResultDisplay(records={(r.path, r.call, r.leaf): d for recs in captures.values()
                                       for top in recs for r in top.leaves
                                       if (d := record_display(r, reference_of)) is not None})
        return LayerPairs(captures, a_name, b_name, shown)


def _forward(module: nn.Module, x: Any, plan: Plan, codec: Any,
             should_stop: Callable[[], bool] | None,
             baseline: dict[str, list[CaptureRecord]] | None, which: str) -> ForwardResult:
    """One forward of ``module`` with ``plan``, left as it was found (buffers, RNG)."""
    try:
        plan.resolve(module)
    except PlanError as exc:
        raise PlanError(f"{which}: {exc}") from exc
    start = snapshot(module)
    try:
        with stop_points(module, should_stop):
            return run(module, x, plan, str(_device_of(module)), codec, baseline=baseline)
    finally:
        restore(module, start)


def _paired(top: CaptureRecord, a: str, b: str) -> bool:
    """Give each leaf of ``top`` (model B's record, model A's as its baseline) its
    :class:`ModelPair`, both tensors in the wider of their dtypes; whether A had that call
    (a call only B made has nothing to compare with and is left out)."""
    if top.baseline_tensor is None:
        return False
    for rec in top.leaves:
        a_t, b_t = rec.baseline_tensor, rec.tensor
        if a_t is None or b_t is None:
            continue
        wide = torch.promote_types(a_t.dtype, b_t.dtype)
        if b_t.dtype != wide:   # a bfloat16 model B drawn in A's float32 (exactly its values)
            rec.tensor = b_t = b_t.to(wide)
            if rec.pre_tensor is not None:
                rec.pre_tensor = rec.pre_tensor.to(wide)
        if a_t.dtype != wide:
            rec.baseline_tensor = a_t = a_t.to(wide)
        sums = PairSums()
        sums.add(a_t, b_t)
        row = sums.row(rec.path, rec.call)
        rec.pair = ModelPair(a, b, row.max_abs_diff, row.relative_change, row.cosine)
    return True
