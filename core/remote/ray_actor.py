"""The remote side of :mod:`.remote_ray`: the object a Ray actor holds, with the model in it.

:class:`ModelHost` is a plain class; :mod:`.remote_ray` turns it into a
threaded Ray actor (``max_concurrency`` > 1), so :meth:`ModelHost.cancel`
and :meth:`ModelHost.progress` are answered while :meth:`ModelHost.run` is
busy in another thread of the same actor. A run stops at its next layer
once its request id is in the cancelled set: the stop points are the same
per-layer pre-hooks the local runner uses (``run.stop_points``).

What goes back over the wire is pickled here, so its size is exactly the
bytes moved: statistics of every capture always; captured tensors only for
the layers asked for (all captured layers when none are named), in plan
order, while they fit the run's byte budget; the outputs. Everything a
request raises comes back as the message the local runner would show
(``runner.error_message``), never as a remote traceback.

The tokenizer stays here too. A load answers with the model's output meaning
whose codec is a :class:`~.text_codec.TokenTable` (the readable token strings
the views need); a ``text:PROMPT`` input arrives as a :class:`TextInput`, is
tokenized here with the model's own tokenizer, and every result of it carries
the token ids (``RunResult.inputs``) so the client can show its tokens.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..base.errors import Cancelled
from ..engine.capture_record import CaptureRecord, resolve_records
from ..base.meaning import OutputMeaning
from ..session.runner import compute_views, error_message, leaf_count, same_values
from ..base.text_codec import TokenTable
from ..model.sources import load_model
from ..model.tree import module_tree
from ..model.dispatch import load_dispatched
from ..base.devices import resolve_device
from ..engine.run import compare, place_module, stop_points
from ..engine.forward_state import to_device
from ..analyses.steer_diff import has_pending_vectors, resolve_pending
from ..analyses.observe import observe as observe_tree
from ..model.inputs import parse_input
from ..model.sae import attach_sae


@dataclass(frozen=True)
class TextInput:
    """A ``text:PROMPT`` input spec, sent as text: the actor tokenizes it."""

    text: str


def is_text_input(text: str | None) -> bool:
    """Whether an input spec is a ``text:`` prompt (tokenized where the tokenizer is)."""
    return (text or "").lstrip().startswith("text:")


def client_meaning(meaning: OutputMeaning) -> OutputMeaning:
    """``meaning`` as the client gets it: the tokenizer replaced by its token strings."""
    if meaning.codec is None:
        return meaning
    return replace(meaning, codec=TokenTable.of(meaning.codec))


class _Pickler(pickle.Pickler):
    """Pickles CPU tensors as numpy arrays: torch's own tensor pickling writes a
    small archive per storage, about 0.5 ms each, most of a Live step's cost."""

    def reducer_override(self, obj: Any) -> Any:
        if (type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.layout == torch.strided
                and obj.dtype in _NUMPY_DTYPES and not obj.requires_grad):
            return torch.from_numpy, (obj.detach().resolve_conj().resolve_neg().numpy(),)
        return NotImplemented


_NUMPY_DTYPES = {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32,
                 torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128}


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` with CPU tensors as numpy arrays (read back by plain ``pickle.loads``)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


# What a capture record keeps: its tensors, and the summaries computed from them.
_TENSORS = ("tensor", "pre_tensor", "baseline_tensor")
_SUMMARIES = [n for n in ("stats", "pre_stats", "baseline_stats") if hasattr(CaptureRecord, n)]


def strip_tensors(captures: dict, wanted: list[str] | None, budget: int) -> tuple[list[str], int]:
    """Drop kept tensors beyond ``budget`` bytes (and of layers not ``wanted``), in place.

    Returns the layers whose tensors were withheld and the bytes of those kept.
    Statistics are untouched (computed before this).
    """
    order = [p for p in (wanted or list(captures)) if p in captures]
    keep: set[int] = set()
    used = 0
    for path in order:
        for rec in captures[path]:
            if rec.nbytes and used + rec.nbytes <= budget:
                keep.add(id(rec))
                used += rec.nbytes
    withheld = []
    for path, recs in captures.items():
        for rec in recs:
            if id(rec) not in keep and rec.nbytes:
                for leaf in rec.leaves:  # every tensor leaf of a nested output
                    for name in _SUMMARIES:  # summarise before the values go
                        getattr(leaf, name)
                    for name in _TENSORS:
                        setattr(leaf, name, None)
                if path not in withheld:
                    withheld.append(path)
    return withheld, used


class ModelHost:
    """One model, loaded and run inside a Ray actor (see the module docstring)."""

    def __init__(self) -> None:
        self._lm: Any = None
        self._serial = 0
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._progress: tuple[int, int, int, float] = (0, 0, 1, 0.0)
        self._input: tuple[int, Any] | None = None  # (input id, value): sent once, kept here
        self._baseline: tuple[tuple, Any, Any] | None = None
        self._calls: dict[int, int] = {}
        self._text_inputs: set[int] = set()  # input ids that came as text: prompts
        self._vectors: dict[int, dict] = {}  # per model serial: diff: vectors by (layer, spec)

    # -- quick calls (answered while a run is busy) -----------------------------
    def ping(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "torch": torch.__version__,
                "cuda": torch.cuda.is_available(), "cwd": os.getcwd()}

    def cancel(self, rid: int) -> None:
        with self._lock:
            self._cancelled.add(rid)

    def progress(self) -> tuple[int, int, int, float]:
        """``(request id, done, total, elapsed_s)`` of the run in flight (or the last one)."""
        return self._progress

    # -- loading -----------------------------------------------------------------
    def load(self, rid: int, spec: str, weights: str | None, trust_pickle: bool,
             dispatch: Any = None) -> tuple:
        """``('loaded', serial, blob)`` with the pickled (example input, kind,
        description, tree); or ``('failed', message)``."""
        try:
            if dispatch is not None and dispatch.active:
                lm = load_dispatched(spec, weights, dispatch, trust_pickle)
            else:
                lm = load_model(spec, weights, trust_pickle=trust_pickle)
            tree = module_tree(lm.module)
            blob = dumps((lm.example_input, lm.kind, lm.description, tree,
                          client_meaning(lm.meaning)))
        except BaseException as exc:  # noqa: BLE001 - every failure is a message
            return ("failed", error_message(exc))
        self._lm = lm
        self._serial += 1
        self._baseline = None
        self._calls.clear()
        return ("loaded", self._serial, blob)

    # -- running -----------------------------------------------------------------
    def run(self, rid: int, serial: int, input_id: int, input_blob: bytes | None, plan: Any,
            device: str, observe: bool, train: bool, wanted: list[str] | None,
            budget: int, derived: tuple = (), saes: dict | None = None) -> tuple:
        """One comparison, and the analyses of ``derived`` after it (their answers in the
        result's ``extras``); ``('finished', blob)``, ``('failed', message)`` or
        ``('cancelled',)``. ``saes``: the SAEs attached on the client, by layer path
        (attached here first: the ``sae-*`` edits and the SAE view read them).

        ``input_blob`` is ``None`` when this host already holds input ``input_id``.
        """
        try:
            return self._run(rid, serial, input_id, input_blob, plan, device, observe, train,
                             wanted, budget, derived, saes or {})
        except Cancelled:
            return ("cancelled",)
        except BaseException as exc:  # noqa: BLE001 - whatever a model throws is a message
            return ("failed", error_message(exc))
        finally:
            with self._lock:
                self._cancelled.discard(rid)

    def _run(self, rid, serial, input_id, input_blob, plan, device, observe, train, wanted, budget,
             derived, saes):
        if self._lm is None or serial != self._serial:
            return ("failed", "the remote model was replaced or is gone: open the model again")
        for layer, sae in saes.items():
            attach_sae(self._lm.module, layer, sae)
        if input_blob is not None:
            value = pickle.loads(input_blob)
            if isinstance(value, TextInput):  # tokenized here, where the tokenizer is
                value = parse_input(value.text, self._lm.example_input, self._lm.meaning.codec)
                self._text_inputs.add(input_id)
            self._input = (input_id, value)
        if self._input is None or self._input[0] != input_id:
            return ("failed", "internal error: the remote side lost the input; run again")
        inputs = self._input[1]
        module = self._lm.module
        if module.training != train:
            module.train(train)
        t0 = time.perf_counter()
        state = {"done": 0, "total": 1}

        def stop() -> bool:
            state["done"] += 1
            state["total"] = max(state["total"], state["done"])
            self._progress = (rid, state["done"], state["total"], time.perf_counter() - t0)
            return rid in self._cancelled

        key = (self._serial, input_id, device)
        baseline = None
        if self._baseline and self._baseline[0] == key and same_values(self._baseline[1], inputs):
            baseline = self._baseline[2]
        per_pass = self._calls.get(self._serial) or leaf_count(module)
        state["total"] = per_pass * (int(observe) + int(baseline is None) + 1)
        tree = None
        if observe:
            dev = resolve_device(device)
            place_module(module, dev)
            with stop_points(module, stop):
                tree = observe_tree(module, to_device(inputs, dev))
            self._calls[self._serial] = max(1, state["done"])
        if has_pending_vectors(plan):  # diff: vectors are computed here, where the model is
            dev = resolve_device(device)
            place_module(module, dev)
            plan = resolve_pending(plan, module, self._lm.example_input, self._lm.meaning.codec,
                                   self._vectors.setdefault(self._serial, {}), dev)
        result = compare(module, inputs, plan, device, baseline=baseline, should_stop=stop,
                         codec=self._lm.meaning.codec)
        self._baseline = (key, inputs, result.baseline) if result.baseline is not None else None
        resolve_records(result.captures)
        compute_views(result, derived, module, inputs, plan, device, self._lm.meaning, stop)
        if input_id in self._text_inputs:  # the client has only the prompt: send its tokens
            result.inputs = inputs
        withheld, kept = strip_tensors(result.captures, wanted, budget)
        blob = dumps((tree, result, withheld, kept))
        return ("finished", blob)
