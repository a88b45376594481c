"""The text of the exported plain-PyTorch script, less its model, payload and interventions.

:func:`hookscope.core.export.export.standalone_script` fills the ``$`` fields of
:data:`SCRIPT` (a :class:`string.Template`, so the code's own braces need no
escaping). Everything here is torch and the standard library only: the script
must run where Hookscope is not installed. :data:`STATS` repeats, in plain
torch, the definitions of :mod:`hookscope.core.engine.stats` and
:mod:`hookscope.core.engine.record_stats` that the window and the CLI show: min, max,
mean and population std over the finite values, NaN/Inf counts (complex
tensors by magnitude), and the fraction of values an intervention changed
(``before != after``, NaN equal to NaN).
"""

from __future__ import annotations

from string import Template

from ..base.user_text import escape_controls, shorten


def comment_text(text: str, limit: int = 120) -> str:
    """User text (a description, a file name, a spec) fit to follow a ``#`` in the script: every
    line break and control character escaped, so the comment ends where the line does, and
    shortened. Values the script uses are written with ``repr()``, never this way."""
    return shorten(escape_controls(str(text)), limit)

HELPERS = '''
def call(model, x):
    """Call the model the way its input asks: a tuple spreads, a dict is keywords."""
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return model(*x)
    if isinstance(x, dict) and set(x) == {"__args__", "__kwargs__"}:  # positional + keywords
        return model(*x["__args__"], **x["__kwargs__"])
    return model(**x) if isinstance(x, dict) else model(x)


def map_tensors(fn, value, key=""):
    """fn(tensor, key) applied to every tensor in a (possibly nested) output; the structure is kept."""
    if isinstance(value, torch.Tensor):
        return fn(value, key)
    if isinstance(value, tuple):
        items = [map_tensors(fn, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [map_tensors(fn, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return type(value)((k, map_tensors(fn, v, f"{key}[{k!r}]")) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: map_tensors(fn, getattr(value, f.name),
                                                                f"{key}.{f.name}")
                                             for f in dataclasses.fields(value) if f.init})
    return value


def leaves(value):
    """Every tensor in a (possibly nested) output, in order, with its key."""
    found = []
    map_tensors(lambda t, k: found.append((k, t)) or t, value)
    return found


def outputs_compared(a, b):
    """Whether two outputs differ anywhere, and the largest |a - b| (NaN beside NaN and the
    same infinity count as equal; a change of shape or structure is an infinite difference)."""
    la, lb = leaves(a), leaves(b)
    if [k for k, _ in la] != [k for k, _ in lb]:
        return True, float("inf")
    differ, worst = False, 0.0
    for (_, ta), (_, tb) in zip(la, lb):
        if ta.shape != tb.shape:
            return True, float("inf")
        da, db = ta.detach().double().cpu(), tb.detach().double().cpu()
        same = (da == db) | (torch.isnan(da) & torch.isnan(db))
        d = (da - db).abs().masked_fill(same, 0.0)
        if bool((d != 0).any()):
            differ = True
            worst = max(worst, float(d.nan_to_num(nan=float("inf"), posinf=float("inf")).max()))
    return differ, worst


def to_device(value):
    return map_tensors(lambda t, k: t.to(DEVICE), value)
'''

STATS = '''
def summary(t):
    """What the window shows for a tensor: shape, min/max/mean/std of the finite values
    (std with correction=0), NaN and Inf counts; complex tensors by magnitude."""
    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = flat.abs()
    flat = flat.to("cpu", torch.float64)
    finite = flat[torch.isfinite(flat)]
    nan = float("nan")
    if finite.numel():
        mn, mx = float(finite.min()), float(finite.max())
        mean, std = float(finite.mean()), float(finite.std(correction=0))
    else:
        mn = mx = mean = std = nan
    return {"shape": list(t.shape), "min": mn, "max": mx, "mean": mean, "std": std,
            "nan_count": int(torch.isnan(flat).sum()), "inf_count": int(torch.isinf(flat).sum())}


def fraction_changed(before, after):
    """The fraction of values an intervention changed (NaN beside NaN is unchanged)."""
    if before is None or before.shape != after.shape:
        return None
    diff = torch.ne(before, after.to(before.device))
    if before.is_floating_point() or before.is_complex():
        diff &= ~(torch.isnan(before) & torch.isnan(after.to(before.device)))
    return float(diff.sum()) / after.numel() if after.numel() else 0.0


def record_stats(name, call_index, rec, base):
    """One captured call: the intervened run's summary, what changed, the baseline's summary."""
    d = summary(rec["after"])
    if name in INTERVENE:
        d["intervention"] = DESCRIBE[name]
        d["fraction_changed"] = fraction_changed(rec["before"], rec["after"])
    if base is not None and call_index < len(base):
        b = summary(base[call_index]["after"])
        d["baseline"] = {k: v for k, v in b.items() if k != "shape"}
    return d


def print_table(stats, a, b, differ, max_abs_diff):
    """The outputs, then one row per captured call of the intervened run and, when the
    plan changes anything, one below it for the same call in the baseline run
    (the table `hookscope run` prints). On stderr: stdout carries only the JSON line,
    so `python this_file.py > numbers.json` keeps the numbers and still shows the table."""
    say = functools.partial(print, file=sys.stderr)
    fmt = lambda vs: "[" + ", ".join(f"{v:.4f}" for v in vs[:12]) + (", ..." if len(vs) > 12 else "") + "]"
    say(f"device          {DEVICE}")
    say(f"output without  {fmt(a)}")
    say(f"output with     {fmt(b)}")
    say(f"outputs differ  {'yes' if differ else 'no'}   max |diff| {max_abs_diff:.6g}")
    if not stats:
        return
    say("\\n{:<32} {:>4} {:<8} {:<18} {:>10} {:>10} {:>10} {:>10}  {}".format(
        "layer", "call", "run", "shape", "min", "max", "mean", "std", "note"))
    row = "{:<32} {:>4} {:<8} {:<18} {:>10.4g} {:>10.4g} {:>10.4g} {:>10.4g}  {}"
    for name, recs in stats.items():
        for i, d in enumerate(recs):
            note = d.get("intervention", "")
            if note and d.get("fraction_changed") is not None:
                note += f", {100 * d['fraction_changed']:.1f}% changed"
            if d["nan_count"] or d["inf_count"]:  # min..std cover the finite values only
                note += f"{', ' if note else ''}{d['nan_count']} NaN, {d['inf_count']} Inf"
            shape = "x".join(map(str, d["shape"])) or "scalar"
            say(row.format(name, i, "with" if INTERVENE else "", shape, d["min"], d["max"],
                             d["mean"], d["std"], note))
            base = d.get("baseline")
            if INTERVENE and base is not None:
                note = f"{base['nan_count']} NaN, {base['inf_count']} Inf" if (
                    base["nan_count"] or base["inf_count"]) else ""
                say(row.format("", "", "without", "", base["min"], base["max"], base["mean"],
                                 base["std"], note))
'''

SCRIPT = Template('''"""Exported by Hookscope: a baseline forward, then one with forward hooks.

Plain PyTorch only: the model, the input, every intervention and the statistics
are written out below, so it runs where Hookscope is not installed.
Run it with: python this_file.py
It prints each captured layer's statistics (the intervened run and the baseline,
as Hookscope's window and `hookscope run` show them) on stderr, and the numbers
as one JSON line on stdout.
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import io
import json
import math
import sys
from collections import OrderedDict

import torch
from torch import nn

SPEC = $spec  # the model spec this script was exported from
DEVICE = $device
CAPTURE = $capture  # layers whose outputs are recorded
SOURCE_OF = $source_of  # layer -> index into PAYLOAD["sources"] (inputs a patch or mean-ablation reads)

# The input$payload_what, saved with torch.save and
# read back with weights_only=True (tensors and plain containers, never code).
PAYLOAD = $payload_load
x = PAYLOAD["input"]
SOURCE_INPUTS = PAYLOAD["sources"]

# -- the model -----------------------------------------------------------------------
$model
model = model.eval().to(DEVICE)
layers = dict(model.named_modules(remove_duplicate=False))

# -- helpers: nested outputs and the statistics the window shows ----------------------
$helpers
$stats

# -- the interventions: each changes one tensor of a layer's output ---------------
$functions

INTERVENE = {  # layer -> the change to each tensor of its output
$intervene}
DESCRIBE = $describe  # layer -> the intervention in Hookscope's words
EVERY_LEAF = $every_leaf  # layers whose bool/complex tensors change too (others keep them)
FIRST_LEAF = $first_leaf  # layers whose first floating-point tensor alone changes (an SAE edit)
# layer -> (its output projection, heads): picked heads are changed at the projection's input
HEAD_SITES = $head_sites
# resid_mid.N -> (attention, block): the residual stream between them, which no module outputs
MID_SITES = $mid_sites


def make_layer_hook(name, store, change=None, every_leaf=False, sources=None, first_leaf=False):
    """One hook per layer, made by a factory (no late binding from a loop variable):
    it applies the layer's change, if any, and records the first tensor before and after."""
    calls = [0]

    def hook(module, inputs, output):
        n = calls[0]
        calls[0] += 1
        new = output
        if change is not None:
            src = dict(leaves(sources[n])) if sources is not None and n < len(sources) else {}
            done = [False]

            def one(t, key):
                if first_leaf:  # the first floating-point tensor alone
                    if done[0] or not t.is_floating_point():
                        return t
                    done[0] = True
                elif not every_leaf and (t.dtype == torch.bool or t.is_complex()):
                    return t
                return change(t, module, src.get(key))
            new = map_tensors(one, output)
        if store is not None:
            before, after = leaves(output), leaves(new)
            if after:
                # clone(): a later in-place op (ReLU(inplace=True), x += y) must not change it
                pre = dict(before).get(after[0][0])
                store.setdefault(name, []).append({
                    "after": after[0][1].detach().clone(),
                    "before": None if pre is None else pre.detach().clone()})
        return new if change is not None else None
    return hook


def make_recorder(store):
    def hook(module, inputs, output):
        store.append(map_tensors(lambda t, k: t.detach().clone(), output))
    return hook


def make_head_hook(change, layer, sources=None):
    """A forward pre-hook on an attention's output projection: its input is the heads side
    by side, and the change picks some of them (see HEAD_SITES)."""
    calls = [0]

    def hook(module, args):
        n = calls[0]
        calls[0] += 1
        src = sources[n] if sources is not None and n < len(sources) else None
        return (change(args[0], layer, src), *args[1:])
    return hook


def make_input_recorder(store):
    def hook(module, args):
        store.append(args[0].detach().clone())
    return hook


def attach(name, hook):
    """``hook`` on layer ``name``'s output, as a list of handles; for ``NAME:input``, the same
    hook as a forward pre-hook on the module's first positional input (what it returns
    replaces that input); for a resid_mid, see attach_mid."""
    if name in MID_SITES:
        return attach_mid(name, hook)
    if not name.endswith(":input"):
        return [layers[name].register_forward_hook(hook)]

    def pre(module, args):
        if not args:
            return None
        new = hook(module, args, args[0])
        return None if new is None else (new, *args[1:])
    return [layers[name[:-len(":input")]].register_forward_pre_hook(pre)]


def attach_mid(name, hook):
    """``hook`` on resid_mid = the block's input + the attention's output (its first tensor):
    a pre-hook on the block keeps its input, a hook on the attention calls ``hook`` with
    resid_mid and adds what it returns, minus resid_mid, to the attention's output, so the
    block's residual and its MLP both see the new value."""
    attention, block = MID_SITES[name]
    kept = {}

    def keep(module, args):
        kept["pre"] = args[0]

    def mid(module, inputs, output):
        first = output[0] if isinstance(output, (tuple, list)) else output
        value = kept["pre"] + first
        new = hook(module, inputs, value)
        if new is None or new is value:
            return None
        changed = first + (new - value)
        if isinstance(output, tuple):
            return (changed, *output[1:])
        if isinstance(output, list):
            return [changed, *output[1:]]
        return changed
    return [layers[block].register_forward_pre_hook(keep),
            layers[attention].register_forward_hook(mid)]


def forward(hooks, pre_hooks=(), inputs=None):
    """One forward of ``inputs`` (default: the input) with hooks {layer: hook} (and forward
    pre-hooks) attached; every handle removed, whatever happens."""
    handles = []
    try:
        for name, hook in hooks:
            handles.extend(attach(name, hook))
        for name, hook in pre_hooks:
            handles.append(layers[name].register_forward_pre_hook(hook))
        with torch.inference_mode():
            return call(model, to_device(x if inputs is None else inputs))
    finally:
        for h in handles:
            h.remove()


# The baseline: the same layers captured, nothing changed.
baseline = {}
output_without = forward([(name, make_layer_hook(name, baseline)) for name in CAPTURE])

# The source forwards: one per source input, recording the layers that need it.
source_outputs = {}
for i, source in enumerate(SOURCE_INPUTS):
    names = [name for name, j in SOURCE_OF.items() if j == i]
    hooks, pre_hooks = [], []
    for name in names:
        source_outputs[name] = []
        if name in HEAD_SITES:  # heads: the projection's input on the source
            pre_hooks.append((HEAD_SITES[name][0], make_input_recorder(source_outputs[name])))
        else:
            hooks.append((name, make_recorder(source_outputs[name])))
    forward(hooks, pre_hooks, source)

# The intervened run: intervention hooks first, so a captured layer records the changed value.
captures = {}
hooks = [(name, make_layer_hook(name, captures if name in CAPTURE else None,
                                None if name in HEAD_SITES else change,
                                name in EVERY_LEAF, source_outputs.get(name), name in FIRST_LEAF))
         for name, change in INTERVENE.items()]
hooks += [(name, make_layer_hook(name, captures)) for name in CAPTURE if name not in INTERVENE]
pre_hooks = [(proj, make_head_hook(INTERVENE[name], layers[name], source_outputs.get(name)))
             for name, (proj, _) in HEAD_SITES.items()]
output_with = forward(hooks, pre_hooks)

stats = {name: [record_stats(name, i, rec, baseline.get(name)) for i, rec in enumerate(captures[name])]
         for name in CAPTURE if name in captures}
a = torch.cat([t.detach().double().flatten().cpu() for _, t in leaves(output_without)] or [torch.zeros(0)])
b = torch.cat([t.detach().double().flatten().cpu() for _, t in leaves(output_with)] or [torch.zeros(0)])
differ, max_abs_diff = outputs_compared(output_without, output_with)
print_table(stats, a.tolist(), b.tolist(), differ, max_abs_diff)
print(json.dumps({
    "output_without": [round(v, 6) for v in a.tolist()],
    "output_with": [round(v, 6) for v in b.tolist()],
    "outputs_differ": differ,
    "max_abs_diff": max_abs_diff,
    "captures": {n: [list(r["after"].shape) for r in rs] for n, rs in captures.items()},
    "stats": stats,
}))
''')
