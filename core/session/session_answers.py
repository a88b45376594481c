"""How a :class:`~.session.Session` takes its runner's answers.

Every answer enters through :func:`apply_answer`, on the session's ``post``
thread (the GUI thread in the window), so the session's state only ever
changes on one thread. An answer to a replaced model or a replaced run is
dropped, except a replaced run that finished after the newest shown one (Live
lets a nearly done run finish): that result is shown while the newest runs.
A load's answer replaces the model and applies what the load was asked to set
up (plan, input, device, options, labels), telling the listeners in the order
a window redraws in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.devices import resolve_device
from ..base.errors import HookscopeError
from ..plan.path_patterns import expand_plan, without_unknown_layers
from ..plan.plan import Plan
from .runner_messages import (Cancelled, Failed, Finished, Loaded, Observed, Progress, RunnerEvent,
                              Started)
from .session_events import (DerivedChanged, DeviceChanged, Idle, LoadFailed, LoadWarning,
                             ModelChanged, OptionsChanged, PlanChanged, ResultArrived,
                             RunCancelled, RunFailed, RunProgress, RunStarted, SaesChanged,
                             TreeObserved)
from .session_lm import attach_saved
from .session_types import tidy_input_text
from ..model.class_labels import name_classes
from ..model.tree import TreeNode

if TYPE_CHECKING:
    from .session import Session


def apply_answer(s: Session, ev: RunnerEvent) -> None:
    """Where every answer lands (the ``post`` thread: the GUI thread in the window)."""
    rid, q = ev.request_id, s._requests
    if rid == q.load_id:
        _apply_load(s, ev)
    elif rid < q.valid_from:
        return  # the model it ran on was replaced
    elif isinstance(ev, Observed):
        key = q.observe_keys.pop(rid, None)
        if key is not None:
            q.observed_key = key
        _copy_shapes(s.tree, ev.tree)
        s._emit(TreeObserved(s.tree, request_id=rid))
    elif rid != q.newest_run:
        # An older run the runner let finish (Live: it was nearly done) is shown
        # while the newest runs; anything else of a replaced run is dropped.
        if isinstance(ev, Finished) and q.newest_run is not None and rid > q.shown_run:
            q.shown_run = rid
            s.last_result, s.last_error = ev.result, None
            s._emit(ResultArrived(ev.result, request_id=rid))
    elif isinstance(ev, Started):
        s._emit(RunStarted(request_id=rid))
    elif isinstance(ev, Progress):
        s._emit(RunProgress(ev, request_id=rid))
    elif isinstance(ev, Finished):
        q.newest_run = None
        q.shown_run = rid
        s.last_result, s.last_error = ev.result, None
        s._emit(ResultArrived(ev.result, request_id=rid))
        s._emit(Idle(request_id=rid))
    elif isinstance(ev, Failed):
        q.newest_run = None
        s.last_error = ev.message
        s._emit(RunFailed(ev.message, request_id=rid))
        s._emit(Idle(request_id=rid))
    elif isinstance(ev, Cancelled):
        q.newest_run = None
        s._emit(RunCancelled(request_id=rid))
        s._emit(Idle(request_id=rid))


def _apply_load(s: Session, ev: RunnerEvent) -> None:
    """A load's answer: the new model, tree, plan, input, device, options and labels."""
    rid, q = ev.request_id, s._requests
    if isinstance(ev, Started):
        s._emit(RunStarted(request_id=rid))
        return
    if isinstance(ev, Progress):
        return
    q.load_id = None
    if isinstance(ev, Failed):
        s._emit(LoadFailed(ev.message, request_id=rid))
        s._emit(Idle(request_id=rid))
        return
    if not isinstance(ev, Loaded):
        s._emit(Idle(request_id=rid))
        return
    setup = q.setup
    q.valid_from = rid
    q.load_serial += 1
    q.observed_key = None
    q.newest_run = None
    s.model, s.tree = ev.model, ev.tree
    s.saes.clear()  # SAEs were attached to the modules of the model this one replaces
    s.trust_pickle = setup.trust_pickle
    s.code_trust = setup.trust
    s.last_result = s.last_error = None
    s.plan, s.plan_problem = Plan(), None
    warnings: list[str] = []  # told after "model", which clears a window's old messages
    if setup.plan is not None:
        try:  # wildcards of a command line (--capture 'h.*.mlp') to this model's paths
            known = [n.path for n in ev.tree.walk()] if ev.tree is not None else []
            s.plan, s.plan_problem = without_unknown_layers(
                expand_plan(setup.plan, ev.model.module, known), ev.model.module, known)
        except HookscopeError as exc:
            s.plan_problem = str(exc)
    s.history.clear()
    if setup.input_text is not None:
        s.input_text = tidy_input_text(setup.input_text)
    elif ev.model.example_input is not None:
        s.input_text = "example"
    else:
        s.input_text = ""
    if setup.device is not None:
        try:
            resolve_device(setup.device)
            s.device = setup.device
            s._emit(DeviceChanged(s.device, request_id=rid))
        except HookscopeError as exc:
            warnings.append(str(exc))
    if setup.options is not None:
        s.options = setup.options
    s.view = dict(setup.view or {})
    s.labels = None
    if setup.labels is not None:
        try:
            name_classes(ev.model, setup.labels)
            s.labels = setup.labels
        except HookscopeError as exc:
            warnings.append(str(exc))
    if setup.saes or setup.views:  # a session file's SAEs and LM views
        attach_saved(s, setup.saes, setup.views, warnings)
    s._emit(ModelChanged(ev.model, request_id=rid))
    if setup.saes or setup.views:
        s._emit(SaesChanged(dict(s.saes), request_id=rid))
        s._emit(DerivedChanged(dict(s.derived), request_id=rid))
    if s.plan_problem:
        warnings.insert(0, f"{s.plan_problem}\nThat part of the plan was left out: "
                           "tick the layers you meant in the tree.")
    s.load_warnings = warnings
    for message in warnings:
        s._emit(LoadWarning(message, request_id=rid))
    s._emit(PlanChanged(s.plan, request_id=rid))
    s._emit(OptionsChanged(s.options, request_id=rid))
    if setup.run_after or s.options.live:
        s.submit_run()
    if not s.busy:
        s._emit(Idle(request_id=rid))


def _copy_shapes(tree: TreeNode | None, observed: TreeNode) -> None:
    """The output shapes and call counts an observing pass found, onto the session's tree."""
    if tree is None:
        return
    by_path = {n.path: n for n in observed.walk()}
    for node in tree.walk():
        o = by_path.get(node.path)
        if o is not None:
            node.output_shape, node.calls = o.output_shape, o.calls
