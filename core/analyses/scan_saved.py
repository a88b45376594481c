"""A scan result as plain JSON data and back, so a session can keep it without re-running.

:func:`scan_to_data` writes everything a :class:`~.scan_result.ScanResult` shows: per
layer its statistics, histogram, per-unit means and top inputs (values, input numbers,
positions), per input its row of the effect table, and the input set's names for the
inputs the table and the top lists name (texts too, for a text set's top inputs). Only
numbers, strings and lists: no pickle. :func:`scan_from_data` checks every field's type
and shape before building the result and raises :class:`ScanDataError` on the first one
that is wrong. The inputs themselves are not kept: a restored result's
:class:`SavedInputs` names them, and opening one asks for the input set again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base.errors import HookscopeError, InputError
from ..base.meaning import OutputMeaning
from ..base.user_text import is_digits
from ..dataset.input_sets import InputSet
from .scan_parts import EffectRow
from .scan_result import LayerSummary, ScanResult

FORMAT = "hookscope-scan"
VERSION = 1
#: the most texts of top inputs kept (a text set's snippets), and the longest one
MAX_TEXTS = 10_000
MAX_TEXT_CHARS = 4_000


class ScanDataError(HookscopeError):
    """Saved scan data that is damaged or not a scan's."""


class SavedInputs(InputSet):
    """An input set known only by the names a saved scan kept: it describes its inputs
    and a text set's top inputs, but holds no input to run."""

    def __init__(self, source: str, kind: str, count: int, names: dict[int, str],
                 texts: dict[int, str], class_names: list[str] | None) -> None:
        super().__init__(source)
        self.kind = kind
        self.count = count
        self.names = names
        self.texts = texts
        self.class_names = class_names

    def __len__(self) -> int:
        return self.count

    def item(self, i: int, example: Any = None, codec: Any = None) -> Any:
        raise InputError(f"the scan of {self.name} was reopened from a saved session and holds "
                         "no inputs: open the input set again (File → Open inputs…) to run one")

    def describe(self, i: int) -> str:
        return self.names.get(i, f"#{i}")

    def text(self, i: int) -> str | None:
        return self.texts.get(i)


# -- writing ----------------------------------------------------------------------
def _num(v: Any) -> Any:
    """A float JSON can hold: non-finite ones as the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _opt(v: Any) -> Any:
    return None if v is None else _num(v)


def scan_to_data(result: ScanResult) -> dict:
    """``result`` as a JSON-ready dict (see the module docstring)."""
    inputs = result.inputs
    layers = {}
    named: set[int] = {r.index for r in result.rows}
    for path, s in result.layers.items():
        named.update(int(i) for i in np.asarray(s.top_index).ravel())
        layers[path] = {
            "count": int(s.count), "min": _num(s.min), "max": _num(s.max), "mean": _num(s.mean),
            "std": _num(s.std), "nonfinite": int(s.nonfinite),
            "hist_edges": [_num(e) for e in s.hist_edges],
            "hist_counts": [int(c) for c in s.hist_counts],
            "unit_mean": [_num(v) for v in s.unit_mean],
            "top_values": [[_num(v) for v in row] for row in np.asarray(s.top_values)],
            "top_index": np.asarray(s.top_index, dtype=np.int64).tolist(),
            "top_pos": np.asarray(s.top_pos, dtype=np.int64).tolist(),
            "item_shape": [int(d) for d in s.item_shape], "unit_dim": s.unit_dim}
    texts = {}
    if inputs.kind == "text":
        tops = sorted({int(i) for s in result.layers.values()
                       for i in np.asarray(s.top_index).ravel()})[:MAX_TEXTS]
        for i in tops:
            t = inputs.text(i)
            if t is not None:
                texts[str(i)] = t[:MAX_TEXT_CHARS]
    return {
        "format": FORMAT, "version": VERSION,
        "inputs": {"source": inputs.source, "kind": inputs.kind, "count": len(inputs),
                   "class_names": inputs.class_names,
                   "names": {str(i): inputs.describe(i) for i in sorted(named)},
                   "texts": texts},
        "labels": result.meaning.labels,
        "metric": result.metric, "intervened": result.intervened,
        "seconds": _num(result.seconds), "forwards": result.forwards,
        "batch_size": result.batch_size, "notes": list(result.notes),
        "rows": [[r.index, r.label, r.label_index, r.pred_without, r.pred_with,
                  _opt(r.metric_without), _opt(r.metric_with)] for r in result.rows],
        "layers": layers}


# -- reading ----------------------------------------------------------------------
def _get(d: Any, key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ScanDataError(f"{where}.{key} is missing")
    v = d[key]
    if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
        raise ScanDataError(f"{where}.{key} has the wrong type ({type(v).__name__})")
    return v


def _float(v: Any, where: str) -> float:
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ScanDataError(f"{where} is not a number")
    try:
        return float(v)
    except OverflowError as exc:  # an int of 400 digits
        raise ScanDataError(f"{where} is too large a number") from exc


def _int(v: Any, where: str, none: bool = False) -> Any:
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or abs(v) > 2 ** 62:
        raise ScanDataError(f"{where} is not a whole number")
    return v


def _str(v: Any, where: str, none: bool = False) -> Any:
    if (v is None and none) or isinstance(v, str):
        return v
    raise ScanDataError(f"{where} is not text")


def _array(v: Any, dims: int, kind: str, where: str) -> np.ndarray:
    """A ``dims``-dimensional array of floats (``kind`` ``"f"``) or whole numbers (``"i"``)."""
    if not isinstance(v, list) or (dims == 2 and not all(isinstance(r, list) for r in v)):
        raise ScanDataError(f"{where} is not a {'table' if dims == 2 else 'list'} of numbers")
    flat = [x for r in v for x in r] if dims == 2 else v
    nums = [(_float(x, where) if kind == "f" else _int(x, where)) for x in flat]
    shape: tuple[int, ...]
    if dims == 2:
        widths = {len(r) for r in v}
        if len(widths) > 1:
            raise ScanDataError(f"{where}: its rows differ in length")
        shape = (len(v), widths.pop() if widths else 0)
    else:
        shape = (len(v),)
    return np.asarray(nums, dtype=np.float64 if kind == "f" else np.int64).reshape(shape)


def _layer(path: str, d: Any, count: int) -> LayerSummary:
    w = f"layers[{path!r}]"
    f = {k: _float(_get(d, k, (int, float, str), w), f"{w}.{k}")
         for k in ("min", "max", "mean", "std")}
    top_values = _array(_get(d, "top_values", list, w), 2, "f", f"{w}.top_values")
    top_index = _array(_get(d, "top_index", list, w), 2, "i", f"{w}.top_index")
    top_pos = _array(_get(d, "top_pos", list, w), 2, "i", f"{w}.top_pos")
    unit_mean = _array(_get(d, "unit_mean", list, w), 1, "f", f"{w}.unit_mean")
    if not top_values.shape == top_index.shape == top_pos.shape:
        raise ScanDataError(f"{w}: its top values, inputs and positions differ in shape")
    if top_values.size and top_values.shape[0] != len(unit_mean):
        raise ScanDataError(f"{w}: {top_values.shape[0]} units of top inputs but "
                            f"{len(unit_mean)} unit means")
    if top_index.size and (top_index.min() < 0 or top_index.max() >= count):
        raise ScanDataError(f"{w}.top_index names an input outside the set of {count}")
    shape = _get(d, "item_shape", list, w)
    unit_dim = d.get("unit_dim")
    return LayerSummary(
        path, _int(_get(d, "count", int, w), f"{w}.count"), f["min"], f["max"], f["mean"],
        f["std"], _int(_get(d, "nonfinite", int, w), f"{w}.nonfinite"),
        _array(_get(d, "hist_edges", list, w), 1, "f", f"{w}.hist_edges"),
        _array(_get(d, "hist_counts", list, w), 1, "i", f"{w}.hist_counts"),
        unit_mean, top_values, top_index, top_pos,
        tuple(_int(x, f"{w}.item_shape") for x in shape), _int(unit_dim, f"{w}.unit_dim", True))


def _row(r: Any, i: int) -> EffectRow:
    w = f"rows[{i}]"
    if not isinstance(r, list) or len(r) != 7:
        raise ScanDataError(f"{w} is not a row of 7 fields")
    return EffectRow(_int(r[0], w), _str(r[1], w, True), _int(r[2], w, True), _int(r[3], w, True),
                     _int(r[4], w, True), None if r[5] is None else _float(r[5], w),
                     None if r[6] is None else _float(r[6], w))


def _names(d: Any, where: str) -> dict[int, str]:
    if not isinstance(d, dict):
        raise ScanDataError(f"{where} is not an object")
    out = {}
    for k, v in d.items():
        if not is_digits(k) or len(k) > 18:
            raise ScanDataError(f"{where}: {k[:20]!r} is not an input number")
        out[int(k)] = _str(v, f"{where}[{k}]")
    return out


def scan_from_data(d: Any) -> ScanResult:
    """The :class:`~.scan_result.ScanResult` that :func:`scan_to_data` wrote (raises
    :class:`ScanDataError` naming the first field that is wrong)."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ScanDataError(f"this is not a saved scan (no \"format\": \"{FORMAT}\")")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ScanDataError(f"saved scan format version {str(version)[:20]} is not one this "
                            f"Hookscope reads (up to {VERSION})")
    inp = _get(d, "inputs", dict, "scan")
    count = _int(_get(inp, "count", int, "inputs"), "inputs.count")
    if count < 0:
        raise ScanDataError("inputs.count is negative")
    classes = inp.get("class_names")
    if classes is not None and not (isinstance(classes, list)
                                    and all(isinstance(c, str) for c in classes)):
        raise ScanDataError("inputs.class_names is not a list of names")
    labels = d.get("labels")
    if labels is not None and not (isinstance(labels, list)
                                   and all(isinstance(c, str) for c in labels)):
        raise ScanDataError("labels is not a list of names")
    inputs = SavedInputs(_str(_get(inp, "source", str, "inputs"), "inputs.source"),
                         _str(_get(inp, "kind", str, "inputs"), "inputs.kind"), count,
                         _names(_get(inp, "names", dict, "inputs"), "inputs.names"),
                         _names(_get(inp, "texts", dict, "inputs"), "inputs.texts"), classes)
    layers_d = _get(d, "layers", dict, "scan")
    layers = {str(p): _layer(str(p), v, count) for p, v in layers_d.items()}
    rows = [_row(r, i) for i, r in enumerate(_get(d, "rows", list, "scan"))]
    notes = _get(d, "notes", list, "scan")
    return ScanResult(inputs, OutputMeaning(labels=labels), _get(d, "metric", str, "scan"),
                      layers, rows, _get(d, "intervened", bool, "scan"),
                      _float(_get(d, "seconds", (int, float, str), "scan"), "scan.seconds"),
                      _int(_get(d, "forwards", int, "scan"), "scan.forwards"),
                      _int(_get(d, "batch_size", int, "scan"), "scan.batch_size"),
                      [_str(n, "scan.notes") for n in notes])
