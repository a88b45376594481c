"""A run's numbers made ready to draw, in the runner's thread, so that the GUI
thread only swaps pictures in.

:func:`prepare_display` is called once per result by the runner (when its
front end draws: ``runner.make_display``) and attaches a
:class:`ResultDisplay`: the input as it ran, parsed once (its token strings and
its picture for the output view), the outputs flattened, what they mean
(top classes, next tokens, detections), and per captured record
(:class:`RecordDisplay`) its value spread (the log scale's default and knee),
the histogram of the values after the intervention in the bins of those
before it, and, where the log scale is on by default, both histograms on the
signed-log axis; and, where the run request says what each panel shows
(``shapes``, a :class:`~.shape_views.ShapeViews`), the record's shape view
(:class:`~.shape_views.ShapeDisplay`): the heat map, token map, top-k map or
position norms at full resolution (kept for a zoom) and pooled to the panel's
size in pixels on its colour scale, the top units, the row or unit norms, the
bars, the feature-map grid. The widgets use these where they are given and
match what they show; where they are not (a person's non-default choice made
since, a resized panel, a result made by hand) they make the same numbers
with the same functions, off the GUI thread in the window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ..base.meaning import DETECTIONS, GENERIC, OutputMeaning
from ..base.nested import tensor_leaves
from .binning import histogram_in
from .detections import image_boxes, image_size
from .outputs import describe_outputs, input_image, input_token_strings, inputs_for_display
from .shape_views import ShapeDisplay, ShapeViews, ShapeWanted, prepare_shape
from .wide_views import ValueSpread, largest_finite, log_histogram, wants_log

#: An output of more values than this is drawn as lines, and described in a table.
OUTPUT_BARS = 64

#: ``reference(record) -> (tensor, stats, label)``: what a record is compared with
#: (capture's ``reference_of``: before its own intervention, or the run without any).
Reference = Callable[[Any], tuple[Any, Any, str]]


def flat_array(value: Any) -> np.ndarray:
    """Every tensor leaf of ``value`` flattened into one float64 array."""
    parts = [t.detach().reshape(-1).double().cpu().numpy() for _, t in tensor_leaves(value)]
    return np.concatenate(parts) if parts else np.zeros(0)


def common_bins(stats: Any, pre_stats: Any, tensor: torch.Tensor | None) -> np.ndarray | None:
    """The values after an intervention counted in the bins of those before it, so the
    two histograms compare and the values piled up at a bound show as a spike there;
    ``None`` where the core binned them so already (a clamp's output) or cannot be."""
    if stats is None or pre_stats is None or tensor is None or stats.count == 0:
        return None
    pre_edges = pre_stats.hist_edges
    if len(pre_edges) <= 1 or np.array_equal(stats.hist_edges, pre_edges) \
            or not (pre_edges[0] <= stats.min and stats.max <= pre_edges[-1]):
        return None
    return histogram_in(tensor, np.asarray(pre_edges, dtype=float))


@dataclass
class RecordDisplay:
    """What a panel draws of one captured record beyond its statistics."""

    #: Decades and typical |value| of the tensors drawn (after, then before).
    spread: ValueSpread
    #: :func:`common_bins` of the record (``None``: draw the core's own bins).
    common_counts: np.ndarray | None = None
    #: ``(edges, [after, before])`` on the signed-log axis at ``spread.typical``, made
    #: where the log scale is on by default (``None`` elsewhere).
    log_bins: tuple[np.ndarray, list[np.ndarray]] | None = None
    #: The shape view its panel shows, ready to draw (``None``: none was asked for).
    shape: ShapeDisplay | None = None


@dataclass
class ResultDisplay:
    """Display-ready numbers of one :class:`~hookscope.core.RunResult`."""

    inputs: Any = None                       # the input as it ran (parsed once)
    tokens: list[str] | None = None          # its token strings, for token axes
    input_picture: np.ndarray | None = None  # H x W x C uint8, for the output's thumbnail
    without: np.ndarray = field(default_factory=lambda: np.zeros(0))   # outputs, flattened
    with_: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: ``describe_outputs`` where the output view shows it (a meaning, or a large output).
    description: dict[str, Any] | None = None
    #: Image 0's detections without and with, and its ``(height, width)`` (detectors).
    boxes: tuple[list, list] | None = None
    image_hw: tuple[int, int] | None = None
    records: dict[tuple[str, int, str], RecordDisplay] = field(default_factory=dict)

    def for_record(self, record: Any) -> RecordDisplay | None:
        """The record's numbers (``None`` for a record this result does not hold)."""
        return self.records.get((record.path, record.call, record.leaf))


def record_display(record: Any, reference: Reference,
                   wanted: ShapeWanted | None = None) -> RecordDisplay | None:
    """A record's :class:`RecordDisplay`; ``None`` when it kept no tensor (statistics only).
    ``wanted``: what its panel shows (``None``: no shape view is made)."""
    pre_t, pre_stats, _ = reference(record)
    drawn = [(t, s) for t, s in ((record.tensor, record.stats), (pre_t, pre_stats)) if t is not None]
    if not drawn:
        return None
    tensors = [t for t, _s in drawn]
    spread = ValueSpread(*tensors, largest=largest_finite(*(s for _t, s in drawn)))
    typical = spread.typical   # read here: the sample's median is the costly part
    log_bins = log_histogram(tensors, typical) if wants_log(spread.decades) else None
    shape = prepare_shape(record, pre_t, wanted, spread) if wanted is not None else None
    return RecordDisplay(spread, common_bins(record.stats, pre_stats, record.tensor), log_bins,
                         shape)


def prepare_display(result: Any, reference: Reference, meaning: OutputMeaning | None = None,
                    input_text: str = "", example: Any = None,
                    shapes: ShapeViews | None = None) -> ResultDisplay:
    """``result``'s :class:`ResultDisplay` (see the module docstring). ``input_text`` and
    ``example`` say what the input was where ``result.inputs`` does not (a remote run);
    ``shapes`` what each panel shows (``None``: no shape views are made)."""
    inputs = result.inputs
    if inputs is None:
        inputs = inputs_for_display(input_text, example, meaning.codec if meaning else None)
    without, with_ = flat_array(result.output_without), flat_array(result.output_with)
    shown = ResultDisplay(inputs=inputs, tokens=input_token_strings(inputs, meaning),
                          input_picture=input_image(inputs), without=without, with_=with_)
    kind = meaning.kind if meaning is not None else GENERIC
    if kind != GENERIC or max(without.size, with_.size) > OUTPUT_BARS:
        shown.description = describe_outputs(result.output_without, result.output_with,
                                             meaning, inputs)
    if kind == DETECTIONS:
        shown.boxes = (image_boxes(result.output_without, meaning, inputs),
                       image_boxes(result.output_with, meaning, inputs))
        shown.image_hw = image_size(inputs)
    for records in result.captures.values():
        for top in records:
            wanted = shapes.wanted(top.path, top.call) if shapes is not None else None
            drawn = _drawn_leaf(wanted, top.leaves)
            for rec in top.leaves:
                made = record_display(rec, reference, wanted if rec is drawn else None)
                if made is not None:
                    shown.records[(rec.path, rec.call, rec.leaf)] = made
    return shown


def _drawn_leaf(wanted: ShapeWanted | None, leaves: tuple) -> Any:
    """The leaf record a panel that shows ``wanted`` draws: the one it names, else the
    first (as a leaf chooser falls back when its leaf is gone); ``None`` without one."""
    if wanted is None:
        return None
    return next((r for r in leaves if r.leaf == wanted.leaf), leaves[0])
