"""Building steering vectors from a model's own activations, and ``--vector`` specs.

``diff:A|B`` is the difference of one layer's output on input ``A`` minus its
output on input ``B``, each reduced to one vector over the last axis: at the
LAST position (``diff:``) or the MEAN over positions (``diffmean:``), then
averaged over the batch. A side that names a ``.txt`` file is a set of
prompts, one a line, each run on its own (``text:LINE``): the vector is then
the mean over A's prompts minus the mean over B's. Inputs are any input spec
(``text:PROMPT`` through the model's tokenizer, literals, files); ``A`` runs
to the first ``|``. The layer's first call is used (a module called twice
gives its first output).

A ``--vector NAME=FILE`` spec reads a ``.pt``/``.safetensors``/``.npy`` file
(:func:`~hookscope.core.plan.steer_vector.load_vector_file`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from ..plan.directions import _Directional, bind_vectors, named_vectors
from ..base.errors import InputError, PlanError
from ..plan.intervention_base import Intervention
from ..base.nested import tensor_leaves
from ..plan.plan import Plan, unknown_layer_message
from ..base.regular_file import read_regular
from ..plan.steer_vector import VECTOR_SUFFIXES, SteeringVector, load_vector_file
from ..base.user_text import shown, typed_text
from ..engine.forward_state import forward, own_copy, to_device
from ..model.inputs import parse_input

DIFF_PREFIXES = {"diff:": "last", "diffmean:": "mean"}
#: A prompt-set file: at most this many bytes and prompts.
MAX_PROMPT_FILE_BYTES = 1 << 20
MAX_PROMPTS = 1000


def parse_vector_option(text: str) -> tuple[str, str]:
    """``'NAME=SPEC'`` (``--vector``) -> ``(name, spec)``. A ``diff:`` spec keeps its
    trailing spaces: they belong to input B's prompt and are tokens."""
    name, sep, spec = text.partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise PlanError(f"--vector {text!r}: write NAME=diff:INPUT_A|INPUT_B or NAME=FILE "
                        "(.pt, .safetensors, .npy)")
    return name.strip(), typed_text(spec)


def layer_output(module: nn.Module, path: str, inputs: Any) -> torch.Tensor:
    """The first floating tensor leaf of layer ``path``'s first output on ``inputs``."""
    mods = dict(module.named_modules())
    if path not in mods:
        raise PlanError(unknown_layer_message(path, list(mods)))
    got: list[Any] = []

    def hook(_m: nn.Module, _a: Any, out: Any) -> None:
        if not got:
            got.append([t.detach().clone() for _, t in tensor_leaves(out)])

    handle = mods[path].register_forward_hook(hook)
    try:
        forward(module, own_copy(inputs), torch.inference_mode)
    finally:
        handle.remove()
    if not got:
        raise PlanError(f"layer {path!r} did not run on the vector's input; pick a layer that runs")
    floats = [t for t in got[0] if t.is_floating_point() and t.dim() >= 1]
    if not floats:
        raise PlanError(f"layer {path!r} has no floating-point output to take a direction from")
    return floats[0]


def reduce_positions(t: torch.Tensor, how: str) -> torch.Tensor:
    """One vector over the last axis: the last position (``"last"``) or the mean over
    positions (``"mean"``) of dim -2, then the mean over every leading axis."""
    x = t.double()
    if x.dim() >= 2:
        x = x[..., -1, :] if how == "last" else x.mean(dim=-2)
    return x.reshape(-1, x.shape[-1]).mean(dim=0)


def _prompts(path: Path) -> list[str]:
    data = read_regular(path, MAX_PROMPT_FILE_BYTES, "prompt file")
    try:
        lines = [ln for ln in data.decode("utf-8").splitlines() if ln.strip()]
    except UnicodeDecodeError as exc:
        raise InputError(f"prompt file {shown(path)} is not UTF-8 text") from exc
    if not lines:
        raise InputError(f"prompt file {shown(path)} holds no prompt; write one prompt a line")
    if len(lines) > MAX_PROMPTS:
        raise InputError(f"prompt file {shown(path)} has {len(lines):,} prompts, above the "
                         f"{MAX_PROMPTS:,} a set may have")
    return [f"text:{ln}" for ln in lines]


def _side_mean(module: nn.Module, path: str, side: str, how: str, example: Any,
               codec: Any, device: torch.device | None) -> torch.Tensor:
    side_path = Path(side.strip()).expanduser()
    prompt = side.lstrip().startswith("text:")  # "text:see notes.txt" is a prompt, not a file
    specs = _prompts(side_path) if side_path.suffix == ".txt" and not prompt else [side]
    vectors = []
    for spec in specs:
        x = parse_input(spec, example, codec)
        if device is not None:
            x = to_device(x, device)
        vectors.append(reduce_positions(layer_output(module, path, x), how).cpu())
    widths = {v.numel() for v in vectors}
    if len(widths) > 1:
        raise InputError(f"the inputs of {shown(side)} give layer {path!r} outputs of different widths "
                         f"{sorted(widths)}")
    return torch.stack(vectors).mean(dim=0)


def diff_vector(module: nn.Module, path: str, spec: str, name: str = "diff", example: Any = None,
                codec: Any = None, device: torch.device | None = None) -> SteeringVector:
    """The vector of a ``diff:A|B`` (or ``diffmean:A|B``) spec at layer ``path``."""
    how, a, b = check_diff_spec(spec)
    va = _side_mean(module, path, a, how, example, codec, device)
    vb = _side_mean(module, path, b, how, example, codec, device)
    if va.shape != vb.shape:
        raise InputError(f"vector {name!r}: layer {path!r} gives width {va.numel()} on A but "
                         f"{vb.numel()} on B")
    return SteeringVector(name, (va - vb).float(), spec)


def is_file_spec(spec: str) -> bool:
    return Path(spec).suffix.lower() in VECTOR_SUFFIXES


def vector_spec_files(spec: str) -> list[tuple[str, str]]:
    """``(what, path)`` of the files a ``--vector`` spec names: the vector file, or a
    ``diff:``'s two sides (prompt-set files, input files); the caller keeps those that exist."""
    if is_file_spec(spec):
        return [("the vector file", spec)]
    if not is_diff_spec(spec):
        return []
    try:
        _, a, b = check_diff_spec(spec)
    except PlanError:
        return []  # refused with its reason where the vector is built
    return [("the prompt-set file" if Path(side.strip()).suffix == ".txt"
             else "a vector's input file", side.strip()) for side in (a, b)]


def resolve_vectors(module: nn.Module | None, interventions: Mapping[str, Intervention],
                    specs: Mapping[str, str], example: Any = None, codec: Any = None,
                    device: torch.device | None = None,
                    memo: dict[tuple[str, str], Any] | None = None) -> dict[str, Intervention]:
    """``interventions`` with every vector named by a ``--vector`` spec given its values: a file
    is read once; a ``diff:`` is computed at each layer that uses it (once per layer and spec
    where ``memo`` keeps them, e.g. across a sweep's cells)."""
    wanted = named_vectors(interventions)
    missing = sorted(set(wanted) - set(specs))
    if missing:
        return bind_vectors(interventions, {})  # names the first missing vector
    files = {n: load_vector_file(s, n) for n, s in specs.items() if n in wanted and is_file_spec(s)}
    out = dict(interventions)
    for name, paths in wanted.items():
        for path in paths:
            if name in files:
                vec = files[name]
            elif module is None:  # the model is elsewhere (a Ray actor): computed where it runs
                check_diff_spec(specs[name])
                out[path] = out[path].with_value("vector", specs[name])
                continue
            elif memo is not None and (path, specs[name]) in memo:
                vec = memo[(path, specs[name])]
            else:
                vec = diff_vector(module, path, specs[name], name, example, codec, device)
                if memo is not None:
                    memo[(path, specs[name])] = vec
            out.update(bind_vectors({path: out[path]}, {name: vec}))
    return out


def is_diff_spec(text: Any) -> bool:
    """Whether a vector parameter is a ``diff:``/``diffmean:`` spec still to compute."""
    return isinstance(text, str) and any(text.startswith(p) for p in DIFF_PREFIXES)


def check_diff_spec(spec: str) -> tuple[str, str, str]:
    """``(how, A, B)`` of a ``diff:A|B`` spec; a :class:`PlanError` saying how to write it otherwise."""
    prefix = next((p for p in DIFF_PREFIXES if spec.startswith(p)), None)
    if prefix is None:
        raise PlanError(f"vector spec {spec!r}: write diff:INPUT_A|INPUT_B (last position) or "
                        "diffmean:INPUT_A|INPUT_B (mean over positions)")
    a, sep, b = spec[len(prefix):].partition("|")
    if not sep or not a.strip() or not b.strip():
        raise PlanError(f"vector spec {spec!r}: give two inputs separated by |, e.g. "
                        "diff:text:I love this|text:I hate this")
    return DIFF_PREFIXES[prefix], a, b


def resolve_pending(plan: Plan, module: nn.Module, example: Any = None, codec: Any = None,
                    cache: dict | None = None, device: torch.device | None = None) -> Plan:
    """``plan`` with every vector given as a ``diff:`` spec computed at its layer, where the
    model runs (the window's runner, a Ray actor). ``cache``: ``{(path, spec): vector}``
    kept by the caller for the same model, so a Live drag does not repeat the two forwards."""

    changed: dict[str, Intervention] = {}
    for path, iv in plan.interventions.items():
        if isinstance(iv, _Directional) and is_diff_spec(iv.vector):
            key = (path, iv.vector)
            vec = cache.get(key) if cache is not None else None
            if vec is None:
                vec = diff_vector(module, path, iv.vector, short_name(iv.vector), example, codec,
                                  device)
                if cache is not None:
                    cache[key] = vec
            changed[path] = iv.with_value("vector", vec)
    if not changed:
        return plan
    return replace(plan, interventions={**plan.interventions, **changed})


def short_name(spec: str) -> str:
    """A readable name for the vector of a ``diff:A|B`` spec: ``A-B`` of the prompts' texts."""
    _, a, b = check_diff_spec(spec)
    words = [s.strip().removeprefix("text:").strip()[:16] for s in (a, b)]
    return f"{words[0]}-{words[1]}"


def has_pending_vectors(plan: Plan) -> bool:
    """Whether some intervention of ``plan`` has a ``diff:`` vector still to compute."""
    return any(isinstance(iv, _Directional) and is_diff_spec(iv.vector)
               for iv in plan.interventions.values())


def with_built_vectors(plan: Plan, built: Plan | None) -> Plan:
    """``plan`` with each ``diff:`` vector taken from ``built`` (a finished run's plan, where the
    runner computed it) when that layer has the same kind and spec there; for an export."""

    if built is None or not has_pending_vectors(plan):
        return plan
    changed: dict[str, Intervention] = {}
    for path, iv in plan.interventions.items():
        done = built.interventions.get(path)
        if (isinstance(iv, _Directional) and is_diff_spec(iv.vector) and type(done) is type(iv)
                and isinstance(done.vector, SteeringVector) and done.vector.source == iv.vector):
            changed[path] = iv.with_value("vector", done.vector)
    return replace(plan, interventions={**plan.interventions, **changed})
