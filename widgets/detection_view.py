"""A detector's boxes drawn on its input image, without and with the interventions.

:class:`DetectionView` overlays two box sets on the picture the model saw:
without the plan in solid blue, with it in dashed orange (a box that did not
move shows as orange dashes on blue), each labelled with its class name and
score; a legend says which is which and how many boxes pass the score
threshold, which the spin box beside it sets (a display filter: the model's
output is not rerun). Hovering over a box says its label, score and corners.
The boxes are the core's (:func:`hookscope.core.views.detections.image_boxes`);
nothing is computed here but where to draw them.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (QDoubleSpinBox, QHBoxLayout, QLabel, QSizePolicy, QToolTip,
                               QVBoxLayout, QWidget)

WITHOUT_COLOUR = QColor(31, 119, 180)   # the output plot's blue: without
WITH_COLOUR = QColor(255, 127, 14)      # and its orange: with the interventions
DEFAULT_THRESHOLD = 0.5


def _box_text(b: dict[str, Any]) -> str:
    return f"{b['label']} {b['score']:.2f}"


class DetectionCanvas(QWidget):
    """The picture scaled to fit (aspect kept) and the boxes over it."""

    hovered = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detectionCanvas")
        self.setMouseTracking(True)
        self.setMinimumSize(160, 120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._image: QImage | None = None
        self._size = (1, 1)  # (width, height) of the input image, the boxes' coordinates
        self.without: list[dict[str, Any]] = []
        self.with_: list[dict[str, Any]] = []
        self.threshold = DEFAULT_THRESHOLD
        self.hover_text = ""

    def set_content(self, image: Any, without: list[dict[str, Any]],
                    with_: list[dict[str, Any]], size: tuple[int, int] | None = None) -> None:
        """``image``: ``H x W x C`` uint8 (or None); boxes in the input's pixels; ``size``:
        the input's ``(width, height)`` when there is no image."""
        if image is not None:
            h, w, c = image.shape
            fmt = QImage.Format.Format_Grayscale8 if c == 1 else QImage.Format.Format_RGB888
            self._image = QImage(image.tobytes(), w, h, w * c, fmt).copy()  # owns its pixels
            self._size = (w, h)
        else:
            self._image = None
            self._size = size or self._size
        self.without, self.with_ = list(without), list(with_)
        self.update()

    def shown(self, which: str) -> list[dict[str, Any]]:
        """The boxes drawn for ``"without"`` or ``"with"`` (score at or above the threshold)."""
        boxes = self.without if which == "without" else self.with_
        return [b for b in boxes if b["score"] >= self.threshold]

    def image_rect(self) -> QRectF:
        """Where the picture is drawn, in this widget's coordinates."""
        w, h = self._size
        scale = min(self.width() / w, self.height() / h)
        return QRectF((self.width() - w * scale) / 2, (self.height() - h * scale) / 2,
                      w * scale, h * scale)

    def to_widget(self, x: float, y: float) -> QPointF:
        """An input pixel coordinate -> this widget's coordinates."""
        r = self.image_rect()
        return QPointF(r.x() + x * r.width() / self._size[0], r.y() + y * r.height() / self._size[1])

    def box_rect(self, box: list[float]) -> QRectF:
        a, b = self.to_widget(box[0], box[1]), self.to_widget(box[2], box[3])
        return QRectF(a, b)

    def boxes_at(self, pos: QPointF) -> list[tuple[str, dict[str, Any]]]:
        """The shown boxes under ``pos`` (widget coordinates), smallest first."""
        hits = [(which, b) for which in ("without", "with") for b in self.shown(which)
                if self.box_rect(b["box"]).adjusted(-3, -3, 3, 3).contains(pos)]
        return sorted(hits, key=lambda wb: (wb[1]["box"][2] - wb[1]["box"][0])
                      * (wb[1]["box"][3] - wb[1]["box"][1]))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(40, 40, 40))
        target = self.image_rect()
        if self._image is not None:
            # nearest-neighbour when enlarging: a small input stays crisp, pixels stay pixels
            p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform,
                            target.width() < self._image.width())
            p.drawImage(target, self._image)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.9))
        font.setBold(True)
        p.setFont(font)
        fm = p.fontMetrics()
        for which, colour, style, width in (("without", WITHOUT_COLOUR, Qt.PenStyle.SolidLine, 3),
                                            ("with", WITH_COLOUR, Qt.PenStyle.DashLine, 2)):
            for b in self.shown(which):
                r = self.box_rect(b["box"])
                # a dark halo first: the line stays visible on a shape of its own colour
                p.setPen(QPen(QColor(0, 0, 0), width + 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                if which == "without":
                    p.drawRect(r)
                pen = QPen(colour, width, style)
                pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
                p.setPen(pen)
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(r)
                # without: the tag sits above the box; with: below it, so both stay readable
                text = _box_text(b)
                tw, th = fm.horizontalAdvance(text) + 6, fm.height() + 2
                ty = r.top() - th if which == "without" else r.bottom() + 1
                ty = min(max(ty, 0.0), self.height() - th)
                tag = QRectF(min(r.left(), self.width() - tw), ty, tw, th)
                p.fillRect(tag, colour)
                p.setPen(QColor("white") if which == "without" else QColor("black"))
                p.drawText(tag, Qt.AlignmentFlag.AlignCenter, text)
        p.end()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        hits = self.boxes_at(event.position())
        text = "\n".join(f"{which}: {_box_text(b)}  [" + ", ".join(f"{v:.0f}" for v in b["box"])
                         + "]" for which, b in hits)
        if text != self.hover_text:
            self.hover_text = text
            self.hovered.emit(text)
        if text:
            QToolTip.showText(event.globalPosition().toPoint(), text, self)
        else:
            QToolTip.hideText()
        super().mouseMoveEvent(event)


class DetectionView(QWidget):
    """Legend, score threshold and the canvas (object name ``detectionView``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detectionView")
        self.canvas = DetectionCanvas(self)
        self.legend = QLabel(self)
        self.legend.setObjectName("detectionLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.threshold = QDoubleSpinBox(self)
        self.threshold.setObjectName("detectionThreshold")
        self.threshold.setRange(0.0, 1.0)
        self.threshold.setSingleStep(0.05)
        self.threshold.setDecimals(2)
        self.threshold.setValue(DEFAULT_THRESHOLD)
        self.threshold.setToolTip("Boxes scoring below this are not drawn (the model is not rerun)")
        self.threshold.valueChanged.connect(self._set_threshold)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.legend, 1)
        top.addWidget(QLabel("score ≥", self))
        top.addWidget(self.threshold)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.canvas, 1)

    def show_detections(self, image: Any, without: list[dict[str, Any]],
                        with_: list[dict[str, Any]], size: tuple[int, int] | None = None) -> None:
        self.canvas.set_content(image, without, with_, size)
        self._update_legend()

    def _set_threshold(self, value: float) -> None:
        self.canvas.threshold = float(value)
        self.canvas.update()
        self._update_legend()

    def _update_legend(self) -> None:
        def count(which: str) -> str:
            shown = len(self.canvas.shown(which))
            total = len(self.canvas.without if which == "without" else self.canvas.with_)
            text = f"{shown} box{'es' if shown != 1 else ''}"
            return text + (f" (of {total})" if total != shown else "")  # some below the threshold

        hexa, hexb = WITHOUT_COLOUR.name(), WITH_COLOUR.name()
        self.legend.setText(
            f"<span style='color:{hexa}'>▬</span> without: {count('without')}"
            f"&nbsp;&nbsp;&nbsp;<span style='color:{hexb}'>╌╌</span> with the intervention: "
            f"{count('with')}")
