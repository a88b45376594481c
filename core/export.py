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

import math
from pathlib import Path
from typing import Any

import numpy as np

from .atomic_write import atomic_write
from .errors import HookscopeError
from .hooks import CaptureRecord
from .intervention_base import Intervention, py_literal
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HookscopeError(f"cannot create the folder {path.parent}: {exc.strerror or exc}") from exc
    if path.suffix == ".npz":
        arrays = capture_arrays(captures)
        return atomic_write(path, lambda tmp: np.savez_compressed(tmp, **arrays))
    from safetensors.torch import save_file  # keeps every dtype as it is, bfloat16 included

    return atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))


def standalone_script(spec: str, plan: Plan, input_text: str = "", weights: str | None = None,
                      device: str = "cpu") -> str:
    """A runnable Python script that reproduces this comparison with plain PyTorch hooks.

    Every intervention is written out in plain torch: its kind's ``leaf_function``
    (from the registry, so a newly registered kind exports too) and a
    ``functools.partial`` of it with the parameters. A patch's source forward
    (and a reference mean's) runs first, once per distinct input, as in Hookscope.
    """
    interventions = plan.all_interventions()
    kinds: dict[str, type[Intervention]] = {}
    for path, iv in interventions.items():
        if not iv.leaf_function:
            raise HookscopeError(f"the script export cannot write the {iv.name} intervention on "
                                 f"layer {path!r}: its kind gives no plain-torch form (leaf_function)")
        kinds.setdefault(iv.name, type(iv))
    sources: list[Any] = []
    source_keys: list[Any] = []
    source_of: dict[str, int] = {}
    for path, iv in interventions.items():
        src = iv.pre_pass_input()
        if src is None:
            continue
        key = iv.source_key()
        if key not in source_keys:
            source_keys.append(key)
            sources.append(src)
        source_of[path] = source_keys.index(key)
    functions = "\n".join(cls.leaf_function.strip("\n") + "\n" for cls in kinds.values())
    intervene = "".join(f"    {path!r}: {iv.to_torch_source()},  # {iv.describe()}\n"
                        for path, iv in interventions.items())
    every_leaf = {p for p, iv in interventions.items() if iv.leaf_kinds == "all"}
    return _SCRIPT.format(
        spec=repr(spec), weights=repr(weights), input_text=repr(input_text or ""),
        device=repr(device), capture=repr(list(plan.capture)),
        functions=functions or "# (no interventions)\n",
        intervene=intervene, every_leaf=repr(every_leaf) if every_leaf else "set()",
        sources="[" + ", ".join(py_literal(s) for s in sources) + "]", source_of=repr(source_of),
    )


_SCRIPT = '''"""Exported by Hookscope: a baseline forward, then one with forward hooks.

Only the model and the input come from Hookscope (load_model, parse_input); the
hooks and every intervention are plain PyTorch. Run it with: python this_file.py
"""
import dataclasses
import functools
import json
import math

import torch

from hookscope.core import load_model, parse_input

SPEC = {spec}
WEIGHTS = {weights}
INPUT = {input_text}  # "" means the model's example input
DEVICE = {device}
CAPTURE = {capture}  # layers whose outputs are recorded
SOURCE_INPUTS = {sources}  # inputs whose activations patch (or mean-ablate) a layer
SOURCE_OF = {source_of}  # layer -> index into SOURCE_INPUTS

loaded = load_model(SPEC, weights=WEIGHTS)
model = loaded.module.eval().to(DEVICE)
x = parse_input(INPUT, loaded.example_input)
layers = dict(model.named_modules(remove_duplicate=False))


def call(model, x):
    if isinstance(x, dict):
        return model(**x)
    return model(*x) if isinstance(x, tuple) else model(x)


def map_tensors(fn, value, key=""):
    """fn(tensor, key) applied to every tensor in a (possibly nested) output; the structure is kept."""
    if isinstance(value, torch.Tensor):
        return fn(value, key)
    if isinstance(value, tuple):
        items = [map_tensors(fn, v, f"{{key}}[{{i}}]") for i, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [map_tensors(fn, v, f"{{key}}[{{i}}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return type(value)((k, map_tensors(fn, v, f"{{key}}[{{k!r}}]")) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{{f.name: map_tensors(fn, getattr(value, f.name),
                                                                 f"{{key}}.{{f.name}}")
                                              for f in dataclasses.fields(value) if f.init}})
    return value


def leaves(value):
    """Every tensor in a (possibly nested) output, in order, with its key."""
    found = []
    map_tensors(lambda t, k: found.append((k, t)) or t, value)
    return found


# -- the interventions: each changes one tensor of a layer's output ---------------
{functions}

INTERVENE = {{  # layer -> the change to each tensor of its output
{intervene}}}
EVERY_LEAF = {every_leaf}  # layers whose bool/complex tensors change too (others keep them)


def make_intervention_hook(change, every_leaf, sources=None):
    # A factory gives each hook its own change: no late binding from a loop variable.
    calls = [0]

    def hook(module, inputs, output):
        n = calls[0]
        calls[0] += 1
        src = dict(leaves(sources[n])) if sources is not None and n < len(sources) else {{}}

        def one(t, key):
            if not every_leaf and (t.dtype == torch.bool or t.is_complex()):
                return t
            return change(t, module, src.get(key))
        return map_tensors(one, output)
    return hook


def make_capture_hook(name, store):
    def hook(module, inputs, output):
        found = leaves(output)
        if found:
            # clone(): a later in-place op (ReLU(inplace=True), x += y) must not change it
            store.setdefault(name, []).append(found[0][1].detach().clone())
    return hook


def make_recorder(store):
    def hook(module, inputs, output):
        store.append(map_tensors(lambda t, k: t.detach().clone(), output))
    return hook


def to_device(value):
    return map_tensors(lambda t, k: t.to(DEVICE), value)


with torch.inference_mode():
    output_without = call(model, to_device(x))

# The source forwards: one per source input, recording the layers that need it.
source_outputs = {{}}
for i, source in enumerate(SOURCE_INPUTS):
    sx = parse_input(source, x) if isinstance(source, str) else source
    names = [name for name, j in SOURCE_OF.items() if j == i]
    handles = []
    try:
        for name in names:
            source_outputs[name] = []
            handles.append(layers[name].register_forward_hook(make_recorder(source_outputs[name])))
        with torch.inference_mode():
            call(model, to_device(sx))
    finally:
        for h in handles:
            h.remove()

captures = {{}}
handles = []
try:
    # Intervention hooks first, so a captured layer records the changed value.
    for name, change in INTERVENE.items():
        hook = make_intervention_hook(change, name in EVERY_LEAF, source_outputs.get(name))
        handles.append(layers[name].register_forward_hook(hook))
    for name in CAPTURE:
        handles.append(layers[name].register_forward_hook(make_capture_hook(name, captures)))
    with torch.inference_mode():
        output_with = call(model, to_device(x))
finally:
    for h in handles:  # every hook removed, whatever happened
        h.remove()

a = torch.cat([t.detach().double().flatten().cpu() for _, t in leaves(output_without)])
b = torch.cat([t.detach().double().flatten().cpu() for _, t in leaves(output_with)])
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
         "plan": {**plan.to_dict(), "clamp": {p: list(b) for p, b in plan.clamp.items()}}}
    d.update(result.to_json_dict())
    return d
