"""The session: the one owner of what a person edits and runs.

A :class:`Session` holds the loaded model and its tree, the input text, the
device, the plan (captures and interventions), the options (statistics only,
train mode, Live) and a runner (:mod:`.runner`). Every change is announced to
the callables given to :meth:`Session.subscribe` as a :class:`SessionEvent`;
the window's widgets redraw from these events and write every edit back here,
so no widget keeps a copy of a bound, the device or a mode. No Qt::

    from hookscope.core import Session, Zero
    s = Session.load("demo:cnn")
    s.capture("conv1", "fc")
    s.intervene("conv2", Zero())
    r = s.run()
    s.save("digits.hookscope.json")

A model built in this Python session (a notebook's) opens with
:meth:`Session.from_module` or :meth:`Session.open_module`: the module itself
is used, see :mod:`.live_model`.

Threads: edits are made in the caller's thread. The runner answers in its own
thread; each answer enters the session through ``post`` (given to the
constructor), which the window sets to "queue this onto the GUI thread", so
session state only ever changes on one thread. A session with a ``post``
belongs to the thread that made it (the GUI thread): an edit made on another
thread sends its events through ``post``, so subscribers (widgets) hear of it
on their own thread; :meth:`run` called on that thread applies its answer
before returning, so ``last_result`` is the run's at once. Without a ``post``
the answers are applied in the runner's thread, which suits a script that
waits for them (:meth:`run`, :meth:`load`).

Requests: :meth:`open_model`, :meth:`open_module`, :meth:`open_setup` and
:meth:`submit_run` return the runner's :class:`~.runner_messages.RequestFuture`;
one replaced by a newer request is cancelled, and :meth:`run` and the other
waiting calls raise :class:`~hookscope.core.errors.Cancelled` for it. What the
session does with requests and answers is :mod:`.session_requests`; the views
its runs compute beside the comparison, :mod:`.session_views`.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..analyses import (AttentionRequest, AttentionResult, DEFAULT_TOLERANCE, DiffRequest,
                        DiffResult, Generation, LensResult, SaeReport, ScanResult, SweepResult)
from ..analyses.analysis import Analysis
from ..model.code_trust import CodeTrust, CodeTrustError
from ..base.devices import resolve_device
from ..base.errors import HookscopeError
from ..base.read_files import ReadFiles
from ..engine.run import RunResult
from ..model.sae import SparseAutoencoder
from ..plan.interventions import Intervention
from ..plan.plan import Plan
from ..plan.plan_edits import PlanHistory, in_model_order
from .runner import LocalRunner, Runner
from .runner_messages import (Cancelled, Failed, Finished, Listener, Loaded, LoadRequest, Observed,
                              Progress, RequestFuture, RunnerEvent, RunRequest, Started)
from .session_events import (DerivedChanged, DeviceChanged, Idle, InputChanged, LoadFailed,
                             LoadWarning, ModelChanged, OptionsChanged, PlanChanged,
                             ResultArrived, RunCancelled, RunFailed, RunProgress, RunStarted,
                             SaesChanged, SessionEvent, Subscribers, TreeObserved)
from .session_requests import Requests, Settled, weak_listener
from .session_views import DerivedViews
from .session_lm import attach_saved
from .session_types import LoadSetup, Options, tidy_input_text
from ..model.loaded_model import LoadedModel
from ..model.tree import TreeNode
from .scan_sidecar import SavedScan
from .session_file import SessionSetup, read_session_file, write_session_file
from ..model.class_labels import name_classes
from ..model.live_model import is_live, live_model, module_device
from .live_save import save_live
from ..dataset.input_sets import InputSet

R = TypeVar("R")


class Session:
    """Model, tree, input, device, plan, options and a runner, with change events."""

    def __init__(self, runner_factory: Callable[[Listener], Runner] | None = LocalRunner,
                 post: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._post = post or (lambda fn: fn())
        # The thread whose subscribers hear the events (see the module docstring).
        self._home = threading.get_ident() if post is not None else None
        self._closed = False
        self._subscribers = Subscribers(self._post, self._home)
        #: the requests made that still matter and the answers not yet applied
        self._requests = Requests()
        self.model: LoadedModel | None = None
        self.tree: TreeNode | None = None
        self.trust_pickle = False
        #: which code the open model's load was allowed to run (None: its spec was typed);
        #: an export that loads the model again is held to the same yes
        self.code_trust: CodeTrust | None = None
        self.input_text = "example"
        self.device = "cpu"
        self.plan = Plan()
        self.options = Options()
        #: View state worth keeping in a session file (selected layer, ...); the window fills it.
        self.view: dict[str, Any] = {}
        #: What a front end's panels show (``() -> ShapeViews``), asked on the session's
        #: thread as each run is requested and sent with it, so the runner prepares their
        #: pictures; ``None`` (a script, the CLI): runs carry none.
        self.shape_views: Callable[[], Any] | None = None
        self._last_shapes: Any = None
        self.last_result: RunResult | None = None
        #: the last scan (and its shown unit), saved beside the session file (:mod:`.scan_sidecar`)
        self.saved_scan: SavedScan | None = None
        self.last_error: str | None = None
        # What the last load left out of the plan it was given (e.g. a layer the model lacks).
        self.plan_problem: str | None = None
        self.labels: str | None = None  # the labels file naming the output's classes, if any
        self.save_note: str | None = None  # what the last save could not put in the file
        self.load_warnings: list[str] = []  # what the last load could not apply, in words
        self.history = PlanHistory()
        #: the views runs compute beside the comparison, and the SAEs attached to layers
        self._views = DerivedViews()
        #: every file this session has read or will read (model, weights, inputs, sources,
        #: vectors, SAE folders, labels): no export may replace one (:mod:`~..base.read_files`)
        self.read_files = ReadFiles("the open model")
        #: ``None`` for a session that only holds edits (a widget on its own, tests).
        self.runner: Runner | None = None
        if runner_factory is not None:
            # The runner holds the session weakly: a session dropped without close()
            # (``Session.open_file(f).run()``) is collected, and its runner's thread ends.
            self.runner = runner_factory(weak_listener(self._from_runner))
            self.runner.reads = self.read_files
            weakref.finalize(self, self.runner.close, 0)

    # -- events ----------------------------------------------------------------
    def subscribe(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` on every change; returns a function that unsubscribes."""
        return self._subscribers.add(callback)

    def _emit(self, ev: SessionEvent) -> None:
        self._subscribers.tell(ev)

    # -- building --------------------------------------------------------------
    @classmethod
    def load(cls, spec: str, weights: str | None = None, *, input_text: str | None = None,
             device: str = "cpu", plan: Plan | None = None, options: Options | None = None,
             trust_pickle: bool = False, timeout_s: float | None = None) -> "Session":
        """A session with ``spec`` loaded (waits for it); raises what the load raised."""
        def open_it(s: Session) -> RequestFuture:
            s.set_device(device)
            return s.open_model(spec, weights, trust_pickle=trust_pickle, plan=plan,
                                input_text=input_text, options=options, run_after=False)

        return cls._opened(open_it, timeout_s)

    @classmethod
    def from_module(cls, model: Any, example_input: Any = None, *, tokenizer: Any = None,
                    labels: Any = None, plan: Plan | None = None, options: Options | None = None,
                    timeout_s: float | None = None) -> "Session":
        """A session on ``model``, an ``nn.Module`` built in this Python session (waits for it).

        The module itself is used, on its own device; ``tokenizer`` and ``labels``
        say what its output means (:func:`~.live_model.live_model`). No window.
        """
        return cls._opened(lambda s: s.open_module(model, example_input, tokenizer=tokenizer,
                                                   labels=labels, plan=plan, options=options,
                                                   run_after=False), timeout_s)

    @classmethod
    def offline(cls, model: LoadedModel, input_text: str = "example", device: str = "cpu",
                plan: Plan | None = None, options: Options | None = None) -> "Session":
        """A session over an already loaded model, with no runner: to save, not to run."""
        s = cls(runner_factory=None)
        s.model, s.input_text, s.device = model, input_text, device
        s.plan, s.options = plan or Plan(), options or Options()
        return s

    @classmethod
    def open_file(cls, path: str | Path, timeout_s: float | None = None,
                  trust_code: bool = False) -> "Session":
        """A session as a ``*.hookscope.json`` file saved it (waits for the model).

        A session file is data: a model spec in it that runs code (a ``.py`` factory, a
        module, a pickle) raises :class:`~.code_trust.CodeTrustError` before anything
        runs, unless ``trust_code`` (``--trust-code``) says the person trusts the file.
        """
        setup = read_session_file(path)
        trust = CodeTrust.from_data(everything=trust_code)
        return cls._opened(lambda s: s.open_setup(setup, run_after=False, trust=trust), timeout_s)

    @classmethod
    def _opened(cls, open_it: Callable[[Session], RequestFuture],
                timeout_s: float | None) -> Session:
        """A new session once its load ``open_it(session)`` arrived; closed if it failed."""
        s = cls()
        try:
            Requests.wait(open_it(s), timeout_s)
        except BaseException:
            s.close()
            raise
        return s

    def save(self, path: str | Path, *, weights: bool = False) -> Path:
        """Write this session to ``path`` (``*.hookscope.json``); returns the path written.

        A session file names its model and never holds it. For a model of this
        Python session (:meth:`from_module`) that means the model is not saved:
        ``weights=True`` writes its state_dict beside the file, and the file names
        its class where that reopens it (:mod:`.live_save`, which warns otherwise).
        """
        if is_live(self.model):
            return save_live(self, Path(path).expanduser(), weights, write_session_file)
        return write_session_file(path, self)

    def open_setup(self, setup: SessionSetup, run_after: bool = True,
                   trust: CodeTrust | None = None) -> RequestFuture:
        """Load what a session file describes (a :class:`~.session_file.SessionSetup`);
        the current model and plan stay until the load succeeds.

        The file is data: its spec runs code only as ``trust`` allows (by default, no
        code at all; :class:`~.code_trust.CodeTrustError` names what would run). The
        setup's own ``trust_pickle`` is never read: a file cannot trust itself.
        """
        self.saved_scan = setup.scan
        future = self.open_model(setup.spec, setup.weights, plan=setup.plan,
                                 input_text=setup.input_text, device=setup.device,
                                 options=setup.options, view=setup.view, run_after=run_after,
                                 labels=setup.labels, trust=trust or CodeTrust.from_data())
        # attached once the model arrives (session_lm.attach_saved), before its first run
        self._requests.setup.saes, self._requests.setup.views = setup.saes, setup.views
        return future

    def open_model(self, spec: str, weights: str | None = None, *, trust_pickle: bool = False,
                   plan: Plan | None = None, input_text: str | None = None,
                   device: str | None = None, options: Options | None = None,
                   view: dict | None = None, run_after: bool = True,
                   labels: str | None = None, trust: CodeTrust | None = None) -> RequestFuture:
        """Queue a model load; when it arrives, apply the rest and (``run_after``) run once.

        ``labels``: a labels file naming the output's classes (:mod:`.class_labels`).
        ``trust``: which code the load may run (:mod:`.code_trust`); ``None`` for a
        spec the person typed. With a ``trust``, the load checks it in the runner's thread
        (hashing the code can take a second: never on the caller's), before anything is
        imported: a spec whose code it does not allow fails with
        :class:`~.code_trust.CodeTrustError` (the future raises it; :class:`LoadFailed`
        carries its ``code``, for the question to ask). A failed load leaves the current
        model, plan and results as they were, and runs that model again where the load had
        stopped its run or held one back.
        """
        if trust is not None:
            trust_pickle = trust.everything
        return self._queue_load(LoadRequest(spec, weights, trust_pickle, trust=trust),
                                LoadSetup(plan, input_text, device, options, view, run_after,
                                          trust_pickle, labels, trust))

    def open_module(self, model: Any, example_input: Any = None, *, tokenizer: Any = None,
                    labels: Any = None, plan: Plan | None = None, options: Options | None = None,
                    run_after: bool = True) -> RequestFuture:
        """Queue ``model`` (an ``nn.Module`` of this Python session, used in place) as
        :meth:`open_model` queues a spec; it runs on the device its parameters are on."""
        lm = live_model(model, example_input, tokenizer=tokenizer, labels=labels)
        return self._queue_load(LoadRequest(lm.spec, model=lm),
                                LoadSetup(plan, None, module_device(model), options, None,
                                          run_after))

    def _queue_load(self, request: LoadRequest, setup: LoadSetup) -> RequestFuture:
        if self.runner is None:
            raise HookscopeError("this session has no runner to load a model with")
        future = self.runner.submit(request)
        self._requests.record_load(future, setup)
        self._post(self._drain)  # an answer that came before the id was recorded
        return future

    def set_labels(self, path: str) -> None:
        """Name the open model's output classes from the labels file ``path``
        (:mod:`.class_labels`); the last result is shown again with the names."""
        if self.model is None:
            raise HookscopeError("no model is open: load one first, then its labels")
        with self.read_files.recording():
            name_classes(self.model, path)
        self.labels = path
        if self.last_result is not None:
            self._emit(ResultArrived(self.last_result, request_id=self.newest_run))

    def close(self, timeout_s: float = 1.0) -> bool:
        """Stop the runner (the run in flight stops at its next layer); whether it ended in time.
        The plan and the last result stay readable; :meth:`run` raises from now on."""
        self._closed = True
        self._subscribers.clear()
        return self.runner.close(timeout_s) if self.runner is not None else True

    # -- the plan --------------------------------------------------------------
    def set_plan(self, plan: Plan, merge: str | None = None) -> None:
        """Replace the plan (undoable). Edits with the same ``merge`` key in a row
        (the steps of one drag) are one undo step; ``history.seal()`` ends such a run."""
        if plan != self.plan:
            self.history.record(self.plan, merge)
            self._set_plan(plan)

    def _set_plan(self, plan: Plan) -> None:
        self.plan = plan
        self._emit(PlanChanged(plan))
        self._changed()

    def capture(self, *paths: str) -> None:
        """Capture these layers too (``set_capture(paths, False)`` stops)."""
        self.set_capture(paths, True)

    def set_capture(self, paths: Any, on: bool) -> None:
        """Capture (or stop capturing) ``paths``, one undo step; the plan keeps model order."""
        paths = [paths] if isinstance(paths, str) else list(paths)
        now = set(self.plan.capture)
        now = now | set(paths) if on else now - set(paths)
        self.set_plan(dataclasses.replace(self.plan, capture=self._in_model_order(now)))

    def intervene(self, path: str, intervention: Intervention, merge: str | None = None) -> None:
        """Give ``path`` this intervention, replacing the one it had (one per layer)."""
        self.set_plan(self.plan.with_intervention(path, intervention), merge=merge)

    def clear_intervention(self, path: str) -> None:
        self.set_plan(self.plan.without_intervention(path))

    def _in_model_order(self, paths: set[str]) -> tuple[str, ...]:
        """``paths`` in the tree's order; paths it does not have last."""
        order = (n.path for n in self.tree.walk()) if self.tree is not None else ()
        return in_model_order(paths, order, self.plan.capture)

    # -- undo ------------------------------------------------------------------
    def undo(self) -> bool:
        """Take back the last plan edit; whether there was one."""
        return self._step(self.history.undo(self.plan))

    def redo(self) -> bool:
        """Make the last undone plan edit again; whether there was one."""
        return self._step(self.history.redo(self.plan))

    def _step(self, plan: Plan | None) -> bool:
        if plan is not None:
            self._set_plan(plan)
        return plan is not None

    # -- input, device, options ----------------------------------------------
    def set_input(self, text: str) -> bool:
        """Use ``text`` as the input from now on; whether it changed (in Live mode a
        change has already queued a run)."""
        text = tidy_input_text(text)
        if text == self.input_text:
            return False
        self.input_text = text
        self._emit(InputChanged(text))
        self._changed()
        return True

    def set_device(self, name: str) -> None:
        """Run on ``name`` from now on; raises :class:`DeviceError` if it is not here."""
        resolve_device(name)
        if name != self.device:
            self.device = name
            self._emit(DeviceChanged(name))
            self._changed()

    def set_options(self, **changes: Any) -> None:
        """``set_options(stats_only=True)``, ``live=...``, ``train=...``."""
        new = dataclasses.replace(self.options, **changes)
        if new == self.options:
            return
        turned_live = new.live and not self.options.live
        self.options = new
        self._emit(OptionsChanged(new))
        if turned_live or new.live:
            self._changed(force=turned_live)

    def _changed(self, force: bool = False) -> None:
        """Live mode: every change re-runs (the runner keeps only the newest)."""
        if (self.options.live or force) and self.model is not None and self._requests.load_id is None:
            self.submit_run()

    # -- views beside the comparison (session_views.py) ------------------------------
    @property
    def derived(self) -> dict[str, Any]:
        """Views every run also computes, by name (:meth:`set_derived`)."""
        return self._views.by_name

    @property
    def saes(self) -> dict[str, str]:
        """SAE folders attached to layers (:meth:`attach_sae`), by layer path."""
        return self._views.saes

    def set_derived(self, name: str, view: Any | None) -> None:
        """Have every run also compute ``view`` (``None``: stop), e.g. the logit lens; its
        answer is ``result.extras[name]``. In Live mode this re-runs."""
        if self._views.set(name, view):
            self._emit(DerivedChanged(dict(self.derived)))
            self._changed()

    def analyse(self, request: Analysis[R], timeout_s: float | None = None) -> R:
        """Run now with the analysis ``request`` and wait: its result (a request of type
        ``Analysis[R]`` gives an ``R``). It runs in the session's runner after the comparison,
        on the session's model, input, plan and device, with its progress, cancel and
        newest-wins (a newer run cancels it); for Live mode, :meth:`set_derived` has every run
        compute it. Any analysis of :mod:`hookscope.core.analyses` or a registered one
        (:func:`~hookscope.core.analyses.register_analysis`)."""
        return self._run_derived(request, timeout_s)

    def diff(self, other: Any = None, *, weights: str | None = None, dtype: str | None = None,
             device: str | None = None, tolerance: float = DEFAULT_TOLERANCE,
             directions: tuple[str, ...] = (), budget_bytes: int | None = None,
             timeout_s: float | None = None) -> DiffResult:
        """Run now and wait: the session's model (model A, with the plan's interventions, on
        the session's input and device) against model B, layer by layer: a
        :class:`~hookscope.core.analyses.DiffResult` (see
        :func:`~hookscope.core.analyses.diff`). ``other``: a model spec, a module or a loaded
        model; ``None``: the session's own model, with ``weights`` (a state_dict file),
        ``dtype`` (``"bfloat16"``...) or ``device`` changed in a copy. The plan's
        interventions apply to both."""
        spec = other if isinstance(other, str) else None
        module = None if isinstance(other, str) else other
        return self.analyse(DiffRequest(spec, weights, dtype, device, tolerance,
                                        tuple(directions), budget_bytes, b_module=module),
                            timeout_s)

    def lens(self, target: str | int | None = None, head: str | None = None, top_k: int = 5,
             timeout_s: float | None = None) -> LensResult:
        """Run now with the logit lens and wait: a
        :class:`~hookscope.core.analyses.logit_lens.LensResult` (without and with the plan)."""
        return self.analyse(DerivedViews.lens(target, head, top_k), timeout_s)

    def attention(self, *layers: str, row: int = 0, timeout_s: float | None = None
                  ) -> AttentionResult:
        """Run now and wait: each head's attention probabilities at the attention modules
        ``layers`` (e.g. ``"transformer.h.1.attn"``), without and with the plan, an
        :class:`~hookscope.core.analyses.AttentionResult` (``result[layer].with_``:
        ``(batch, heads, query, key)``)."""
        return self.analyse(AttentionRequest(tuple(layers), row), timeout_s)

    def generate(self, n: int, temperature: float = 0.0, seed: int = 0,
                 timeout_s: float | None = None, cache: bool = True,
                 check_cache: bool = False) -> Generation:
        """Run now and wait: ``n`` tokens after the prompt, without and with the plan, a
        :class:`~hookscope.core.analyses.generation.Generation` (greedy unless ``temperature > 0``;
        both continuations sample with the same seed). ``@pos=`` counts in the prompt;
        ``cache``: the model's KV cache where it has one and the plan allows;
        ``check_cache``: run with and without it and name the first step where they part."""
        return self.analyse(DerivedViews.generation(n, temperature, seed, cache, check_cache),
                            timeout_s)

    def sweep(self, over: Any, intervene: Any, metric: Any = "max-abs-diff", *,
              max_cells: int | None = None, progress: Callable[[int, int], None] | None = None,
              timeout_s: float | None = None, batch: bool | int = True,
              normalise: bool = False, pool: Any = None, estimate: bool = False,
              verify: int = 0, inputs: Any = None) -> SweepResult:
        """Run a sweep on the session's model, input and device (in the runner) and wait: a
        :class:`~hookscope.core.analyses.SweepResult` (see
        :func:`~hookscope.core.analyses.sweep`). The session's own plan is not applied in
        the cells: each cell is the baseline plus that cell's interventions.

        ``pool``: a :class:`~hookscope.core.remote.RayPool` holding the same model spec
        (``RayPool("local", spec, 2)``): the cells are spread over its workers instead,
        with the same values, in the same order; with ``inputs``, the inputs in shards; with
        ``estimate``, the estimate on one worker (one per shard of inputs) and the
        ``verify`` cells over the pool.

        ``estimate``: every cell estimated to first order from one forward and one backward
        (:attr:`~hookscope.core.analyses.SweepResult.estimates`), and only the ``verify``
        cells the estimate moves most run for real.

        ``inputs``: an input set (or the file or folder ``hookscope scan`` reads) instead of
        the session's input: each cell is the mean over the inputs, with
        :attr:`~hookscope.core.analyses.SweepResult.spread` and ``per_input``."""
        if pool is not None:
            return DerivedViews.sweep_on_pool(pool, self.model, self.input_text, self.device,
                                              over, intervene, metric, max_cells, progress,
                                              batch, normalise, estimate, verify, inputs)
        return self.analyse(DerivedViews.sweep(over, intervene, metric, max_cells, progress,
                                               batch, normalise, estimate, verify, inputs,
                                               self.model), timeout_s)

    def scan(self, inputs: Any, capture: Any = None, intervene: Any = None, metric: Any = None,
             *, top_k: int = 9, limit: int | None = None, budget_bytes: int | None = None,
             progress: Callable[[int, int, float | None], None] | None = None,
             timeout_s: float | None = None) -> ScanResult:
        """Run the model over an input set (in the runner) and wait: a
        :class:`~hookscope.core.analyses.ScanResult` with per-layer statistics and top inputs
        per unit of ``capture`` and, per input, the effect of ``intervene`` (see
        :func:`~hookscope.core.analyses.scan`). ``inputs``: a folder, a .txt, .jsonl, .pt or
        .safetensors file, or an opened :class:`~hookscope.core.dataset.InputSet`.
        ``capture``/``intervene`` default to the session's plan."""
        # the input set counted as read once (a folder: not each of its files as it is read)
        self.read_files.add("the input file", inputs.source if isinstance(inputs, InputSet)
                            else inputs)
        job = DerivedViews.scan(inputs, capture, intervene, metric, self.current_plan(),
                                self.device, top_k, limit, budget_bytes, progress)
        result = self.analyse(job, timeout_s)
        self.saved_scan = SavedScan(result)
        return result

    def attach_sae(self, layer: str, folder: str | Path) -> SparseAutoencoder:
        """Attach the SAE in ``folder`` (SAELens layout; ``"demo"`` for ``demo:lm``) to
        ``layer``: its ``sae-*`` interventions and feature view use it. A width that differs
        from the layer's output (where a run has shown it) is refused with both sizes."""
        if self.model is None:
            raise HookscopeError("no model is open: load one first, then attach an SAE")
        with self.read_files.recording():
            sae = self._views.attach_sae(self.model, self.tree, layer, folder)
        self.read_files.add("the SAE folder", folder)
        self._emit(SaesChanged(dict(self.saes)))
        return sae

    def sae_features(self, *layers: str, top_k: int = 5, timeout_s: float | None = None) -> SaeReport:
        """Run now and wait: the top SAE features and reconstruction error at ``layers``
        (default: every layer with an SAE), a :class:`~hookscope.core.SaeReport`."""
        return self.analyse(self._views.sae_report(layers, top_k), timeout_s)

    def _run_derived(self, view: Any, timeout_s: float | None) -> Any:
        if self.model is None:
            raise HookscopeError("no model is open: load one first (Session.load(spec))")
        return DerivedViews.answer(self._wait_run(self.submit_run(extra=(view,)), timeout_s), view)

    # -- running ---------------------------------------------------------------
    def current_plan(self) -> Plan:
        """The plan as a run uses it (statistics-only decides ``keep_tensors``)."""
        return dataclasses.replace(self.plan, keep_tensors=not self.options.stats_only)

    def submit_run(self, extra: tuple = ()) -> RequestFuture | None:
        """Queue a comparison with the current plan, input and device; its future
        (``None`` when no model is open, or while a load is in flight: the new model
        runs once it arrives)."""
        q = self._requests
        if q.load_id is not None:
            # A model is on its way: run on it once it arrives, not on the one it replaces
            # (or on the one still open, should the load fail).
            q.setup.run_after = q.run_lost = True
            return None
        if self.model is None or self.runner is None:
            return None
        key = (q.load_serial, self.input_text)
        observe = key != q.observed_key
        future = self.runner.submit(RunRequest(self.model, self.input_text, self.current_plan(),
                                               self.device, observe_tree=observe,
                                               train=self.options.train,
                                               derived=self._views.for_run(extra),
                                               shapes=self._shapes_now()))
        q.record_run(future, key if observe else None)
        self._post(self._drain)  # an answer that came before the id was recorded
        return future

    def _shapes_now(self) -> Any:
        """:attr:`shape_views` as it is now; from another thread (a notebook's), the last
        one its own thread gave (a front end's widgets are read on their thread only)."""
        if self.shape_views is None:
            return None
        if self._home is None or self._home == threading.get_ident():
            self._last_shapes = self.shape_views()
        return self._last_shapes

    def run(self, timeout_s: float | None = None) -> RunResult:
        """Run now and wait: the :class:`~hookscope.core.RunResult` (raises what the run raised)."""
        if self.model is None:
            raise HookscopeError("no model is open: load one first (Session.load(spec))")
        if self._closed:
            raise HookscopeError("this session is closed (its window was closed): open a new "
                                 "one to run again; its plan and last result are still here")
        return self._wait_run(self.submit_run(), timeout_s)

    def _wait_run(self, future: RequestFuture | None, timeout_s: float | None) -> RunResult:
        """The result of the run ``future`` stands for (raises what it raised)."""
        if future is None:
            raise HookscopeError("a model is still loading: wait for it (Session.load waits), "
                                 "then run")
        answer = Requests.wait(future, timeout_s)
        if self._home == threading.get_ident():
            self._drain()  # the answer is queued for this very thread: apply it now
        assert isinstance(answer, Finished)  # a run request is answered by Finished
        return answer.result

    def cancel(self) -> bool:
        """Drop waiting runs and stop the one in flight at its next layer."""
        return self.runner.cancel() if self.runner is not None else False

    @property
    def newest_run(self) -> int | None:
        """The id of the run whose answer is still wanted, if any."""
        return self._requests.newest_run

    @property
    def busy(self) -> bool:
        """A load or the newest run is waiting for its answer."""
        return self._requests.busy

    # -- answers from the runner -------------------------------------------------
    def _from_runner(self, ev: RunnerEvent) -> None:  # the runner's thread
        self._requests.arrived(ev)
        self._post(self._drain)

    def _drain(self) -> None:
        """Apply every answer that may be applied now, in order (the ``post`` thread)."""
        self._requests.drain(self._apply)

    def _apply(self, ev: RunnerEvent) -> None:
        """Where every answer lands (the ``post`` thread), once the requests have said what
        it is to this session (:meth:`~.session_requests.Requests.settle`)."""
        what, rid = self._requests.settle(ev), ev.request_id
        if what is Settled.LOAD:
            self._apply_load(ev)
        elif what is Settled.OBSERVED and isinstance(ev, Observed):
            if self.tree is not None:
                self.tree.take_observed(ev.tree)
            self._emit(TreeObserved(self.tree, request_id=rid))
        elif what is Settled.OLDER_RESULT and isinstance(ev, Finished):
            self.last_result, self.last_error = ev.result, None
            self._emit(ResultArrived(ev.result, request_id=rid))
        elif what is Settled.NEWEST:
            if isinstance(ev, Started):
                self._emit(RunStarted(request_id=rid))
            elif isinstance(ev, Progress):
                self._emit(RunProgress(ev, request_id=rid))
            elif isinstance(ev, (Finished, Failed, Cancelled)):
                if isinstance(ev, Finished):
                    self.last_result, self.last_error = ev.result, None
                    self._emit(ResultArrived(ev.result, request_id=rid))
                elif isinstance(ev, Failed):
                    self.last_error = ev.message
                    self._emit(RunFailed(ev.message, request_id=rid))
                else:
                    if self._requests.load_id is not None:  # stopped for the load
                        self._requests.run_lost = True
                    self._emit(RunCancelled(request_id=rid))
                self._emit(Idle(request_id=rid))

    def _apply_load(self, ev: RunnerEvent) -> None:
        """A load's answer: the new model and tree, and what the load was asked to set up
        (plan, input, device, options, labels), told in the order a window redraws in."""
        rid, setup = ev.request_id, self._requests.setup
        if isinstance(ev, Started):
            self._emit(RunStarted(request_id=rid))
        if isinstance(ev, (Started, Progress)):
            return
        lost, self._requests.run_lost = self._requests.run_lost, False
        if isinstance(ev, Failed):
            code = ev.error.code if isinstance(ev.error, CodeTrustError) else None
            self._emit(LoadFailed(ev.message, code, request_id=rid))
            # The load stopped the run in flight, or held back one asked for meanwhile:
            # the model still open runs again, and Idle comes with that run's answer.
            if lost and self.model is not None and self.submit_run() is not None:
                return
        if not isinstance(ev, Loaded):
            self._emit(Idle(request_id=rid))
            return
        self.model, self.tree = ev.model, ev.tree
        self._views.saes.clear()  # SAEs were attached to the modules of the model this one replaces
        self.trust_pickle, self.code_trust = setup.trust_pickle, setup.trust
        self.last_result = self.last_error = None
        self.plan, self.plan_problem = setup.plan_on(ev.model, ev.tree)
        self.history.clear()
        self.input_text = setup.input_on(ev.model)
        warnings: list[str] = []  # told after "model", which clears a window's old messages
        if setup.device is not None:
            try:
                resolve_device(setup.device)
                self.device = setup.device
                self._emit(DeviceChanged(self.device, request_id=rid))
            except HookscopeError as exc:
                warnings.append(str(exc))
        if setup.options is not None:
            self.options = setup.options
        self.view, self.labels = dict(setup.view or {}), None
        if setup.labels is not None:
            try:
                name_classes(ev.model, setup.labels)
                self.labels = setup.labels
            except HookscopeError as exc:
                warnings.append(str(exc))
        if setup.saes or setup.views:  # a session file's SAEs and LM views
            attach_saved(self._views, self.model, self.tree, self.read_files, setup.saes,
                         setup.views, warnings)
        self._emit(ModelChanged(ev.model, request_id=rid))
        if setup.saes or setup.views:
            self._emit(SaesChanged(dict(self.saes), request_id=rid))
            self._emit(DerivedChanged(dict(self.derived), request_id=rid))
        if self.plan_problem:
            warnings.insert(0, f"{self.plan_problem}\nThat part of the plan was left out: "
                               "tick the layers you meant in the tree.")
        self.load_warnings = warnings
        for message in warnings:
            self._emit(LoadWarning(message, request_id=rid))
        self._emit(PlanChanged(self.plan, request_id=rid))
        self._emit(OptionsChanged(self.options, request_id=rid))
        if setup.run_after or self.options.live:
            self.submit_run()
        if not self.busy:
            self._emit(Idle(request_id=rid))
