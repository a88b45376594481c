"""A model of this Python session opened as it is (Session.from_module): used in place, on its
device and in its mode, its own hooks kept, Hookscope's removed after every run."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from live_models import TinyNet, all_hooks

from hookscope.core import Clamp, HookscopeError, Plan, Session, SpecError
from hookscope.core.base.errors import InputError


@pytest.fixture
def opened():
    made: list[Session] = []

    def open_(model, x=None, **kw):
        s = Session.from_module(model, x, timeout_s=60, **kw)
        made.append(s)
        return s

    yield open_
    for s in made:
        s.close()


X = torch.tensor([[1.0, 2.0, 3.0]])


def test_the_module_itself_runs_and_numbers_are_torchs(opened):
    model = TinyNet()
    s = opened(model, X)
    assert s.model.module is model and s.model.spec == "live:TinyNet"
    assert [n.path for n in s.tree.walk()] == ["", "fc1", "act", "fc2"]
    s.capture("fc1")
    s.intervene("fc1", Clamp(-0.5, 0.5))
    r = s.run(timeout_s=60)
    with torch.no_grad():
        want_without = model(X)
        want_with = model.fc2(model.act(model.fc1(X).clamp(-0.5, 0.5)))
    assert torch.equal(r.output_without, want_without)
    assert torch.equal(r.output_with, want_with)
    assert torch.equal(r.captures["fc1"][0].tensor, model.fc1(X).clamp(-0.5, 0.5).detach())
    assert s.last_result is r


def test_the_users_hooks_stay_and_fire_and_hookscope_leaves_none(opened):
    model = TinyNet()
    seen: list[torch.Tensor] = []
    handle = model.fc1.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone()))
    before = all_hooks(model)
    s = opened(model, X)
    s.capture("fc1", "fc2")
    s.intervene("fc1", Clamp(-0.5, 0.5))
    for _ in range(2):
        s.run(timeout_s=60)
        assert all_hooks(model) == before  # only the user's hook, the same object
    assert seen, "the user's hook did not fire during Hookscope's runs"
    n = len(seen)
    model(X)  # and after them, in the user's own call
    assert len(seen) == n + 1 and torch.equal(seen[-1], model.fc1(X).detach())
    handle.remove()
    assert all_hooks(model) == {}


def test_train_mode_is_the_callers_after_each_run(opened):
    model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    s = opened(model, X)
    r = s.run(timeout_s=60)
    assert model.training and all(m.training for m in model.modules())
    assert not r.outputs_differ  # ran in eval mode: no dropout noise between the two forwards
    model.eval()
    s.run(timeout_s=60)
    assert not model.training


def test_weights_changed_between_runs_are_seen(opened):
    model = TinyNet()
    s = opened(model, X)
    s.intervene("fc1", Clamp(-0.5, 0.5))
    first = s.run(timeout_s=60).output_without
    with torch.no_grad():
        model.fc2.weight.mul_(2.0)  # an optimizer step does this in place
    second = s.run(timeout_s=60)
    assert not second.baseline_reused
    with torch.no_grad():
        assert torch.equal(second.output_without, model(X))
    assert not torch.equal(first, second.output_without)


def test_the_device_is_the_modules():
    model = TinyNet()
    s = Session.from_module(model, X, timeout_s=60)
    try:
        assert s.device == str(next(model.parameters()).device)
    finally:
        s.close()


def test_a_lazy_module_is_materialised_on_the_runner_thread(opened):
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.Linear(4, 2))
    s = opened(model, X)
    assert model[0].weight.shape == (4, 3)
    assert s.run(timeout_s=60).output_with.shape == (1, 2)


def test_labels_name_the_classes(opened):
    model = TinyNet()
    s = opened(model, X, labels=["cat", "dog"])
    desc = s.run(timeout_s=60)
    assert desc.meaning.kind == "classes" and desc.meaning.labels == ["cat", "dog"]


def test_what_is_not_a_model_or_a_tokenizer_is_refused_clearly():
    with pytest.raises(SpecError, match="nn.Module"):
        Session.from_module(TinyNet, X)
    with pytest.raises(InputError, match="tokenizer"):
        Session.from_module(TinyNet(), X, tokenizer=object())
    with pytest.raises(InputError, match="needs a tokenizer"):
        Session.from_module(TinyNet(), "a prompt")


def test_a_plan_is_given_and_applied_at_open(opened):
    model = TinyNet()
    s = opened(model, X, plan=Plan(capture=["fc1", "nope"], clamp={"fc1": (0.0, 0.1)}))
    assert s.plan.capture == ("fc1",) and "nope" in (s.plan_problem or "")
    r = s.run(timeout_s=60)
    with torch.no_grad():
        assert torch.equal(r.captures["fc1"][0].tensor, model.fc1(X).clamp(0.0, 0.1))


def test_edits_from_another_thread_reach_subscribers_through_post():
    """A session with a ``post`` belongs to its thread: an edit made elsewhere is told there."""
    queued: list = []
    s = Session(runner_factory=None, post=queued.append)
    heard: list[tuple[str, int]] = []
    s.subscribe(lambda ev: heard.append((ev.kind, threading.get_ident())))
    t = threading.Thread(target=lambda: s.capture("a"))
    t.start()
    t.join(10)
    assert heard == [] and len(queued) == 1  # not told on the editing thread
    queued.pop()()
    assert heard == [("plan", threading.get_ident())]
    s.capture("b")  # on its own thread: told at once
    assert heard[-1] == ("plan", threading.get_ident()) and not queued


def test_run_on_the_post_thread_applies_its_answer_before_returning():
    queued: list = []
    s = Session(post=queued.append)
    try:
        s.open_module(TinyNet(), X, run_after=False)
        deadline = 600
        while s.model is None and deadline:
            while queued:
                queued.pop(0)()
            threading.Event().wait(0.05)
            deadline -= 1
        r = s.run(timeout_s=60)
        assert s.last_result is r  # not only once the queued answer is delivered later
        while queued:
            queued.pop(0)()
        assert s.last_result is r and not s.busy
    finally:
        s.close()


def test_a_closed_session_keeps_its_result_and_refuses_to_run(opened):
    s = opened(TinyNet(), X)
    r = s.run(timeout_s=60)
    s.close()
    assert s.last_result is r
    with pytest.raises(HookscopeError, match="closed"):
        s.run(timeout_s=5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_model_on_the_gpu_runs_there_and_stays_there(opened):
    model = TinyNet().cuda()
    s = opened(model, X)
    assert s.device == "cuda:0"
    s.capture("fc1")
    r = s.run(timeout_s=60)
    assert next(model.parameters()).device.type == "cuda"
    with torch.no_grad():
        assert torch.allclose(r.output_with.cpu(), model(X.cuda()).cpu())
