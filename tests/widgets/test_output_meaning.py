"""The output by meaning in the window: top classes, next tokens per position, leaves."""

from __future__ import annotations

import torch

from hookscope.core import Plan, compare, load_model
from hookscope.widgets.output_comparison import OutputComparison


def _shown(qtbot, spec, plan, inputs=None, meaning=True):
    lm = load_model(spec)
    w = OutputComparison()
    qtbot.addWidget(w)
    x = lm.example_input if inputs is None else inputs
    r = compare(lm.module, x, plan)
    w.show_result(r, lm.meaning if meaning else None, x)
    w.resize(700, 600)
    w.show()
    qtbot.waitExposed(w)
    return lm, w, r


def test_language_model_rows_show_input_tokens_and_next_tokens(qtbot):
    lm, w, r = _shown(qtbot, "demo:lm", Plan(clamp={"blocks.0.mlp": (-0.02, 0.02)}))
    view = w.meaning_view
    assert view.isVisible()
    cells = view.cell_texts()
    codec = lm.meaning.codec
    assert [c[1] for c in cells] == codec.token_strings(lm.example_input[0].tolist())
    top = codec.token_strings([int(r.output_without[0, -1].argmax())])[0]
    assert cells[-1][2].startswith(top + " ")
    changed = (r.output_without[0].argmax(-1) != r.output_with[0].argmax(-1)).nonzero().flatten()
    assert f"changed at {len(changed)} of {lm.example_input.shape[1]}" in view.title.text()


def test_classifier_rows_rank_labels_without_and_with(qtbot):
    _, w, r = _shown(qtbot, "demo:cnn", Plan(clamp={"conv1": (-0.05, 0.05)}))
    cells = w.meaning_view.cell_texts()
    assert cells[0][2].split()[0] == str(int(r.output_without.argmax()))
    assert cells[0][3].split()[0] == str(int(r.output_with.argmax()))
    assert len(cells) == 5


def test_small_generic_output_keeps_the_bars_only(qtbot):
    _, w, _ = _shown(qtbot, "demo:clamp", Plan(clamp={"0": (-0.5, 0.5)}))
    assert not w.meaning_view.isVisible()


def test_large_generic_output_lists_each_leaf_by_name(qtbot):
    _, w, r = _shown(qtbot, "demo:transformer", Plan(clamp={"embed": (-0.05, 0.05)}), meaning=False)
    cells = w.meaning_view.cell_texts()
    assert w.meaning_view.isVisible() and cells[0][0] == "output"
    assert cells[0][2] == str(int((r.output_with != r.output_without).sum()))
    assert torch.is_tensor(r.output_with)


def test_classifier_shows_its_input_image_beside_the_classes(qtbot):
    lm, w, _ = _shown(qtbot, "demo:cnn", Plan(clamp={"conv1": (-0.05, 0.05)}))
    thumb = w.meaning_view.thumbnail
    assert thumb.isVisible()
    img = thumb.pixmap().toImage()
    x = lm.example_input[0, 0]
    # the brightest input pixel is drawn white, the darkest black (stretched to its range)
    side = img.width() / x.shape[1]
    hi = divmod(int(x.argmax()), x.shape[1])
    lo = divmod(int(x.argmin()), x.shape[1])
    at = lambda rc: img.pixelColor(int((rc[1] + 0.5) * side), int((rc[0] + 0.5) * side)).lightness()
    assert at(hi) == 255 and at(lo) == 0
    _, w2, _ = _shown(qtbot, "demo:lm", Plan())
    assert not w2.meaning_view.thumbnail.isVisible()


def test_the_table_follows_each_new_description_in_place(qtbot):
    # A Live drag sends a new table with every result: the cells are the new
    # description's, the changed-row shading comes and goes with it, and a
    # description of another kind replaces the columns and drops the old rows.
    from PySide6.QtCore import Qt

    from hookscope.widgets.output_meaning import CHANGED, OutputMeaningView

    view = OutputMeaningView()
    qtbot.addWidget(view)

    def classes(labels_with, changed):
        top = [{"label": f"c{i}", "prob": 0.5 - 0.1 * i} for i in range(3)]
        top_with = [{"label": lab, "prob": 0.4} for lab in labels_with]
        return {"kind": "classes", "rows": [{"top_without": top, "top_with": top_with,
                                             "top_changed": changed}]}

    view.show_description(classes(["c9", "c1", "c2"], True))
    first = view.table.item(0, 3)
    assert view.cell_texts()[0][3] == "c9  0.400" and first.background().color() == CHANGED
    view.show_description(classes(["c0", "c1"], False))
    cells = view.cell_texts()
    assert len(cells) == 3 and cells[0][3] == "c0  0.400" and cells[2][3] == ""
    assert view.table.item(0, 3).toolTip() == "c0  0.400"
    assert view.table.item(0, 3).background().style() == Qt.BrushStyle.NoBrush
    view.show_description({"kind": "generic", "leaves": [
        {"name": "logits", "shape": [1, 4], "changed_values": 2, "max_abs_diff": 0.5}]})
    assert [view.table.horizontalHeaderItem(c).text() for c in range(4)] == \
        ["leaf", "shape", "values changed", "max |Δ|"]
    assert view.cell_texts() == [["logits", "1×4", "2", "0.5"]]


def test_each_next_token_rank_has_its_own_column_and_the_row_its_tooltip(qtbot):
    # The runners-up are what a clamp moves: each of the top three is a cell of its
    # own, wide enough for its text, and any cell's tooltip holds the whole row.
    lm, w, r = _shown(qtbot, "demo:lm", Plan(clamp={"blocks.0.mlp": (-0.02, 0.02)}))
    view = w.meaning_view
    headers = [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]
    assert headers[:4] == ["pos", "token", "#1 without", "#1 with"] and "#3 with" in headers
    probs = torch.softmax(r.output_without[0, -1].float(), -1)
    top = probs.topk(3)
    codec = lm.meaning.codec
    want = [f"{codec.token_strings([int(i)])[0]} {float(p):.3f}" for p, i in zip(top.values, top.indices)]
    last = view.cell_texts()[-1]
    assert last[2:8:2] == want                 # without: ranks 1-3, each beside its "with"
    assert last[3] == f"{codec.token_strings([int(r.output_with[0, -1].argmax())])[0]} " \
        f"{float(torch.softmax(r.output_with[0, -1].float(), -1).max()):.3f}"
    row = view.table.rowCount() - 1
    metrics = view.table.fontMetrics()
    for c in range(2, view.table.columnCount()):
        item = view.table.item(row, c)
        assert view.table.columnWidth(c) >= metrics.horizontalAdvance(item.text())
        assert all(cell in item.toolTip() for cell in want)


def test_a_detector_that_finds_nothing_says_no_boxes(qtbot):
    from hookscope.core import Scale
    from hookscope.core.views.outputs import describe_outputs, summary_lines

    lm, w, r = _shown(qtbot, "demo:detector", Plan(interventions={"backbone.conv1": Scale(factor=0.1)}))
    assert len(r.output_with[0]["boxes"]) == 0 and len(r.output_without[0]["boxes"]) > 0
    cells = w.meaning_view.cell_texts()
    assert cells[0][3] == "no boxes" and all(c[3] == "" for c in cells[1:])
    lines = summary_lines(describe_outputs(r.output_without, r.output_with, lm.meaning,
                                           lm.example_input))
    assert lines[0].endswith("without, no boxes with")
