"""The Intervention panel on its own: generated from every registered kind's parameter
metadata, its head grid and token strip clicked, and its edits emitted (never applied)."""

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel

from hookscope.core import At, Scale, Zero, kinds
from hookscope.widgets.intervention_panel import InterventionPanel
from hookscope.widgets.token_strip import shown_token


@pytest.fixture
def panel(qtbot):
    p = InterventionPanel()
    qtbot.addWidget(p)
    p.resize(360, 700)
    p.show()
    qtbot.waitExposed(p)
    return p


@pytest.mark.parametrize("kind", sorted(kinds()))
def test_every_kind_shows_each_parameter_with_its_label_meaning_and_range(panel, kind):
    panel.set_layer("layer", None)
    panel.kind_combo.setCurrentText(kind)
    texts = [w.text() for w in panel.findChildren(QLabel)]
    for p in kinds()[kind].params():
        assert panel.findChild(object, f"panel_{p.name}") is not None
        assert p.name in texts
        hint = next(t for t in texts if t.startswith(p.help or p.type))
        if p.type in ("float", "int"):
            assert "range" in hint
    assert panel.description.text().startswith(kinds()[kind].__doc__.strip().split()[0])


def test_heads_and_tokens_clicked_make_one_edit_each(panel, qtbot):
    edits = []
    panel.edited.connect(lambda path, iv: edits.append((path, iv)))
    panel.set_layer("blocks.0.attn", Zero(), n_heads=6)
    panel.set_tokens(["the", " cat", " sat"])
    assert [panel.token_strip.item(i).text() for i in range(3)] == [shown_token(t) for t in
                                                                     ("the", " cat", " sat")]
    QTest.mouseClick(panel.head_grid.buttons[5], Qt.MouseButton.LeftButton)
    strip = panel.token_strip
    QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(1))
    assert edits == [("blocks.0.attn", Zero(at=At(heads=[5]))),
                     ("blocks.0.attn", Zero(at=At(positions=[1], heads=[5])))]
    QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(1))
    assert edits[-1] == ("blocks.0.attn", Zero(at=At(heads=[5])))


def test_shown_intervention_picks_its_tokens_and_heads_without_an_edit(panel):
    edits = []
    panel.edited.connect(lambda *a: edits.append(a))
    panel.set_layer("l", None, n_heads=4)
    panel.set_tokens(list("abcde"))
    panel.show_intervention(Scale(0.5, at=At(positions=["last", 0], heads=[1, 3])))
    assert panel.token_strip.positions() == [0, 4]
    assert panel.head_grid.heads() == [1, 3]
    assert panel.kind_combo.currentText() == "scale" and edits == []


def test_a_layer_without_heads_says_why(panel):
    panel.set_layer("fc", None, None, "layer 'fc' (Linear) has no number of heads")
    assert not panel.head_grid.buttons
    assert "no number of heads" in panel.head_grid._none.text()


def test_a_huge_typed_range_picks_the_tokens_there_are_and_a_huge_list_is_refused(panel, qtbot):
    edits, errors = [], []
    panel.edited.connect(lambda *a: edits.append(a))
    panel.errorOccurred.connect(errors.append)
    panel.set_layer("l", Zero())
    panel.set_tokens(list("abcd"))
    QTest.mouseClick(panel.positions_edit, Qt.MouseButton.LeftButton)
    QTest.keyClicks(panel.positions_edit, "1:999999999999")
    QTest.keyClick(panel.positions_edit, Qt.Key.Key_Return)
    assert panel.token_strip.positions() == [1, 2, 3]
    assert edits[-1] == ("l", Zero(at=At(positions="1:999999999999")))
    from PySide6.QtWidgets import QApplication

    QApplication.clipboard().setText(",".join(map(str, range(5000))))  # pasted, as a person would
    panel.positions_edit.selectAll()
    QTest.keyClick(panel.positions_edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(panel.positions_edit, Qt.Key.Key_Return)
    assert errors and "use ranges" in errors[-1] and len(edits) == 1
    assert panel.token_strip.positions() == []


def test_no_token_input_hides_the_strip_and_heads_it_lacks_are_not_shown(panel):
    panel.set_layer("l", Zero(at=At(heads=[9])), n_heads=4)
    assert panel.head_grid.heads() == []   # heads=9 on 4 heads: the run refuses it, not the panel
    panel.set_tokens(None)
    assert panel.token_strip.isHidden() and panel.positions_edit.isVisible()
    panel.set_tokens(["a", "b"])
    assert not panel.token_strip.isHidden() and panel.token_strip.count() == 2
