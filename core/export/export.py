"""Taking results out of Hookscope: captures to files, and the setup as a plain PyTorch script.

* :func:`save_captures` writes every kept capture to ``.npz`` or
  ``.safetensors`` under keys ``"<layer path>#<call>"`` (and
  ``"<layer path>#<call>:before"`` for the value before an intervention,
  ``"<layer path>#<call>:baseline"`` for the run without the interventions); the
  other tensor leaves of a nested output add their names
  (``"lstm#0[1][0]"``, ``"det#0[0]['scores']"``).
* :func:`standalone_script` writes the current comparison as a script that
  needs torch alone: the model (:mod:`.script_model`), the input, the hooks,
  every intervention and the statistics are written out in plain PyTorch
  (:mod:`.script_template`), in the form the two exercises teach (one hook
  factory per layer, every handle removed in ``finally``); it prints the
  statistics the window shows and the same numbers as a JSON line.
"""

from __future__ import annotations

import base64
import inspect
import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file  # keeps every dtype as it is, bfloat16 included

from ..base.atomic_write import atomic_write
from ..base.errors import HookscopeError, PlanError
from ..engine.capture_record import CaptureRecord
from ..plan.intervention_base import Intervention
from ..plan.plan import Plan
from ..plan.residual_points import named_points_resolved, script_mid_sites
from .script_aim import AIM_HELPERS, AIM_NEEDS, head_sites
from .script_sae import sae_section, saes_for
from ..model.sae import SparseAutoencoder
from .script_template import HELPERS, SCRIPT, STATS, comment_text
from ..model.inputs import parse_input
from .script_model import model_section
from ..model.sources import load_model
from ..base.nested import map_tensors
from ..base.call_args import CallArgs

CAPTURE_FORMATS = (".npz", ".safetensors")


def capture_tensors(captures: dict[str, list[CaptureRecord]]) -> dict[str, Any]:
    """Every kept tensor as ``{"path#call": tensor, "path#call:before": tensor,
    "path#call:baseline": tensor}`` (CPU, contiguous): the intervened run's value, the value
    before the layer's own intervention, and the baseline run's (the run without any
    intervention) where the plan intervenes; a nested output's other leaves as
    ``"path#call<leaf>"``, e.g. ``"lstm#0[1][0]"``."""
    out: dict[str, Any] = {}
    for path, recs in captures.items():
        for rec in recs:
            for i, r in enumerate(rec.leaves):  # the first leaf keeps the plain key
                key = f"{path or '<root>'}#{r.call}{r.leaf if i else ''}"
                if r.tensor is not None:
                    out[key] = r.tensor.detach().cpu().contiguous()
                if r.pre_tensor is not None:
                    out[f"{key}:before"] = r.pre_tensor.detach().cpu().contiguous()
                # the same call in the run without the interventions, to compare from the file
                if r.baseline_tensor is not None and r.baseline_tensor is not r.tensor:
                    out[f"{key}:baseline"] = r.baseline_tensor.detach().cpu().contiguous()
    return out


def capture_arrays(captures: dict[str, list[CaptureRecord]]) -> dict[str, np.ndarray]:
    """The same as NumPy arrays; bfloat16, which NumPy lacks, becomes float32."""
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
        return atomic_write(path, lambda tmp: np.savez_compressed(tmp, **arrays))  # type: ignore[arg-type]  # numpy stubs: **kwds arrays read as allow_pickle
    return atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))


#: Payloads (weights, input, source inputs) above this size go to a sidecar file when
#: the caller names one: a 2 MiB payload is ~2.7 MB of base64 text in the script.
INLINE_PAYLOAD_BYTES = 2 << 20


def standalone_script(spec: str, plan: Plan, input_text: str = "", weights: str | None = None,
                      device: str = "cpu", trust_pickle: bool = False,
                      sidecar: str | Path | None = None, trust: Any = None,
                      saes: dict[str, SparseAutoencoder] | None = None,
                      script_path: str | Path | None = None) -> str:
    """A runnable Python script that reproduces this comparison with plain PyTorch hooks.

    It needs torch alone (no Hookscope import): the model is written as
    :mod:`~hookscope.core.export.script_model` says (a demo's architecture as source
    and its weights embedded; a factory imported from its file or module; a
    ``.pt2`` loaded with ``torch.export``; an ``hf:`` folder rebuilt by transformers,
    :mod:`~hookscope.core.export.script_hf`), and the input and every source
    input are embedded as tensors, in one base64 ``torch.save`` payload read
    back with ``weights_only=True``. Every intervention is written out in plain
    torch: the source of its kind's ``leaf_function`` (the very function the kind
    applies, copied with :func:`inspect.getsource`; from the registry, so a newly
    registered kind exports too) and a ``functools.partial`` of it with the
    parameters. A patch's source forward (and a reference mean's) runs first,
    once per distinct input, as in Hookscope. The script prints, per captured
    layer and call, the statistics the window shows (shape, min, max, mean,
    std, NaN/Inf counts, fraction changed; intervened run and baseline), then
    one JSON line with the outputs and those statistics.

    ``sidecar``: where the script will be written, for payloads above
    :data:`INLINE_PAYLOAD_BYTES`: they are then saved (``torch.save``) to
    ``Path(sidecar).with_suffix(".pt")`` and the script loads that file from
    beside itself. Without it, or for smaller payloads (every demo), the
    script is one self-contained file. ``trust``: the :class:`~.code_trust.CodeTrust`
    the model was loaded under (a session file's model is held to the same yes).
    ``saes``: the SAE attached to each layer (``sae-*`` edits need theirs); the script
    reads their weights from :func:`~.script_sae.sae_weights_file` of ``script_path``,
    which :func:`~.script_sae.write_sae_weights` writes.
    """

    interventions = plan.all_interventions()
    kinds: dict[str, type[Intervention]] = {}
    for path, iv in interventions.items():
        if not iv.leaf_function:
            raise HookscopeError(f"the script export cannot write the {iv.name} intervention on "
                                 f"layer {path!r}: its kind gives no plain-torch form (leaf_function)")
        kinds.setdefault(iv.name, type(iv))
    # A pickled module is not unpickled here (the script does that, for a file its user
    # trusts); it has no example input, so the input must be typed.
    pickled = spec.strip().endswith((".pt", ".pth")) and not trust_pickle
    loaded = None if pickled else load_model(spec, weights=weights, trust_pickle=trust_pickle,
                                             trust=trust)
    codec = None if loaded is None else loaded.meaning.codec
    mid_sites: dict[str, tuple[str, str]] = {}
    if loaded is not None:  # resid_pre.N and the like: written as the places they name
        mid_sites = script_mid_sites(plan, loaded.module)
        plan = named_points_resolved(plan, loaded.module)
        interventions = plan.all_interventions()
    x = _cpu(parse_input(input_text, None if loaded is None else loaded.example_input, codec))
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
            sources.append(_cpu(parse_input(src, x, codec) if isinstance(src, str) else src))
        source_of[path] = source_keys.index(key)
    sites = head_sites(None if loaded is None else loaded.module, plan)
    n_heads = _heads_by_layer(None if loaded is None else loaded.module, plan)
    model_src, extra = model_section(spec, loaded, weights, probe=x)
    payload = {"input": x, "sources": sources, **extra}
    # Each definition once (two kinds may share a helper), helpers before the leaf that calls them.
    definitions = dict.fromkeys(src for cls in kinds.values() for src in _leaf_definitions(cls))
    aiming = any(iv.where() is not None for iv in interventions.values())
    if aiming:
        definitions.update(dict.fromkeys(inspect.getsource(fn).strip("\n") for fn in AIM_NEEDS))
    functions = "\n".join(src + "\n\n" for src in definitions)
    used_saes = saes_for(plan, saes)
    if used_saes:
        if script_path is None:
            raise HookscopeError("the script export of sae-* edits writes the SAEs' weights "
                                 "beside the script: name the script's path")
        functions = sae_section(used_saes, script_path) + functions
    if aiming:
        functions += AIM_HELPERS.strip("\n") + "\n\n"
    # The comment is user text (a source input's file name): escaped, so it stays one comment.
    intervene = "".join(f"    {path!r}: {iv.to_torch_source(n_heads.get(path))},"
                        f"  # {comment_text(iv.describe())}\n"
                        for path, iv in interventions.items())
    every_leaf = {p for p, iv in interventions.items() if iv.leaf_kinds == "all"}
    first_leaf = {p for p, iv in interventions.items() if iv.leaf_kinds == "first"}
    what = " and the model's weights" if "state_dict" in extra else ""
    return SCRIPT.substitute(
        spec=repr(spec), device=repr(device), capture=repr(list(plan.capture)),
        source_of=repr(source_of), payload_load=_payload_load(payload, sidecar),
        payload_what=f", the source inputs{what}",
        model=model_src.rstrip("\n") + "\n", helpers=HELPERS.strip("\n") + "\n", stats=STATS,
        functions=functions or "# (no interventions)\n", intervene=intervene,
        describe=repr({p: iv.describe() for p, iv in interventions.items()}),
        every_leaf=repr(every_leaf) if every_leaf else "set()", head_sites=repr(sites),
        first_leaf=repr(first_leaf) if first_leaf else "set()", mid_sites=repr(mid_sites),
    )


def _leaf_definitions(cls: type[Intervention]) -> list[str]:
    try:
        return cls.leaf_definitions()
    except PlanError as exc:
        raise HookscopeError(f"the script export cannot write the {cls.name} intervention: "
                             f"{exc}") from exc


def _heads_by_layer(module: Any, plan: Plan) -> dict[str, int]:
    """``{layer: number of heads}`` of the plan's head targets (resolved on ``module``)."""
    if module is None or not any(iv.where() is not None and iv.where().heads is not None  # type: ignore[union-attr]
                                 for iv in plan.all_interventions().values()):
        return {}
    return {p: lp.head_site.n_heads for p, lp in plan.resolve(module).items()
            if lp.head_site is not None}


def _cpu(value: Any) -> Any:
    """``value`` with every tensor detached, on the CPU and contiguous (for torch.save)."""


    if isinstance(value, CallArgs):  # plain containers: the script loads with weights_only=True
        value = {"__args__": tuple(value.args), "__kwargs__": dict(value.kwargs)}
    return map_tensors(lambda t: t.detach().cpu().contiguous().clone(), value)


def _payload_load(payload: dict[str, Any], sidecar: str | Path | None) -> str:
    """The script's expression that loads ``payload``: from a base64 literal of short lines,
    or, when it is large and a ``sidecar`` script path is given, from a ``.pt`` beside it."""
    buf = io.BytesIO()
    torch.save(payload, buf)
    data = buf.getvalue()
    if sidecar is not None and len(data) > INLINE_PAYLOAD_BYTES:
        target = Path(sidecar).expanduser().with_suffix(".pt")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HookscopeError(f"cannot create the folder {target.parent}: "
                                 f"{exc.strerror or exc}") from exc
        atomic_write(target, lambda tmp: Path(tmp).write_bytes(data))
        return ("torch.load(__import__('pathlib').Path(__file__).with_name("
                f"{target.name!r}), weights_only=True)  # written beside this script")
    text = base64.b64encode(data).decode("ascii")
    lines = [text[i:i + 96] for i in range(0, len(text), 96)] or [""]
    literal = "(\n" + "".join(f"    {line!r}\n" for line in lines) + ")"
    return f"torch.load(io.BytesIO(base64.b64decode({literal})), weights_only=True)"


def session_dict(result: Any, spec: str, plan: Plan, input_text: str = "",
                 weights: str | None = None) -> dict:
    """A comparison and how it was set up, as JSON-ready data."""
    d = {"spec": spec, "weights": weights, "input": input_text,
         "plan": {**plan.to_dict(), "clamp": {p: list(b) for p, b in plan.clamp.items()}}}
    d.update(result.to_json_dict())
    return d
