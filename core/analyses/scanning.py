"""A scan: one model over an input set, streamed in batches.

For each batch: one forward without interventions, with a hook on every captured layer
that folds the layer's output into its :class:`~.layer_accumulator.LayerAccumulator`
(the activations of one batch are the most ever held), then, when the request
intervenes, one forward with the interventions (:func:`~..capture.run.run`, the engine
every comparison uses). Per input the top prediction and the metric, without and with,
go into an :class:`~.scan_parts.EffectRow`.

:func:`scan_shard` is the unit of work a pool of workers can run on any subset of the
input numbers; :func:`~.scan_parts.merge` folds their partials together and
:func:`~.scan_result.finish` turns the merged partial into a
:class:`~.scan_result.ScanResult`. :func:`scan` does all three here, in shards of
``shard_size`` inputs, with progress, an ETA and cancelling between batches.

Batches: inputs whose tensors have the same shapes are stacked along the first axis,
as many as fit ``budget_bytes`` (measured on the first input: its captured activations
and output, times three for the intervened forward and the statistics' temporaries),
at most ``max_batch``. A model whose outputs are not batch-first, or an intervention
that runs a source forward (patch, mean), runs one input at a time.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from torch import nn

from ..base.call_args import call_model
from ..base.devices import resolve_device
from ..base.errors import Cancelled, ForwardError, HookscopeError, InputError, PlanError
from ..base.meaning import CLASSES, TOKENS, OutputMeaning
from ..base.nested import map_tensors, tensor_leaves
from ..base.user_text import as_int
from ..engine.forward_state import forward_error_message, to_device
from ..engine.run import place_module, run
from .sweep_metrics import Metric, make_metric, scores
from ..plan.intervention_registry import parse_intervention
from ..plan.plan import Plan
from ..dataset.input_sets import InputSet
from .layer_accumulator import LayerAccumulator
from .scan_parts import EffectRow, ScanPartial, finite
from .scan_result import ScanResult, finish

DEFAULT_BUDGET = 256 << 20
LABEL_METRICS = ("prob:label", "logit:label")


@dataclass(frozen=True, eq=False)
class ScanRequest:
    """What to compute over ``inputs``.

    ``capture``: layer paths whose statistics and top-k inputs per unit are kept (of the
    run without interventions). ``intervene``: ``{path: intervention or its text}`` (e.g.
    ``{"conv2": "zero:3"}``); empty: no intervened forward, statistics only.
    ``metric``: a sweep metric (:mod:`~..capture.sweep_metrics`), or ``prob:label`` /
    ``logit:label`` (each input's own label); ``None``: ``prob:label`` for a labelled set,
    ``kl`` for a classifier or language model, ``max-abs-diff`` otherwise.
    ``limit``: scan only the first ``limit`` inputs.
    """

    inputs: InputSet
    capture: tuple[str, ...] = ()
    intervene: Mapping[str, Any] = field(default_factory=dict)
    metric: Any = None
    top_k: int = 9
    bins: int = 64
    device: str = "cpu"
    budget_bytes: int = DEFAULT_BUDGET
    max_batch: int = 64
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise PlanError(f"top-k {self.top_k}: keep at least one input per unit")
        if self.bins < 2:
            raise PlanError(f"{self.bins} histogram bins: use 2 or more")
        if self.budget_bytes < 1:
            raise PlanError("the memory budget must be positive")
        if self.limit is not None and self.limit < 1:
            raise PlanError(f"limit {self.limit}: scan at least one input")

    def size(self) -> int:
        n = len(self.inputs)
        return n if self.limit is None else min(n, self.limit)

    def interventions(self) -> dict[str, Any]:
        out = {}
        for path, iv in self.intervene.items():
            if isinstance(iv, str):
                try:
                    iv = parse_intervention(iv)
                except PlanError as exc:
                    raise PlanError(f"--intervene {path}={iv}: {exc}") from None
            out[path] = iv
        return out

    def metric_name(self, meaning: OutputMeaning) -> Any:
        if self.metric is not None:
            return self.metric
        if self.inputs.has_labels():
            return "prob:label"
        return "kl" if meaning.kind in (CLASSES, TOKENS) else "max-abs-diff"


def _loaded(model: Any) -> Any:
    """A :class:`~..model.loaded_model.LoadedModel` from itself or a session holding one."""
    lm = getattr(model, "model", None) if not hasattr(model, "module") else model
    if lm is None or not hasattr(lm, "module"):
        raise PlanError("no model is open: load one first (Session.load(spec))")
    return lm


class _Measure:
    """Per input: the top prediction and the metric's two numbers."""

    def __init__(self, metric: Any, meaning: OutputMeaning) -> None:
        self.meaning = meaning
        self.label_kind = metric if isinstance(metric, str) and metric in LABEL_METRICS else None
        self.metric: Metric | None = None if self.label_kind else make_metric(metric, meaning)
        self.name = self.label_kind or (self.metric.name if self.metric else str(metric))
        self.scores_ok = True

    def top(self, out: Any) -> int | None:
        if not self.scores_ok:
            return None
        try:
            return int(scores(out, self.meaning).argmax())
        except PlanError:
            self.scores_ok = False
            return None

    def _label_value(self, out: Any, label: int | None) -> float | None:
        if label is None:
            return None
        s = scores(out, self.meaning)
        if not 0 <= label < len(s):
            raise InputError(f"label {label} is outside the model's {len(s)} scores")
        return float(torch.softmax(s, -1)[label] if self.label_kind == "prob:label" else s[label])

    def row(self, row: EffectRow, out0: Any, out1: Any | None) -> None:
        row.pred_without = self.top(out0)
        row.pred_with = self.top(out1) if out1 is not None else None
        if self.label_kind:
            row.metric_without = finite(self._label_value(out0, row.label_index))
            if out1 is not None:
                row.metric_with = finite(self._label_value(out1, row.label_index))
            return
        assert self.metric is not None
        if self.metric.clean is not None:
            row.metric_without = finite(self.metric.clean(out0))
        if out1 is not None:
            row.metric_with = finite(self.metric.cell(out0, out1))


def label_index(raw: Any, meaning: OutputMeaning, fallback: int | None = None) -> int | None:
    """A label as the model's class or token number (``None``: no label): a number as it
    is, a name as the model's class labels or its tokenizer has it, else ``fallback`` (the
    class's number in the set's own list) where there is one."""
    if raw is None:
        return None
    if isinstance(raw, int):
        return raw
    text = str(raw)
    if meaning.labels and text in meaning.labels:
        return meaning.labels.index(text)
    if as_int(text) is not None:
        return as_int(text)
    if meaning.codec is not None:
        ids = meaning.codec.encode(text)
        if len(ids) == 1:
            return int(ids[0])
    if fallback is not None:
        return fallback
    raise InputError(f"label {text!r} is no class of this model (and not one token): name "
                     "classes as the model's labels or by number")


@contextlib.contextmanager
def _capturing(layers: Mapping[str, nn.Module]) -> Iterator[dict[str, torch.Tensor]]:
    """Each layer's first output of a forward (its first floating tensor), by path; every
    hook removed on the way out."""
    got: dict[str, torch.Tensor] = {}
    handles = []

    def hook_for(path: str) -> Callable:
        def hook(_m: nn.Module, _args: Any, output: Any) -> None:
            if path not in got:
                leaves = [t for _, t in tensor_leaves(output)]
                floats = [t for t in leaves if t.is_floating_point()] or leaves
                if floats:
                    got[path] = floats[0].detach()
        return hook

    try:
        for path, m in layers.items():
            handles.append(m.register_forward_hook(hook_for(path)))
        yield got
    finally:
        for h in handles:
            h.remove()


def _signature(x: Any) -> tuple:
    return tuple((k, tuple(t.shape), t.dtype) for k, t in tensor_leaves(x))


def _stack(items: list[Any]) -> Any:
    if len(items) == 1:
        return items[0]
    first = items[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(items, 0)
    if isinstance(first, dict):
        return {k: torch.cat([it[k] for it in items], 0) for k in first}
    if isinstance(first, tuple):
        return tuple(torch.cat([it[i] for it in items], 0) for i in range(len(first)))
    raise InputError("these inputs cannot be stacked")


def _row_of(out: Any, b: int, j: int) -> Any:
    return map_tensors(lambda t: t[j:j + 1] if t.dim() and t.shape[0] == b else t, out)


def _batch_first(out: Any, acts: Mapping[str, torch.Tensor], b: int) -> bool:
    leaves = [t for _, t in tensor_leaves(out)] + list(acts.values())
    return all(t.dim() and t.shape[0] == b for t in leaves)


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in tensor_leaves(value))


def scan_shard(model: Any, indices: Sequence[int], request: ScanRequest, *,
               progress: Callable[[int], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> ScanPartial:
    """Scan the inputs numbered ``indices`` of ``request.inputs`` on ``model`` (a
    :class:`~..model.loaded_model.LoadedModel` or a session holding one).

    ``progress(n)`` after each batch with the number of inputs it held; ``should_stop()``
    is asked between batches (:class:`~..base.errors.Cancelled` when it says yes).
    Returns the shard's :class:`~.scan_parts.ScanPartial`, to :func:`~.scan_parts.merge`.
    """
    lm = _loaded(model)
    module, meaning, inputs = lm.module, lm.meaning, request.inputs
    dev = resolve_device(request.device)
    resolved = Plan(capture=tuple(request.capture)).resolve(module) if request.capture else {}
    targets = {p: lp.module for p, lp in resolved.items()}
    ivs = request.interventions()
    if ivs:
        Plan(interventions=ivs).resolve(module)  # an unknown layer fails before any forward
    measure = _Measure(request.metric_name(meaning), meaning)
    part = ScanPartial({p: LayerAccumulator(p, request.top_k, request.bins) for p in targets})
    part.metric = measure.name
    one_at_a_time = any(iv.pre_pass_input() is not None for iv in ivs.values())
    batch = 1
    place_module(module, dev)
    pending = list(indices)
    k = 0
    while k < len(pending):
        if should_stop is not None and should_stop():
            raise Cancelled("the scan was cancelled")
        chunk, xs = _next_batch(inputs, pending, k, batch, lm)
        done = _run_batch(module, lm, chunk, xs, request, targets, ivs, measure, part, dev)
        if not done:  # not batch-first: this batch and the rest one at a time
            one_at_a_time, batch = True, 1
            continue
        if k == 0 and not one_at_a_time:
            per_item = max(1, part.item_bytes)
            batch = max(1, min(request.max_batch, request.budget_bytes // (3 * per_item)))
        k += len(chunk)
        part.batch_size = max(part.batch_size, len(chunk))
        if progress is not None:
            progress(len(chunk))
    return part


def _next_batch(inputs: InputSet, pending: list[int], k: int, batch: int,
                lm: Any) -> tuple[list[int], list[Any]]:
    chunk = [pending[k]]
    xs = [_item(inputs, pending[k], lm)]
    sig = _signature(xs[0])
    while len(chunk) < batch and k + len(chunk) < len(pending):
        i = pending[k + len(chunk)]
        x = _item(inputs, i, lm)
        if _signature(x) != sig:
            break  # a different length: it starts the next batch (read again then)
        chunk.append(i)
        xs.append(x)
    return chunk, xs


def _item(inputs: InputSet, i: int, lm: Any) -> Any:
    try:
        return inputs.item(i, lm.example_input, lm.meaning.codec)
    except InputError as exc:
        raise InputError(f"input {i} ({inputs.describe(i)}) of {inputs.name}: {exc}") from exc


def _run_batch(module: nn.Module, lm: Any, chunk: list[int], xs: list[Any], request: ScanRequest,
               targets: Mapping[str, nn.Module], ivs: Mapping[str, Any], measure: _Measure,
               part: ScanPartial, dev: torch.device) -> bool:
    b = len(chunk)
    x = to_device(_stack(xs), dev)
    with torch.inference_mode(), _capturing(targets) as acts:
        try:
            out0 = call_model(module, x)
        except HookscopeError:
            raise
        except Exception as exc:  # the model's own error, made readable (as a run's is)
            where = (f"input {chunk[0]}" if b == 1 else f"inputs {chunk[0]} to {chunk[-1]}")
            raise ForwardError(f"{where} of {request.inputs.name}: "
                               f"{forward_error_message(module, x, exc)}") from exc
    missing = [p for p in targets if p not in acts]
    if missing:
        raise PlanError(f"layer {missing[0]!r} did not run in the forward of input {chunk[0]}: "
                        "capture a layer the model calls")
    if b > 1 and not _batch_first(out0, acts, b):
        return False
    part.forwards += 1
    if b == 1:
        part.item_bytes = _nbytes(out0) + sum(_nbytes(a) for a in acts.values())
    for path, act in acts.items():
        part.layers[path].add(act, chunk, targets[path])
    del acts
    out1 = None
    if ivs:
        out1 = run(module, x, Plan(interventions=ivs), request.device,
                   codec=lm.meaning.codec).output
        part.forwards += 1
    out0 = map_tensors(lambda t: t.detach().cpu(), out0)
    for j, i in enumerate(chunk):
        raw = request.inputs.label(i)
        row = EffectRow(i, None if raw is None else str(raw),
                        label_index(raw, lm.meaning, request.inputs.class_number(i)))
        measure.row(row, _row_of(out0, b, j) if b > 1 else out0,
                    None if out1 is None else (_row_of(out1, b, j) if b > 1 else out1))
        part.rows.append(row)
    return True


def shards(n: int, shard_size: int) -> list[list[int]]:
    """The input numbers ``0..n-1`` cut into consecutive shards."""
    return [list(range(s, min(n, s + shard_size))) for s in range(0, n, max(1, shard_size))]


def scan(model: Any, request: ScanRequest, *,
         progress: Callable[[int, int, float | None], None] | None = None,
         should_stop: Callable[[], bool] | None = None, shard_size: int = 1024) -> ScanResult:
    """Scan every input of ``request`` on ``model`` here: a
    :class:`~.scan_result.ScanResult`. ``progress(done, total, eta_s)`` after each batch
    (``eta_s`` ``None`` until one batch has run)."""

    lm = _loaded(model)
    total = request.size()
    t0 = time.perf_counter()
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            el = time.perf_counter() - t0
            eta = el / done * (total - done) if done else None
            progress(done, total, eta if eta is None or math.isfinite(eta) else None)

    done_part = ScanPartial()
    for s in shards(total, shard_size):  # folded in as they finish: one shard's partial at a time
        done_part.merge(scan_shard(lm, s, request, progress=tick, should_stop=should_stop))
    return finish(done_part, request, lm.meaning, time.perf_counter() - t0)


@dataclass(frozen=True)
class _OnModule:
    """What :func:`scan_shard` reads of a loaded model, for a runner that holds a module,
    its input and its meaning."""

    module: nn.Module
    example_input: Any
    meaning: OutputMeaning


@dataclass(frozen=True, eq=False)
class ScanJob:
    """A scan as a view the session's runner computes after a run (off the GUI thread),
    on the run's model and device; the run's input is the example each input is shaped
    like. ``progress(done, total, eta_s)`` is called on the runner's thread."""

    request: ScanRequest
    progress: Callable[[int, int, float | None], None] | None = None

    name = "scan"

    def compute(self, module: nn.Module, inputs: Any, plan: Any, device: str,
                meaning: OutputMeaning, should_stop: Any = None) -> ScanResult:
        import dataclasses

        req = dataclasses.replace(self.request, device=device)
        return scan(_OnModule(module, inputs, meaning), req, progress=self.progress,
                    should_stop=should_stop)
