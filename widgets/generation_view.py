"""Two continuations side by side: what the model says without and with the
interventions. The prompt is grey, tokens before the first divergence plain,
the first differing token highlighted in orange and the rest in a lighter tint;
a table lists each step's top next tokens of both runs. The controls (how many
tokens, temperature, seed) ask for a generation through ``generateRequested``.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QDoubleSpinBox, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QSpinBox, QSplitter, QTableWidget, QTableWidgetItem, QTextBrowser,
                               QVBoxLayout, QWidget)

from hookscope.core.analyses import Continuation, Generation
from hookscope.widgets.named import named

FIRST, AFTER = "#ffb347", "#ffe6c2"


def visible(text: str) -> str:
    return text.replace("\n", "⏎")


def continuation_html(g: Generation, c: Continuation) -> str:
    """The prompt in grey, then each token; from the divergence on, highlighted."""
    parts = [f'<span style="color:#888">{html.escape(visible(g.prompt_text))}</span>']
    for k in range(len(c.ids)):
        text = html.escape(visible(c.pieces[k]))
        if g.first_divergence is not None and k >= g.first_divergence:
            colour = FIRST if k == g.first_divergence else AFTER
            parts.append(f'<span style="background:{colour}">{text}</span>')
        else:
            parts.append(text)
    return "<div style='font-family:monospace; white-space:pre-wrap'>" + "".join(parts) + "</div>"


class GenerationView(QWidget):
    generateRequested = Signal(int, float, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("generationView")
        self.steps = named(QSpinBox(), "generateSteps")
        self.steps.setRange(1, 512)
        self.steps.setValue(20)
        self.steps.setPrefix("tokens ")
        self.temperature = named(QDoubleSpinBox(), "generateTemperature")
        self.temperature.setRange(0.0, 10.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setPrefix("temperature ")
        self.temperature.setToolTip("0: greedy; above 0: sampled, both runs with the same seed")
        self.seed = named(QSpinBox(), "generateSeed")
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setPrefix("seed ")
        self.button = named(QPushButton("Generate"), "generateButton")
        self.button.clicked.connect(lambda: self.generateRequested.emit(
            self.steps.value(), self.temperature.value(), self.seed.value()))
        self.note = named(QLabel(), "generationNote")
        self.note.setWordWrap(True)
        self.without = named(QTextBrowser(), "generationWithout")
        self.with_ = named(QTextBrowser(), "generationWith")
        self.table = named(QTableWidget(0, 3), "generationSteps")
        self.table.setHorizontalHeaderLabels(["step", "top without", "top with"])
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # the step number is short: its column fits it, the top tokens get the width
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setWordWrap(False)   # "m 1.00, x 0.00, …" on one line, whole in its tooltip
        bar = QHBoxLayout()
        for w in (self.steps, self.temperature, self.seed, self.button):
            bar.addWidget(w)
        bar.addStretch(1)
        texts = QSplitter()
        for title, box in (("without the interventions", self.without),
                           ("with the interventions", self.with_)):
            col = QWidget()
            lay = QVBoxLayout(col)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.addWidget(QLabel(title))
            lay.addWidget(box)
            texts.addWidget(col)
        texts.addWidget(self.table)
        # the step table as wide as both continuations: its top tokens readable, not "p witho"
        for i, stretch in enumerate((1, 1, 2)):
            texts.setStretchFactor(i, stretch)
        self.table.setMinimumWidth(self.table.fontMetrics().horizontalAdvance("step  top without  top with") + 40)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.note)
        lay.addWidget(texts, 1)
        self.generation: Generation | None = None
        self.note.setText("Generate continues the prompt without and with the interventions. "
                          "@pos= counts in the prompt (@pos=-1: its last token, at every step); "
                          "@pos=gen picks the new tokens; without @pos= an intervention acts on "
                          "every token.")

    def show_generation(self, g: Generation | None) -> None:
        self.generation = g
        if g is None:
            self.without.clear()
            self.with_.clear()
            self.table.setRowCount(0)
            return
        self.without.setHtml(continuation_html(g, g.without))
        self.with_.setHtml(continuation_html(g, g.with_))
        how = "greedy" if g.greedy else "sampled with the same seed"
        if g.first_divergence is None:
            self.note.setText(f"{len(g.without.ids)} tokens, {how}: the continuations are the same.")
        else:
            k = g.first_divergence
            self.note.setText(f"{len(g.without.ids)} tokens, {how}: they part at step {k} "
                              f"({visible(g.without.tokens[k])!r} without, "
                              f"{visible(g.with_.tokens[k])!r} with).")
        if g.note:
            self.note.setText(f"{self.note.text()} Note: {g.note}.")
        self.table.setRowCount(len(g.without.steps))
        for k, (a, b) in enumerate(zip(g.without.steps, g.with_.steps)):
            cells = [str(k)] + [", ".join(f"{visible(g.strings.get(i, str(i)))} {p:.2f}"
                                          for i, p in s[:3]) for s in (a, b)]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if g.first_divergence == k:
                    item.setBackground(QColor(FIRST))
                self.table.setItem(k, c, item)
