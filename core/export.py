"""Taking results out of Hookscope: captures to files, and the setup as a plain PyTorch script.

* :func:`save_captures` writes every kept capture to ``.npz`` or
  ``.safetensors`` under keys ``"<layer path>#<call>"`` (and
  ``"<layer path>#<call>:before"`` for the value before an intervention).
* :func:`standalone_script` writes the current comparison as a script that
  uses nothing of Hookscope but :func:`~hookscope.core.load_model` to build
  the model: the hooks are written out in plain PyTorch, in the form the two
  exercises teach (one hook factory per layer, every handle removed in
  ``finally``), and it prints the same numbers as a JSON line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .errors import HookscopeError
from .hooks import CaptureRecord
from .plan import Plan

CAPTURE_FORMATS = (".npz", ".safetensors")


def capture_tensors(captures: dict[str, list[CaptureRecord]]) -> dict[str, Any]:
    """Every kept tensor as ``{"path#call": tensor, "path#call:before": tensor}`` (CPU, contiguous)."""
    out: dict[str, Any] = {}
    for path, recs in captures.items():
        for r in recs:
            key = f"{path or '<root>'}#{r.call}"
            if r.tensor is not None:
                out[key] = r.tensor.detach().cpu().contiguous()
            if r.pre_tensor is not None:
                out[f"{key}:before"] = r.pre_tensor.detach().cpu().contiguous()
    return out


def capture_arrays(captures: dict[str, list[CaptureRecord]]) -> dict[str, np.ndarray]:
    """The same as NumPy arrays; bfloat16, which NumPy lacks, becomes float32."""
    import torch

    return {k: (t.float() if t.dtype == torch.bfloat16 else t).numpy()
            for k, t in capture_tensors(captures).items()}


def save_captures(captures: dict[str, list[CaptureRecord]], path: str | Path) -> Path:
    """Write kept captures to ``.npz`` or ``.safetensors``; returns the path written."""
    path = Path(path).expanduser()
    if path.suffix not in CAPTURE_FORMATS:
        raise HookscopeError(f"cannot save captures as {path.suffix or 'a file without suffix'}: "
                             "use a .npz or .safetensors file name")
    tensors = capture_tensors(captures)
    if not tensors:
        raise HookscopeError("no captured tensors to save: capture a layer, and do not use "
                             "statistics-only mode")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npz":
        np.savez_compressed(path, **capture_arrays(captures))
    else:  # safetensors keeps every dtype as it is, bfloat16 included
        from safetensors.torch import save_file

        save_file(tensors, str(path))
    return path


def standalone_script(spec: str, plan: Plan, input_text: str = "", weights: str | None = None,
                      device: str = "cpu") -> str:
    """A runnable Python script that reproduces this comparison with plain PyTorch hooks."""
    interventions = plan.all_interventions()
    unsupported = [p for p, iv in interventions.items() if iv.kind != "clamp"]
    if unsupported:
        raise HookscopeError(f"the script export writes clamps only; layer(s) {unsupported} have "
                             "other interventions")
    return _SCRIPT.format(
        spec=repr(spec), weights=repr(weights), input_text=repr(input_text or ""),
        device=repr(device), capture=repr(list(plan.capture)),
        clamp=repr({p: list(b) for p, b in plan.clamp.items()}),
    )


_SCRIPT = '''"""Exported by Hookscope: a baseline forward, then one with forward hooks.

Only the model comes from Hookscope (load_model); the hooks are plain PyTorch.
Run it with: python this_file.py
"""
import dataclasses
import json
import math

import torch

from hookscope.core import load_model, parse_input

SPEC = {spec}
WEIGHTS = {weights}
INPUT = {input_text}  # "" means the model's example input
DEVICE = {device}
CAPTURE = {capture}  # layers whose outputs are recorded
CLAMP = {clamp}  # layer -> [lo, hi]: the output is replaced by output.clamp(lo, hi)

loaded = load_model(SPEC, weights=WEIGHTS)
model = loaded.module.eval().to(DEVICE)
x = parse_input(INPUT, loaded.example_input, loaded.meaning.codec)
layers = dict(model.named_modules(remove_duplicate=False))


def call(model, x):
    if isinstance(x, dict):
        return model(**x)
    if dataclasses.is_dataclass(x):  # positional and keyword inputs together (CallArgs)
        return model(*x.args, **x.kwargs)
    return model(*x) if isinstance(x, tuple) else model(x)


def map_tensors(fn, value):
    """fn applied to every tensor in a (possibly nested) output; the structure is kept."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [map_tensors(fn, v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [map_tensors(fn, v) for v in value]
    if isinstance(value, dict):
        return type(value)((k, map_tensors(fn, v)) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{{f.name: map_tensors(fn, getattr(value, f.name))
                                              for f in dataclasses.fields(value) if f.init}})
    return value


def leaves(value):
    """Every tensor in a (possibly nested) output, in order."""
    found = []
    map_tensors(lambda t: found.append(t) or t, value)
    return found


def clamp_tensor(t, lo, hi):
    if t.dtype == torch.bool or t.is_complex():
        return t  # nothing to clamp
    if t.is_floating_point():
        return t.clamp(lo, hi)
    # integer outputs stay integer: the bounds are rounded inward
    ilo = None if math.isinf(lo) else math.ceil(lo)
    ihi = None if math.isinf(hi) else math.floor(hi)
    return t if ilo is None and ihi is None else t.clamp(ilo, ihi)


def make_clamp_hook(lo, hi):
    # A factory gives each hook its own lo/hi: no late binding from a loop variable.
    def hook(module, inputs, output):
        return map_tensors(lambda t: clamp_tensor(t, lo, hi), output)
    return hook


def make_capture_hook(name, store):
    def hook(module, inputs, output):
        found = leaves(output)
        if found:
            # clone(): a later in-place op (ReLU(inplace=True), x += y) must not change it
            store.setdefault(name, []).append(found[0].detach().clone())
    return hook


x = map_tensors(lambda t: t.to(DEVICE), x)
with torch.inference_mode():
    output_without = call(model, x)

captures = {{}}
handles = []
try:
    # Clamp hooks first, so a captured clamped layer records the clamped value.
    for name, (lo, hi) in CLAMP.items():
        handles.append(layers[name].register_forward_hook(make_clamp_hook(lo, hi)))
    for name in CAPTURE:
        handles.append(layers[name].register_forward_hook(make_capture_hook(name, captures)))
    with torch.inference_mode():
        output_with = call(model, x)
finally:
    for h in handles:  # every hook removed, whatever happened
        h.remove()

a = torch.cat([t.detach().double().flatten().cpu() for t in leaves(output_without)])
b = torch.cat([t.detach().double().flatten().cpu() for t in leaves(output_with)])
print(json.dumps({{
    "output_without": [round(v, 6) for v in a.tolist()],
    "output_with": [round(v, 6) for v in b.tolist()],
    "outputs_differ": not torch.equal(a, b),
    "max_abs_diff": float((a - b).abs().max()),
    "captures": {{n: [list(t.shape) for t in ts] for n, ts in captures.items()}},
}}))
'''


def session_dict(result: Any, spec: str, plan: Plan, input_text: str = "",
                 weights: str | None = None) -> dict:
    """A comparison and how it was set up, as JSON-ready data."""
    d = {"spec": spec, "weights": weights, "input": input_text,
         "plan": {"capture": list(plan.capture), "clamp": {p: list(b) for p, b in plan.clamp.items()},
                  "keep_tensors": plan.keep_tensors}}
    d.update(result.to_json_dict())
    return d
