"""Does this Linux have the system libraries Qt's window (xcb) plugin needs?

``make demo`` runs ``python -m hookscope.app.system_check`` before opening the
window: on Linux with a display, it asks ``ldd`` which libraries PySide6's xcb
plugin cannot find and prints the one ``apt-get install`` line that adds them
(Qt's own message names only ``libxcb-cursor0``, which is often present while
``libxcb-icccm4`` or ``libxcb-keysyms1`` is missing). Without a display, or
off Linux, there is nothing to check. Imports no Qt module.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

def package_for(soname: str) -> str:
    """Debian's package for a shared library: ``libxcb-icccm.so.4`` -> ``libxcb-icccm4``,
    ``libxkbcommon-x11.so.0`` -> ``libxkbcommon-x11-0`` (a dash after a trailing digit)."""
    m = re.match(r"^(lib[\w+.-]+?)\.so\.(\d+)", soname)
    if not m:
        return soname
    name, major = m.groups()
    return f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}"


def xcb_plugin_files() -> list[Path]:
    """PySide6's xcb platform plugin and its Qt library, found without importing Qt."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return []
    qt = Path(list(spec.submodule_search_locations)[0]) / "Qt"
    files = [qt / "plugins" / "platforms" / "libqxcb.so", *sorted((qt / "lib").glob("libQt6XcbQpa.so*"))]
    return [f for f in files if f.exists()]


def missing_libraries(files: list[Path], ldd: str | None = None) -> list[str]:
    """The shared libraries ``ldd`` reports as "not found" for ``files`` (sorted, unique)."""
    ldd = ldd or shutil.which("ldd")
    if not ldd:
        return []
    missing: set[str] = set()
    for f in files:
        try:
            out = subprocess.run([ldd, str(f)], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        missing.update(m.group(1) for m in re.finditer(r"^\s*(\S+)\s+=>\s+not found", out, re.M))
    return sorted(missing)


def apt_line(missing: list[str], root: bool | None = None) -> str:
    """The one command that installs the packages for ``missing`` libraries: with
    ``sudo`` for a user, without it for root (a fresh container has no sudo)."""
    packages = sorted({package_for(s) for s in missing})
    if root is None:
        root = hasattr(os, "geteuid") and os.geteuid() == 0
    return ("" if root else "sudo ") + "apt-get install " + " ".join(packages)


def check(environ: dict | None = None, platform: str | None = None) -> tuple[int, str]:
    """``(exit status, message)``: 0 and "" when the window can open (or nothing to check)."""
    env = os.environ if environ is None else environ
    if not (platform or sys.platform).startswith("linux"):
        return 0, ""
    if not env.get("DISPLAY") or env.get("QT_QPA_PLATFORM", "xcb") not in ("xcb", ""):
        return 0, ""   # no X display (or another platform asked for): xcb is not used
    missing = missing_libraries(xcb_plugin_files())
    if not missing:
        return 0, ""
    return 1, ("hookscope: Qt's window plugin (xcb) cannot load: this system lacks "
               f"{', '.join(missing)}; install them with: {apt_line(missing)}")


def main() -> int:
    status, message = check()
    if message:
        print(message, file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
