"""How much memory this process may still take: the host's free memory, or less where a
memory limit on its control group (a container's) leaves less.

Inside a container (Docker, Kubernetes, a CI runner) ``/proc/meminfo`` describes the
host: a budget taken from its ``MemAvailable`` alone can pass the container's limit, and
the kernel then kills the process where Hookscope would have chosen statistics only or
refused. So the room left under the memory limit of this process's cgroup, and of every
cgroup above it, counts too (cgroup v2's ``memory.max``/``memory.current``, v1's
``memory.limit_in_bytes``/``memory.usage_in_bytes``), less the page cache the kernel
reclaims before it kills (``inactive_file``). Files that are missing, unreadable, too long
or not numbers are ignored: the host's figure then stands.
"""

from __future__ import annotations

import os
from pathlib import Path

#: A v1 limit at or above this is "no limit" (the kernel writes about 2**63 rounded to a page).
_V1_UNLIMITED = 1 << 62
#: The most read of any one file here: all are a line or a few dozen short lines.
_MOST_READ = 64 << 10


#: Where the kernel's views are mounted (tests point them at folders of their own).
PROC = Path("/proc")
CGROUPS = Path("/sys/fs/cgroup")


def available_memory(proc: Path | None = None, cgroups: Path | None = None) -> int:
    """Bytes this process may still allocate: ``MemAvailable``, or the room under the
    tightest cgroup memory limit where that is less (see the module docstring)."""
    proc = PROC if proc is None else proc
    cgroups = CGROUPS if cgroups is None else cgroups
    host = _host_available(proc)
    room = cgroup_room(proc / "self" / "cgroup", cgroups)
    return host if room is None else min(host, room)


def _host_available(proc: Path) -> int:
    for line in _lines(proc / "meminfo"):
        if line.startswith("MemAvailable:"):
            kib = _number(line.split(":", 1)[1].strip().removesuffix("kB").strip())
            if kib is not None:
                return kib * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30  # unknown: assume a small machine


def cgroup_room(self_cgroup: Path, cgroups: Path) -> int | None:
    """Bytes left under the tightest memory limit of the cgroup named in ``self_cgroup``
    (``/proc/self/cgroup``) and its ancestors, as mounted under ``cgroups``; ``None``
    where no limit applies or none can be read."""
    rooms: list[int] = []
    for line in _lines(self_cgroup):
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":          # v2: one unified hierarchy
            rooms += _rooms(cgroups, path, "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):             # v1: the memory controller's own
            rooms += _rooms(cgroups / "memory", path, "memory.limit_in_bytes",
                            "memory.usage_in_bytes", "total_inactive_file")
    return min(rooms) if rooms else None


def _rooms(mount: Path, path: str, limit_file: str, usage_file: str, cache_key: str) -> list[int]:
    """The room under each limit from ``mount``/``path`` up to ``mount`` itself (inside a
    container its own cgroup is often the mount's root, and ``path`` reads ``/``)."""
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):   # the kernel never writes these: not trusted
        return []
    rooms = []
    for depth in range(len(parts), -1, -1):
        folder = mount.joinpath(*parts[:depth])
        limit = _limit(folder / limit_file)
        if limit is None:
            continue
        usage = _number(_first_line(folder / usage_file))
        if usage is None:
            continue
        cache = 0
        for line in _lines(folder / "memory.stat"):
            key, _, value = line.partition(" ")
            if key == cache_key:
                cache = _number(value.strip()) or 0
                break
        rooms.append(max(0, limit - max(0, usage - cache)))
    return rooms


def _limit(path: Path) -> int | None:
    text = _first_line(path)
    if text == "max":
        return None
    value = _number(text)
    return None if value is None or value >= _V1_UNLIMITED else value


def _number(text: str | None) -> int | None:
    """A plain decimal count of at most 20 ASCII digits, else ``None``."""
    if text is None or not (0 < len(text) <= 20) or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def _first_line(path: Path) -> str | None:
    lines = _lines(path)
    return lines[0].strip() if lines else None


def _lines(path: Path) -> list[str]:
    """The lines of a small text file; none where it cannot be read or is not small."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MOST_READ + 1)
    except OSError:
        return []
    if len(data) > _MOST_READ:
        return []
    return data.decode("ascii", "replace").splitlines()
