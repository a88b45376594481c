"""``make demo``'s check for Qt's xcb system libraries (no Qt imported)."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from hookscope.app.system_check import apt_line, check, missing_libraries, package_for, xcb_plugin_files


def test_library_names_map_to_debian_packages():
    assert package_for("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert package_for("libxcb-keysyms.so.1") == "libxcb-keysyms1"
    assert package_for("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert package_for("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert package_for("libxcb-render-util.so.0.0.0") == "libxcb-render-util0"
    assert apt_line(["libxcb-keysyms.so.1", "libxcb-icccm.so.4", "libxcb-icccm.so.4"],
                    root=False) == "sudo apt-get install libxcb-icccm4 libxcb-keysyms1"
    # a root shell on a fresh machine has no sudo: the line it can run as it is
    assert apt_line(["libxcb-icccm.so.4"], root=True) == "apt-get install libxcb-icccm4"


def test_missing_libraries_come_from_ldd_not_found_lines(tmp_path):
    # A stand-in for ldd with its real output format, so the parsing is tested on any machine.
    ldd = tmp_path / "ldd"
    ldd.write_text("#!/bin/sh\ncat <<'END'\n\tlinux-vdso.so.1 (0x00007ffd)\n"
                   "\tlibxcb-icccm.so.4 => not found\n\tlibxcb.so.1 => /lib/libxcb.so.1 (0x7f)\n"
                   "\tlibxcb-keysyms.so.1 => not found\nEND\n")
    ldd.chmod(ldd.stat().st_mode | stat.S_IEXEC)
    assert missing_libraries([tmp_path], str(ldd)) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]


def test_nothing_to_check_without_a_display_or_off_linux():
    assert check({}, "linux") == (0, "")
    assert check({"DISPLAY": ":0"}, "darwin") == (0, "")
    assert check({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux") == (0, "")


def test_the_real_plugin_is_found_and_checked_without_importing_qt():
    code = ("import sys; from hookscope.app import system_check as s; "
            "files = s.xcb_plugin_files(); s.missing_libraries(files); "
            "print(len(files), [m for m in sys.modules if m.startswith('PySide6.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    n, loaded = out.split(" ", 1)
    assert loaded.strip() == "[]"
    assert int(n) == len(xcb_plugin_files())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PySide6 ships the xcb plugin only on Linux")
def test_pyside6_on_linux_ships_the_xcb_plugin():
    assert any(f.name == "libqxcb.so" for f in xcb_plugin_files())


def test_a_missing_library_is_one_line_naming_the_packages(tmp_path, monkeypatch):
    from hookscope.app import system_check

    ldd = tmp_path / "ldd"
    ldd.write_text("#!/bin/sh\necho '\tlibxcb-icccm.so.4 => not found'\n")
    ldd.chmod(ldd.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    # a stand-in plugin file, so the check runs whether or not this PySide6 build ships xcb
    plugin = tmp_path / "libqxcb.so"
    plugin.write_bytes(b"")
    monkeypatch.setattr(system_check, "xcb_plugin_files", lambda: [plugin])
    status, message = system_check.check({"DISPLAY": ":0"}, "linux")
    assert status == 1 and "\n" not in message
    sudo = "" if __import__("os").geteuid() == 0 else "sudo "
    assert message.endswith(f"install them with: {sudo}apt-get install libxcb-icccm4")
