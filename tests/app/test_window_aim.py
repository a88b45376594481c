"""The window: prompt-to-prompt patching at the last position, and the tree's cell editor
taking a text patch source and the ``@pos=``/``@heads=`` suffix, each equal to a hand hook."""

import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from hookscope.core import At, Patch, Zero, load_model
from hookscope.core.model.inputs import parse_input
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_INTERVENTION

PROMPT, OTHER = "the cat sat on the ", "the dog sat on the "


def by_hand(*hooks):
    """demo:lm's logits on PROMPT with plain hooks ``(layer, hook, pre)`` (pre: a pre-hook)."""
    lm = load_model("demo:lm")
    x = parse_input("text:" + PROMPT, lm.example_input, lm.meaning.codec)
    handles = []
    for layer, hook, pre in hooks:
        mod = lm.module.get_submodule(layer)
        handles.append(mod.register_forward_pre_hook(hook) if pre else mod.register_forward_hook(hook))
    with torch.no_grad():
        out = lm.module(x)
    for h in handles:
        h.remove()
    return out


def source_output(layer):
    lm = load_model("demo:lm")
    got = []
    h = lm.module.get_submodule(layer).register_forward_hook(lambda m, a, o: got.append(o.clone()))
    with torch.no_grad():
        lm.module(parse_input("text:" + OTHER, lm.example_input, lm.meaning.codec))
    h.remove()
    return got[0]


def test_window_patches_prompt_to_prompt_at_the_last_position(make_window, qtbot):
    win = make_window(["demo:lm", "--input", "text:" + PROMPT, "--intervene",
                       "blocks.1=patch@pos=-1", "--source-input", "text:" + OTHER])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    src = source_output("blocks.1")

    def hook(m, a, o):
        o = o.clone()
        o[:, -1] = src[:, -1]
        return o
    assert torch.equal(win.last_result.output_with, by_hand(("blocks.1", hook, False)))
    cell = win.tree.model.index_for_path("blocks.1", COL_INTERVENTION).data()
    assert cell.endswith("@pos=-1")


def test_cell_editor_takes_a_text_source_and_a_heads_suffix(make_window, qtbot):
    win = make_window(["demo:lm", "--input", "text:" + PROMPT, "--live"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    view, model = win.tree.view, win.tree.model

    def open_editor(path):
        idx = win.tree.proxy.mapFromSource(model.index_for_path(path, COL_INTERVENTION))
        view.scrollTo(idx)
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
        qtbot.keyClick(view, Qt.Key.Key_F2)
        editor = view.findChild(InterventionEditor)
        assert editor is not None
        return editor

    editor = open_editor("blocks.1")
    qtbot.keyClicks(editor.kind_combo, "patch")
    source = editor.findChild(QLineEdit, "param_source_input")
    at = editor.findChild(QLineEdit, "param_at")
    qtbot.mouseClick(at, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(at, "@pos=last")
    qtbot.mouseClick(source, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(source, "text:" + OTHER.strip())
    qtbot.keyClick(source, Qt.Key.Key_Return)
    want = Patch("text:" + OTHER.strip(), at=At(positions=[-1]))
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.interventions.get("blocks.1")
                    == want, timeout=30_000)
    lm = load_model("demo:lm")
    got = []
    h = lm.module.blocks[1].register_forward_hook(lambda m, a, o: got.append(o.clone()))
    with torch.no_grad():
        lm.module(parse_input("text:" + OTHER.strip(), lm.example_input, lm.meaning.codec))
    h.remove()

    def hook(m, a, o):
        o = o.clone()
        o[:, -1] = got[0][:, -1]
        return o
    assert torch.equal(win.last_result.output_with, by_hand(("blocks.1", hook, False)))
    if view.findChild(InterventionEditor) is not None:  # Return may have closed it already
        qtbot.keyClick(view.viewport(), Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is None)

    editor = open_editor("blocks.0.attn")
    qtbot.keyClicks(editor.kind_combo, "zero")
    at = editor.findChild(QLineEdit, "param_at")
    qtbot.mouseClick(at, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(at, "heads=1")
    qtbot.keyClick(at, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.interventions.get("blocks.0.attn")
                    == Zero(at=At(heads=[1])), timeout=30_000)
    n = lm.module.blocks[0].attn.n_head

    def pre(m, a):
        h = a[0].clone()
        h.view(*h.shape[:-1], n, -1)[..., 1, :] = 0
        return (h,)
    # the patch on blocks.1 stays; the heads are zeroed at blocks.0.attn.proj's input
    assert torch.equal(win.last_result.output_with, by_hand(("blocks.0.attn.proj", pre, True),
                                                            ("blocks.1", hook, False)))
    assert model.index_for_path("blocks.0.attn", COL_INTERVENTION).data() == "zero @heads=1"


def test_window_patches_gpt2_prompt_to_prompt(make_window, qtbot, tmp_path):
    import sys
    from pathlib import Path

    import pytest

    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models

    spec = f"hf:{hf_models.gpt2(tmp_path / 'g')}"
    other = "a dog sat on the log and the"
    win = make_window([spec, "--input", "text:the cat sat on the", "--intervene",
                       "transformer.h.1=patch@pos=last", "--source-input", "text:" + other])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    lm = load_model(spec)
    got = []
    block = lm.module.get_submodule("transformer.h.1")
    hidden = lambda o: o[0] if isinstance(o, tuple) else o  # noqa: E731
    h = block.register_forward_hook(lambda m, a, o: got.append(hidden(o).clone()))
    with torch.no_grad():
        lm.module(**parse_input("text:" + other, lm.example_input, lm.meaning.codec))
    h.remove()

    def hook(m, a, o):
        hs = hidden(o).clone()
        hs[:, -1] = got[0][:, -1]
        return (hs, *o[1:]) if isinstance(o, tuple) else hs
    h = block.register_forward_hook(hook)
    with torch.no_grad():
        want = lm.module(**parse_input("text:the cat sat on the", lm.example_input, lm.meaning.codec))
    h.remove()
    out = win.last_result.output_with
    assert torch.equal(out.logits if hasattr(out, "logits") else out, want.logits)


def test_the_at_field_stays_when_the_kind_changes_and_refuses_bad_text(qtbot):
    from hookscope.core import HookscopeError, Scale

    editor = InterventionEditor()
    qtbot.addWidget(editor)
    editor.show()
    qtbot.keyClicks(editor.kind_combo, "zero")
    at = editor.findChild(QLineEdit, "param_at")
    qtbot.mouseClick(at, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(at, "pos=1@units=0:4")
    qtbot.keyClick(at, Qt.Key.Key_Return)
    assert editor.value() == Zero(at=At(positions=[1], units="0:4"))
    while editor.kind_combo.currentText() != "scale":  # the kinds are sorted: scale is above zero
        qtbot.keyClick(editor.kind_combo, Qt.Key.Key_Up)
    assert editor.value() == Scale(1.0, at=At(positions=[1], units="0:4"))
    qtbot.waitUntil(lambda: len(editor.findChildren(QLineEdit, "param_at")) == 1)  # the old one gone
    at = editor.findChild(QLineEdit, "param_at")
    assert at.text() == "pos=1@units=0:4"  # as typed
    at.selectAll()
    qtbot.keyClicks(at, "@rows=3")
    import pytest

    assert at.text() == "@rows=3", at.text()
    with pytest.raises(HookscopeError, match="@pos=SEL"):
        editor.value()
