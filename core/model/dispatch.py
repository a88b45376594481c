"""Models larger than one device: accelerate's device maps, CPU and disk offload.

Hookscope does not split models itself; it hands the model to accelerate:

* a device map is planned with ``infer_auto_device_map`` under ``--max-memory``
  (``auto``/``balanced`` spread over several GPUs evenly, ``sequential`` fills
  them in order; with one GPU or none the two are the same);
* with ``--weights`` the factory's model is built under ``init_empty_weights``
  (no memory for its parameters) and the weights go straight to their place
  (``load_checkpoint_and_dispatch`` for ``.safetensors``); without, the built
  model is handed to ``dispatch_model``;
* what fits nowhere goes to disk, under ``--offload DIR``.

accelerate then adds its own hooks (``AlignDevicesHook``) that move inputs and
offloaded weights to each layer's execution device in that layer's
``forward``. Hookscope's forward hooks wrap ``Module.__call__``, outside that
``forward``, so they see each layer's real output on the device it ran on:
captures, clamps and statistics (reduced where the tensor lives) work as on a
model in memory. The model must then never be moved as a whole; the runner
leaves a dispatched model where it is (:func:`is_dispatched`).

``hf:`` specs load with ``from_pretrained(**from_pretrained_kwargs(options))``.
accelerate is imported only here and only when a device map is asked for.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..base.devices import cuda_unavailable_reason
from .budget import scaled_size
from ..base.errors import DeviceError, SpecError
from ..base.extras import require
from ..base.user_text import is_digits, shown
from .sources import load_model
from .weights import read_state_dict

DEVICE_MAPS = ("auto", "balanced", "sequential")

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceMapOptions:
    """What ``--device-map``, ``--max-memory`` and ``--offload`` asked for.

    ``max_memory`` maps accelerate's device keys (GPU index ``0``, ``"cpu"``,
    ``"disk"``, ``"mps"``) to bytes. Asking for a memory limit or an offload
    folder without a strategy means ``auto``.
    """

    device_map: str | None = None
    max_memory: dict[int | str, int] = field(default_factory=dict)
    offload: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.device_map or self.max_memory or self.offload)

    @property
    def strategy(self) -> str:
        return self.device_map or "auto"


def device_map_options(device_map: str | None = None, max_memory: str | None = None,
                       offload: str | None = None) -> DeviceMapOptions:
    """Check and parse the three command-line values into :class:`DeviceMapOptions`."""
    if device_map is not None and device_map not in DEVICE_MAPS:
        raise DeviceError(f"--device-map {device_map!r}: use one of {', '.join(DEVICE_MAPS)}")
    mm = parse_max_memory(max_memory) if max_memory else {}
    if any(isinstance(k, int) for k in mm):
        reason = cuda_unavailable_reason()
        if reason:
            raise DeviceError(f"--max-memory names a GPU, but {reason}; give only cpu=SIZE "
                              "(and disk=SIZE)")
    if offload is not None:
        p = Path(offload).expanduser()
        if p.exists() and not p.is_dir():
            raise DeviceError(f"--offload {offload}: that is a file; give a folder for the "
                              "offloaded weights")
    return DeviceMapOptions(device_map, mm, offload)


def parse_size(text: str) -> int:
    """``'2GiB'``, ``'500MB'``, ``'1.5gb'``, ``'4096'`` (bytes) -> bytes."""
    m = _SIZE.match(text or "")
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise DeviceError(f"size {shown(text, 40)}: write a number with a unit, e.g. 2GiB, 500MB or "
                          "1.5GB (KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000)")
    return scaled_size(m.group(1), _UNITS[unit], f"size {shown(text, 40)}", DeviceError)


def parse_max_memory(text: str) -> dict[int | str, int]:
    """``'cpu=2GiB,0=10GiB,cuda:1=20GB,disk=100GB'`` -> accelerate's ``max_memory``."""
    out: dict[int | str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        dev, sep, size = part.partition("=")
        dev = dev.strip().lower()
        if not sep or not dev:
            raise DeviceError(f"--max-memory {part!r}: write DEVICE=SIZE, e.g. cpu=2GiB,0=10GiB")
        key: int | str
        if dev in ("cpu", "disk", "mps"):
            key = dev
        elif is_digits(dev.removeprefix("cuda:")):
            key = int(dev.removeprefix("cuda:"))
        elif dev == "cuda":
            key = 0
        else:
            raise DeviceError(f"--max-memory {part!r}: the device is cpu, disk, mps, a GPU "
                              "index (0) or cuda:N")
        try:
            out[key] = parse_size(size)
        except DeviceError as exc:
            raise DeviceError(f"--max-memory {exc}") from exc
    if not out:
        raise DeviceError("--max-memory is empty: write DEVICE=SIZE, e.g. cpu=2GiB")
    return out


def is_dispatched(module: nn.Module) -> bool:
    """True for a model placed by accelerate or ``from_pretrained(device_map=...)``:
    it must not be moved as a whole (its parts live on several devices, or on disk)."""
    return bool(getattr(module, "hf_device_map", None))


def device_label(value: Any) -> str:
    """A device-map value as the tree shows it: ``0`` -> ``'cuda:0'``, ``'disk'``, ``'cpu'``."""
    if isinstance(value, int):
        return f"cuda:{value}"
    return str(value)


def plan_device_map(module: nn.Module, opts: DeviceMapOptions) -> dict[str, int | str]:
    """Where each part of ``module`` goes under ``opts`` (accelerate's device map)."""
    acc = require("accelerate", "scale", "--device-map")
    from accelerate.utils import get_balanced_memory, get_max_memory

    no_split = list(getattr(module, "_no_split_modules", None) or [])
    mm = get_max_memory(dict(opts.max_memory) or None)
    gpus = [k for k in mm if isinstance(k, int)]
    if opts.strategy in ("auto", "balanced") and len(gpus) > 1:
        mm = get_balanced_memory(module, max_memory=mm, no_split_module_classes=no_split)
    return dict(acc.infer_auto_device_map(module, max_memory=mm, no_split_module_classes=no_split))


def dispatch(module: nn.Module, opts: DeviceMapOptions, weights: str | None = None) -> nn.Module:
    """Spread ``module`` over devices and disk as ``opts`` says; returns it.

    With ``weights``, ``module`` may be empty (built under ``init_empty_weights``):
    the file's tensors are checked against it and loaded straight to their place.
    Offloaded weights go to a fresh folder under ``opts.offload``, removed again
    when the model is freed (an old folder's files are never reused for another model).
    """
    acc = require("accelerate", "scale", "--device-map")
    dm = plan_device_map(module, opts)
    disk = [name or "(the whole model)" for name, d in dm.items() if d == "disk"]
    if disk and not opts.offload:
        limit = ", ".join(f"{device_label(k)}={v / 2**30:.3g}GiB" for k, v in opts.max_memory.items())
        raise DeviceError(f"the model does not fit in the memory given to it ({limit or 'all free memory'}): "
                          f"{len(disk)} part(s) ({', '.join(disk[:4])}) would go to disk. Pass --offload DIR "
                          "for their weights, or raise --max-memory.")
    folder = _fresh_offload_folder(module, opts.offload) if disk and opts.offload else None
    quiet = logging.getLogger("accelerate")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its notes ("some parameters are on the meta device") are expected here
    try:
        if weights and Path(weights).suffix == ".safetensors":
            _check_file_fits(module, _safetensors_shapes(weights), weights)
            acc.load_checkpoint_and_dispatch(module, weights, device_map=dm, offload_folder=folder,
                                             strict=True)
        else:
            if weights:
                _load_in_place(module, weights)
            if dm.get("") == "disk" and folder is not None:
                # The whole model on disk: accelerate would pick the weights of module "" by
                # the prefix ".", find none and write no index.json; write them all here.
                from accelerate.utils import offload_state_dict

                offload_state_dict(folder, module.state_dict())
            acc.dispatch_model(module, device_map=dm, offload_dir=folder)
    except (ValueError, RuntimeError, OSError) as exc:
        raise DeviceError(f"accelerate could not place the model ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
    finally:
        quiet.setLevel(level)
    module.hf_device_map = dict(dm)  # type: ignore[assignment]  # nn.Module stubs type attributes as Tensor | Module; also set when everything went to one device
    return module


def load_dispatched(spec: str, weights: str | None, opts: DeviceMapOptions,
                    trust_pickle: bool = False, trust: Any = None):
    """:func:`~hookscope.core.model.sources.load_model`, then placed by accelerate.

    With ``weights`` the factory runs under ``init_empty_weights``: its
    parameters take no memory until the file's values land on their device.
    """

    acc = require("accelerate", "scale", "--device-map")
    if spec.strip().startswith("hf:"):
        lm = _load_hf_dispatched(spec, weights, opts)
        if lm is not None:
            return lm
    if weights:
        try:
            with acc.init_empty_weights():
                lm = load_model(spec, None, trust_pickle, trust)
        except SpecError as exc:
            raise SpecError(f"{exc} (with --device-map and --weights the factory runs with empty "
                            "weights on the meta device: it must only build the model)") from exc
        if lm.kind == "export":
            raise SpecError("an exported .pt2 program carries its own weights; drop --weights")
    else:
        lm = load_model(spec, None, trust_pickle, trust)
    dispatch(lm.module, opts, weights)
    lm.weights = weights
    lm.module.eval()
    return lm


def _load_hf_dispatched(spec: str, weights: str | None, opts: DeviceMapOptions):
    """An ``hf:`` spec placed by ``from_pretrained(device_map=...)`` itself, never whole in
    memory, where the ``hf:`` adapter takes ``from_pretrained`` keywords; else ``None``
    (the model is then loaded whole and dispatched like any other)."""
    import inspect

    try:
        from .source_hf import load_hf  # the hf: adapter, where this build has it
    except ImportError:
        return None
    params = inspect.signature(load_hf).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    if weights:
        raise SpecError("an hf: model carries its own weights; drop --weights")
    lm = load_hf(spec, **from_pretrained_kwargs(opts))
    lm.module.eval()
    return lm


def from_pretrained_kwargs(opts: DeviceMapOptions) -> dict[str, Any]:
    """Keyword arguments for ``transformers``' ``from_pretrained`` (the ``hf:`` adapter)."""
    kw: dict[str, Any] = {"device_map": opts.strategy, "trust_remote_code": False}
    if opts.max_memory:
        kw["max_memory"] = dict(opts.max_memory)
    if opts.offload:
        kw["offload_folder"] = str(Path(opts.offload).expanduser())
    return kw


def layer_devices(module: nn.Module) -> dict[str, str]:
    """``{path: device}`` for every module: from accelerate's device map where there
    is one (``'disk'`` for offloaded parts), else from its parameters and buffers.

    A module whose parts live on several devices lists them, comma-separated,
    its own first, then its children's in model order; one with no tensors
    below it is left out.
    """
    dmap = getattr(module, "hf_device_map", None) or {}
    out: dict[str, str] = {}
    seen: set[int] = set()

    def visit(path: str, m: nn.Module) -> list[str]:
        if id(m) in seen:  # a shared module counts under its first path
            return []
        seen.add(id(m))
        key = _map_key(path, dmap) if dmap else None
        if key is not None:
            devs = [device_label(dmap[key])]
        else:
            devs = sorted({str(t.device) for t in (*m.parameters(recurse=False),
                                                    *m.buffers(recurse=False))})
        for name, child in m.named_children():
            if child is not None:
                below = visit(f"{path}.{name}" if path else name, child)
                if key is None:
                    devs += [d for d in below if d not in devs]
        if devs:
            out[path] = ", ".join(devs)
        return devs

    visit("", module)
    return out


def _map_key(path: str, dmap: dict[str, Any]) -> str | None:
    """The device-map entry that covers ``path`` (the longest prefix), or None."""
    best = None
    for key in dmap:
        if key == "" or path == key or path.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    return best


def _fresh_offload_folder(module: nn.Module, root: str) -> str:
    base = Path(root).expanduser()
    try:
        base.mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(prefix="hookscope-offload-", dir=base)
    except OSError as exc:
        raise DeviceError(f"--offload {root}: cannot create a folder there ({exc.strerror or exc})") from exc
    weakref.finalize(module, shutil.rmtree, folder, True)
    return folder


def _safetensors_shapes(path: str) -> dict[str, tuple[int, ...]]:
    from safetensors import SafetensorError, safe_open

    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecError(f"weights file {path!r} does not exist")
    try:
        with safe_open(str(p), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise SpecError(f"cannot read {path} as safetensors: {exc}") from exc


def _check_file_fits(module: nn.Module, shapes: dict[str, tuple[int, ...]], path: str) -> None:
    own = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    missing = sorted(set(own) - set(shapes))
    unexpected = sorted(set(shapes) - set(own))
    wrong = sorted(k for k in set(own) & set(shapes) if own[k] != shapes[k])
    if missing or unexpected or wrong:
        parts = [f"missing keys {missing[:8]}" if missing else "",
                 f"unexpected keys {unexpected[:8]}" if unexpected else "",
                 ", ".join(f"{k}: file {shapes[k]} vs model {own[k]}" for k in wrong[:5])]
        raise SpecError(f"weights {Path(path).name} do not fit the model: "
                        + "; ".join(p for p in parts if p)
                        + ". Check that the file was saved from this architecture.")


def _load_in_place(module: nn.Module, path: str) -> None:
    """Put a ``.pt`` state_dict's tensors into a (possibly empty) module, strictly."""
    from accelerate.utils import set_module_tensor_to_device


    state = read_state_dict(path)  # weights_only=True
    _check_file_fits(module, {k: tuple(v.shape) for k, v in state.items()}, path)
    for name, value in state.items():
        set_module_tensor_to_device(module, name, "cpu", value=value)
    if any(t.device.type == "meta" for t in module.state_dict().values()):
        raise SpecError(f"weights {Path(path).name} left some of the model's tensors empty")


