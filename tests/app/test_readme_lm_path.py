"""The README's language-model examples, followed twice: the command line as the README
prints it (read from README.md, so a changed example changes the test), and the same thing
done in the window as a person would (typed, clicked, opened from the View menu). The
window's numbers must equal the CLI's ``--json``. Both run in this process, through the
same core computation on the same thread count, so the comparisons are exact: the JSON's
own rounding (6 decimals for probabilities, activations and attention) is applied to the
window's results by the same ``to_json_dict`` the CLI uses."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialog, QWidget

from hookscope.app.cli import main
from hookscope.app.output_report import json_dict
from hookscope.app.session_reactions import shown_input
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_HI, COL_INTERVENTION, COL_LO
from hookscope.widgets.output_meaning import rows_for
from support.window_menus import click_menu_action, click_view_action, tree_context_menu

README = Path(__file__).parents[2] / "README.md"
WAIT = 60_000


def readme_commands() -> list[list[str]]:
    """Every ``hookscope run`` command of the README's ``sh`` blocks, as argv after ``run``
    (continuation lines joined, comments dropped)."""
    commands, block, line = [], False, ""
    for raw in README.read_text(encoding="utf-8").splitlines():
        text = raw.strip()
        if text.startswith("```"):
            block = text == "```sh"
            continue
        if not block or text.startswith("#"):
            continue
        line += text[:-1] + " " if text.endswith("\\") else text
        if text.endswith("\\"):
            continue
        argv, line = shlex.split(line), ""
        if argv and argv[0].endswith("hookscope") and argv[1:2] == ["run"]:
            commands.append(argv[2:])
    return commands


def readme_command(*words: str) -> list[str]:
    """The one README ``run`` command on ``demo:lm`` that holds every one of ``words``."""
    found = [c for c in readme_commands() if c[0] == "demo:lm" and all(w in c for w in words)]
    assert len(found) == 1, f"README.md: {len(found)} demo:lm commands with {words}"
    return found[0]


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def cli_json(capsys, argv: list[str]) -> dict:
    assert main(["run", *argv, *([] if "--json" in argv else ["--json"]), "-q"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


# -- the window, as a person works it ---------------------------------------------
def wait_new(qtbot, win, before, key: str | None = None):
    qtbot.waitUntil(lambda: win.last_result is not None and win.last_result is not before
                    and win.is_idle() and (key is None or key in win.last_result.extras),
                    timeout=WAIT)
    return win.last_result


def open_window(make_window, qtbot, argv: list[str]):
    """demo:lm opened bare, then the README's ``--input`` typed in the input box (Return runs)."""
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=WAIT)
    prompt = flag(argv, "--input")
    if prompt is not None:
        field = win.run_bar.input_edit
        field.setFocus()
        QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        QTest.keyClicks(field, prompt)
        before = win.last_result
        QTest.keyClick(field, Qt.Key.Key_Return)
        wait_new(qtbot, win, before)
        assert field.text() == prompt   # byte for byte: the trailing space kept
    return win


def edit_cell(qtbot, win, path: str, kind: str, fields: list[tuple[str, str]]) -> None:
    """The tree's Intervention cell of ``path``: clicked, F2, the kind typed into its chooser,
    each field clicked and typed over (``at`` is the ``@pos=``/``@heads=`` field); Return on
    the last one ends the edit."""
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path(path, COL_INTERVENTION))
    view.scrollTo(idx)
    win.activateWindow()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is not None)
    editor = view.findChild(InterventionEditor)
    qtbot.keyClicks(editor.kind_combo, kind)
    assert editor.kind_combo.currentText() == kind
    # the fields of kinds passed on the way ("s" is sae-scale before "sc" is scale) gone,
    # this kind's shown and laid out where a click reaches them
    at = lambda: editor.findChildren(QWidget, "param_at")  # noqa: E731
    qtbot.waitUntil(lambda: len(at()) == 1 and at()[0].isVisible())
    for name, text in fields:
        w = editor.findChild(QWidget, f"param_{name}")
        assert w is not None, name
        # clicked where it shows: a wide kind's last fields may pass the tree's right edge
        seen = w.visibleRegion().boundingRect()
        assert seen.width() >= 20, f"{name} hidden past the tree's edge"
        qtbot.mouseClick(w, Qt.MouseButton.LeftButton, pos=seen.center())
        qtbot.keyClick(w, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        qtbot.keyClicks(w, text)
    qtbot.keyClick(editor.focusWidget() or editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is None
                    or not view.findChild(InterventionEditor).isVisible())


def type_in_cell(qtbot, win, path: str, column: int, text: str) -> None:
    """A plain cell of the tree (Clamp low/high): clicked, F2, typed over, Return."""
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path(path, column))
    view.scrollTo(idx)
    win.activateWindow()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.waitUntil(lambda: view.currentIndex() == idx)
    qtbot.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not view)
    editor = QApplication.focusWidget()
    qtbot.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is view)


def click_run(qtbot, win, key: str | None = None):
    before = win.last_result
    QTest.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    return wait_new(qtbot, win, before, key)


def assert_same_run(win, result, cli: dict, verdict: str | None = None) -> None:
    """The window's run is the CLI's: both outputs value for value, the next-token tables
    (``output``: each position's top tokens and probabilities) and the verdict (``verdict``
    where the window words it differently, e.g. a vector's name)."""
    verdict = cli["verdict"] if verdict is None else verdict
    assert result.output_with.flatten().tolist() == cli["output_with"]
    assert result.output_without.flatten().tolist() == cli["output_without"]
    lm = win.session.model
    inputs, _tokens = shown_input(result, lm.meaning)
    mine = json.loads(json.dumps(json_dict(result, lm.meaning, inputs, full=False)))
    assert mine["output"] == cli["output"]
    assert mine["max_abs_diff"] == cli["max_abs_diff"] and mine["verdict"] == verdict
    # the Output dock's next-token table reads, cell for cell, what the CLI's JSON says
    title, headers, rows = rows_for(cli["output"])
    shown = win.outputs.meaning_view
    table = shown.table
    assert shown.title.text() == title and table.rowCount() == len(rows)
    assert [[table.item(r, c).text() for c in range(len(headers))] for r in range(len(rows))] \
        == [cells + [""] * (len(headers) - len(cells)) for cells, _changed in rows]


def as_json(obj) -> dict:
    return json.loads(json.dumps(obj.to_json_dict()))


# -- the examples ------------------------------------------------------------------
@pytest.mark.parametrize("words, path, kind, fields", [
    # one token position: the last, patched from another prompt (prompt-to-prompt)
    (("blocks.1=patch@pos=-1",), "blocks.1", "patch",
     [("at", "@pos=-1"), ("source_input", "text:the dog sat on the ")]),
    # attention heads 0 and 3 zeroed
    (("blocks.0.attn=zero@heads=0,3",), "blocks.0.attn", "zero", [("at", "@heads=0,3")]),
    # positions 3, 4, 5 scaled to 0
    (("blocks.1=scale:0@pos=3:6",), "blocks.1", "scale", [("at", "@pos=3:6"), ("factor", "0")]),
])
def test_where_inside_the_output(make_window, qtbot, capsys, words, path, kind, fields):
    argv = readme_command(*words)
    cli = cli_json(capsys, argv)
    win = open_window(make_window, qtbot, argv)
    edit_cell(qtbot, win, path, kind, fields)
    result = click_run(qtbot, win)
    assert json.loads(json.dumps(result.to_json_dict()))["interventions"] == cli["interventions"]
    assert_same_run(win, result, cli)


def test_steering_vector_from_two_prompts(make_window, qtbot, capsys):
    argv = readme_command("blocks.0=add:catdog:4")
    cli = cli_json(capsys, argv)
    # --vector "catdog=diff:text:A|text:B": the two prompts the dialog takes
    spec = flag(argv, "--vector").split("=", 1)[1]
    assert spec.startswith("diff:text:")
    a, b = (side.removeprefix("text:") for side in spec.removeprefix("diff:").split("|"))
    win = open_window(make_window, qtbot, argv)
    menu = tree_context_menu(qtbot, win, "blocks.0")
    action = next(x for x in menu.actions() if x.objectName() == "actionSteer")
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: win.findChild(QDialog, "steerDialog") is not None)
    dialog = win.findChild(QDialog, "steerDialog")
    qtbot.waitExposed(dialog)
    assert dialog.positions.currentIndex() == 0   # read at the last position, as diff: is
    QTest.keyClicks(dialog.prompt_a, a)
    QTest.keyClicks(dialog.prompt_b, b)
    dialog.alpha.setFocus()
    QTest.keyClick(dialog.alpha, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(dialog.alpha, "4")
    before = win.last_result
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)
    result = wait_new(qtbot, win, before)
    dialog.close()
    got = result.to_json_dict()["interventions"]["blocks.0"]
    want = cli["interventions"]["blocks.0"]
    assert got["vector"]["source"] == want["vector"]["source"]
    assert got["vector"]["values"] == want["vector"]["values"] and got["alpha"] == want["alpha"]
    # the dialog names the vector after its prompts where the command line names it catdog
    name = flag(argv, "--vector").split("=", 1)[0]
    assert_same_run(win, result, cli, cli["verdict"].replace(f"add({name} ", f"add({a}-{b} "))


def test_logit_lens(make_window, qtbot, capsys):
    argv = readme_command("--lens", "blocks.0=scale:0.3")
    cli = cli_json(capsys, argv)
    win = open_window(make_window, qtbot, argv)
    edit_cell(qtbot, win, "blocks.0", "scale", [("factor", "0.3")])
    click_view_action(qtbot, win, "actionViewLens")
    qtbot.waitUntil(win.lens_dock.isVisible)
    token = win.lens_view.token
    token.setFocus()
    QTest.keyClicks(token, flag(argv, "--lens-token"))
    before = win.last_result
    QTest.keyClick(token, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.lens_view.model.lens is not None
                    and win.lens_view.model.lens.target_id is not None and win.is_idle(),
                    timeout=WAIT)
    result = win.last_result
    if result is before or "lens" not in result.extras:
        result = click_run(qtbot, win, "lens")
    assert as_json(win.lens_view.model.lens) == cli["lens"] == as_json(result.extras["lens"])
    assert_same_run(win, result, cli)


def test_attention_patterns(make_window, qtbot, capsys):
    argv = readme_command("--attention")
    cli = cli_json(capsys, argv)
    layer = flag(argv, "--attention")
    win = open_window(make_window, qtbot, argv)
    # --intervene blocks.0=clamp:LO:HI is the tree's Clamp low/high cells
    lo, hi = flag(argv, "--intervene").split("=", 1)[1].removeprefix("clamp:").split(":")
    type_in_cell(qtbot, win, "blocks.0", COL_LO, lo)
    type_in_cell(qtbot, win, "blocks.0", COL_HI, hi)
    click_view_action(qtbot, win, "actionViewAttention")
    result = click_run(qtbot, win, "attention")
    mine = as_json(result.extras["attention"])
    assert mine[layer] == cli["attention"][layer]
    # the maps drawn are those numbers
    view = next(w for w in win.findChildren(QWidget) if type(w).__name__ == "AttentionView")
    view.layer.setCurrentText(layer)
    qtbot.waitUntil(lambda: view.layer.currentText() == layer and len(view.images) > 0)
    for h, img in enumerate(view.images):
        assert torch.equal(torch.as_tensor(img.image),
                           result.extras["attention"][layer].with_[0, h].double())
    assert_same_run(win, result, cli)


def test_sae_features(make_window, qtbot, capsys):
    argv = readme_command("--sae")
    cli = cli_json(capsys, argv)
    layer, folder = flag(argv, "--sae").split("=", 1)
    win = open_window(make_window, qtbot, argv)
    assert win.tree.select_path(layer)
    click_menu_action(qtbot, win, "&File", "actionAttachSae")
    qtbot.waitUntil(lambda: win.findChild(QDialog, "attachSaeDialog") is not None)
    dialog = win.findChild(QDialog, "attachSaeDialog")
    qtbot.waitExposed(dialog)
    dialog.folder.setFocus()
    QTest.keyClick(dialog.folder, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(dialog.folder, folder)
    before = win.last_result
    QTest.keyClick(dialog.folder, Qt.Key.Key_Return)
    wait_new(qtbot, win, before, "sae")
    kind, features = flag(argv, "--intervene").split("=", 1)[1].split(":")
    edit_cell(qtbot, win, layer, kind, [("features", features)])
    result = click_run(qtbot, win, "sae")
    assert as_json(result.extras["sae"])[layer] == cli["sae"][layer]
    # the dock's table: the last position's reconstruction error with the edit
    view = win.sae_view
    n = view.table.rowCount()
    assert view.table.item(n - 1, 4).text() == f"{result.extras['sae'][layer].error_without[-1]:.4f}"
    assert_same_run(win, result, cli)


def test_generation(make_window, qtbot, capsys):
    argv = readme_command("--generate")
    cli = cli_json(capsys, argv)
    win = open_window(make_window, qtbot, argv)
    edit_cell(qtbot, win, "blocks.0", "scale", [("factor", "0.2")])
    click_view_action(qtbot, win, "actionViewGeneration")
    qtbot.waitUntil(win.generation_dock.isVisible)
    view = win.generation_view
    view.steps.setFocus()
    QTest.keyClick(view.steps, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(view.steps, flag(argv, "--generate"))
    before = win.last_result
    QTest.mouseClick(view.button, Qt.MouseButton.LeftButton)
    result = wait_new(qtbot, win, before, "generation")
    g = view.generation
    assert g.with_.ids == cli["generation"]["with"]["ids"]
    assert g.without.ids == cli["generation"]["without"]["ids"]
    assert as_json(g) == cli["generation"]
    assert_same_run(win, result, cli)


def readme_sweep_command() -> list[str]:
    """The README's patching grid over layers × positions (a plain ``` block, not ``sh``)."""
    text = README.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip().startswith("hookscope sweep demo:lm --input") and "pos=all" in ln
             and "--normalise" in ln and "--ray" not in ln]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])[2:]


def test_patching_sweep_over_layers_and_positions(make_window, qtbot, capsys, tmp_path,
                                                  monkeypatch):
    import numpy as np

    argv = readme_sweep_command()
    monkeypatch.chdir(tmp_path)   # its --csv and --save-plots land here
    assert main(["sweep", *argv, "--json", "-q"]) == 0
    out, err = capsys.readouterr()
    cli = json.loads(out)
    assert err == "" and (tmp_path / flag(argv, "--csv")).is_file()
    overs = [argv[i + 1] for i, a in enumerate(argv) if a == "--over"]
    metric = flag(argv, "--metric")
    win = open_window(make_window, qtbot, argv)
    click_view_action(qtbot, win, "actionViewSweep")
    qtbot.waitUntil(win.sweep_dock.isVisible)
    view = win.sweep_view

    def type_over(field, text):
        field.setFocus()
        QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        QTest.keyClicks(field, text)

    type_over(view.axes, "; ".join(overs))
    type_over(view.template, flag(argv, "--intervene"))
    type_over(view.source, flag(argv, "--source-input"))
    kind, tokens = metric.split(":", 1)
    combo = view.metric_box.kind
    combo.setFocus()
    QTest.keyClick(combo, Qt.Key.Key_Home)
    while combo.currentText() != kind:
        QTest.keyClick(combo, Qt.Key.Key_Down)
    for box, token in zip(view.metric_box.tokens, tokens.split(",")):
        type_over(box.lineEdit(), token)
    # a bare token typed is completed to the model's prediction of it: picked by its id
    codec = win.session.model.meaning.codec
    ids = [t if t.startswith("'") else f"#{codec.encode(t)[0]}" for t in tokens.split(",")]
    assert view.metric_box.text() == f"{kind}:{','.join(ids)}"
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.run_button.isEnabled(), timeout=WAIT)
    got = view.result
    assert [got.axes[k] for k in got.axes] == [cli["axes"][k] for k in cli["axes"]]
    # The dock has no --normalise: its grid is the raw metric, the CLI's before
    # (m - clean) / (source - clean); the clean run is the dock's baseline, bit for bit, and
    # the grid normalised by the CLI's two ends equals the CLI's to float rounding.
    clean, source = cli["normalised"]["clean"], cli["normalised"]["source"]
    assert got.baseline == clean
    np.testing.assert_allclose((np.asarray(got.values, dtype=float) - clean) / (source - clean),
                               np.asarray(cli["values"], dtype=float), rtol=0, atol=1e-9)
    assert np.array_equal(view.plot.image.image, got.values)   # what the heat map draws
