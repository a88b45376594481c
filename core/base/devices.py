"""Devices: what this machine offers, and turning a name into a checked torch.device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import DeviceError


@dataclass(frozen=True)
class DeviceInfo:
    """One entry of the device list: ``name`` is what ``device=`` takes."""

    name: str
    label: str
    available: bool
    reason: str = ""


def cuda_unavailable_reason() -> str:
    """Why CUDA cannot be used here, in words a user can act on ('' if it can)."""
    if torch.version.cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU-only build; install a CUDA build "
                "of torch to run on a GPU")
    if not torch.cuda.is_available():
        return "torch has CUDA support but sees no GPU (no device, or no driver)"
    return ""


def available_devices() -> list[DeviceInfo]:
    """CPU, then each CUDA device; a CUDA entry stays listed (unavailable) when absent."""
    out = [DeviceInfo("cpu", "CPU", True)]
    reason = cuda_unavailable_reason()
    if reason:
        out.append(DeviceInfo("cuda", "CUDA", False, reason))
    else:
        for i in range(torch.cuda.device_count()):
            out.append(DeviceInfo(f"cuda:{i}", f"CUDA {i}: {torch.cuda.get_device_name(i)}", True))
    return out


def resolve_device(name: str | torch.device) -> torch.device:
    """Check that ``name`` exists here; raise :class:`DeviceError` saying what to do if not."""
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise DeviceError(f"unknown device {str(name)!r}: use 'cpu', 'cuda' or 'cuda:N'") from exc
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        reason = cuda_unavailable_reason()
        if reason:
            raise DeviceError(f"CUDA was asked for, but {reason}. Choose the CPU instead "
                              "(--device cpu on the command line).")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise DeviceError(f"device {str(name)!r} does not exist: this machine has {n} CUDA "
                              f"device(s), cuda:0..cuda:{n - 1}")
        # "cuda" means the current device; naming it keeps device comparisons exact.
        return dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
    raise DeviceError(f"device type {dev.type!r} is not supported: use 'cpu' or 'cuda'")


def synchronize(devices: "list[torch.device]") -> None:
    """Wait for queued work on each of ``devices`` (for honest timings): the list
    :func:`accelerator_devices` gives, computed once per forward."""
    for d in devices:
        torch.cuda.synchronize(d)


def accelerator_devices(dev: torch.device, module: "torch.nn.Module | None" = None
                        ) -> list[torch.device]:
    """The CUDA devices among ``dev`` and ``module``'s parameters and buffers, in order.

    A model spread over several GPUs by a device map runs its later layers on
    other devices than the input's: waiting for the input's device alone would
    stop the clock while those layers still run. Without CUDA there is nothing
    to wait for, and the weights are not walked.
    """
    if not torch.cuda.is_available():
        return []
    found: dict[torch.device, None] = {}
    if dev.type == "cuda":
        found[dev] = None
    if module is not None:
        for t in (*module.parameters(), *module.buffers()):
            if t.device.type == "cuda":
                found.setdefault(t.device, None)
    return list(found)
