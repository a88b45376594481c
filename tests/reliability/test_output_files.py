"""Files Hookscope writes: whole or not at all, never over one another, never over an input.

A full disk is simulated as in test_full_disk.py: a file-size limit
(``RLIMIT_FSIZE``) in a subprocess, SIGXFSZ ignored, so a write past it fails
with EFBIG as a write to a full disk fails with ENOSPC.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookscope.app.cli import main

resource = pytest.importorskip("resource")  # POSIX only

PNG_END = b"IEND\xaeB`\x82"

_LIMITED_EXPORTS = """
import json, resource, signal, sys
from pathlib import Path
from hookscope.app.plot_files import _app
from hookscope.core import HookscopeError, Plan, compare, load_model
app = _app()
from hookscope.widgets.activation_panel import ActivationPanel
lm = load_model("demo:cnn")
r = compare(lm.module, lm.example_input, Plan(capture=("conv1",)), "cpu")
panel = ActivationPanel()
panel.resize(1000, 420)
panel.show()
panel.show_result(r)
for _ in range(3):
    app.processEvents()
panel.flush_visible()
p = next(iter(panel.panels().values()))
folder = Path(sys.argv[1])
exports = [("figure.png", panel.export_figure), ("figure.svg", panel.export_figure),
           ("panel.png", p.export), ("hist.csv", p.hist_tools.export),
           ("hist.png", p.hist_tools.export), ("view.svg", p.view_tools.export),
           ("view.csv", p.view_tools.export)]
for name, _ in exports:
    (folder / name).write_bytes(b"old")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (150, 150))
said = []
for name, export in exports:
    try:
        export(folder / name)
        said.append("written")
    except HookscopeError as exc:
        said.append(str(exc))
panel.close()
print(json.dumps(said))
"""

_LIMITED_CLI = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from hookscope.app.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    return env


def test_figure_and_plot_exports_on_a_full_disk_keep_the_old_file(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-c", _LIMITED_EXPORTS, str(folder)], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout)
    for name, text in zip(["figure.png", "figure.svg", "panel.png", "hist.csv", "hist.png",
                           "view.svg", "view.csv"], said):
        assert text.startswith(f"cannot write {folder / name}: "), text
        assert text.endswith("nothing was written")
        assert (folder / name).read_bytes() == b"old"  # the old file, whole
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no temporaries


@pytest.mark.parametrize("limit", [2000, 30000])
def test_save_plots_on_a_full_disk_is_one_line_status_2_and_no_partial_file(tmp_path, limit):
    """The first PNG fails (2000 bytes), or small files fit and the last figure fails (30000)."""
    out = tmp_path / "plots"
    proc = subprocess.run([sys.executable, "-c", _LIMITED_CLI, str(limit), "run", "demo:cnn",
                           "--capture", "conv1,fc", "--save-plots", str(out)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hookscope: error: cannot write "), lines
    assert "nothing was written" in lines[0]
    for f in out.iterdir():
        assert not f.name.startswith("."), f"temporary file {f.name} left behind"
        if f.suffix == ".png":
            assert f.read_bytes().endswith(PNG_END), f"{f.name} is truncated"


COLLIDING = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    blocks = nn.Sequential()
    blocks.add_module("a b", nn.Linear(3, 3))
    blocks.add_module("a_b", nn.Linear(3, 2))
    blocks.add_module("a?b", nn.Linear(2, 4))
    return nn.Sequential(blocks), torch.tensor([[1.0, 2.0, 3.0]])
'''


def _bars(path: Path) -> list[float]:
    return [float(row[1]) for row in list(csv.reader(path.read_text().splitlines()))[1:]]


def test_layers_whose_names_map_to_one_file_name_keep_their_own_files(tmp_path, capsys, qtbot):
    from hookscope.app.plot_files import plot_stem
    from hookscope.core import Plan, compare, load_model

    (tmp_path / "net.py").write_text(COLLIDING)
    spec = f"{tmp_path / 'net.py'}:build"
    layers = ["0.a b", "0.a_b", "0.a?b"]
    names = {}
    for run in ("first", "second"):
        out = tmp_path / run
        assert main(["run", spec, "--capture", ",".join(layers), "--save-plots", str(out)]) == 0
        capsys.readouterr()
        names[run] = sorted(f.name for f in out.iterdir())
    assert names["first"] == names["second"]  # stable: the same layer, the same file
    stems = [plot_stem(layer) for layer in layers]
    assert len(set(stems)) == 3 and stems[1] == "0.a_b"
    lm = load_model(spec)
    r = compare(lm.module, lm.example_input, Plan(capture=tuple(layers)), "cpu")
    for layer, stem in zip(layers, stems):
        assert f"{stem}_call0.png" in names["first"]
        want = r.captures[layer][0].tensor.reshape(-1).tolist()
        assert _bars(tmp_path / "first" / f"{stem}_call0_bars.csv") == pytest.approx(want, abs=1e-6)


def test_plot_stems_are_file_names():
    from hookscope.app.plot_files import STEM_LIMIT, plot_stem

    for layer in ["", ".", "..", "../../etc/passwd", "a/b", "x" * 5000, "é", "a\x00b", "a\nb"]:
        stem = plot_stem(layer)
        assert "/" not in stem and "\x00" not in stem and stem not in ("", ".", "..")
        assert not stem.startswith(".") and len(stem) <= STEM_LIMIT + 13
    assert plot_stem("conv1") == "conv1" and plot_stem("layer1.0.conv1") == "layer1.0.conv1"


# -- no output replaces a file the command reads ----------------------------------------

MODEL = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4)), torch.tensor([[1.0, 2.0, 3.0]])
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    import numpy as np
    import torch
    from safetensors.torch import save_file

    monkeypatch.chdir(tmp_path)
    Path("net.py").write_text(MODEL)
    torch.manual_seed(1)
    save_file({k: v.contiguous() for k, v in torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Linear(4, 4)).state_dict().items()}, "w.safetensors")
    np.save("x.npy", np.array([[0.5, 1.0, -1.0]], dtype=np.float32))
    np.save("src.npy", np.array([[2.0, 1.0, 0.0]], dtype=np.float32))
    Path("labels.txt").write_text("a\nb\nc\nd\n")
    return tmp_path


BASE = ["run", "net.py:build", "--weights", "w.safetensors", "--input", "x.npy",
        "--labels", "labels.txt", "--intervene", "0=patch", "--source-input", "src.npy"]


def _refused(capsys, argv: list[str], victim: str, what: str) -> None:
    before = Path(victim).read_bytes()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "would overwrite" in err and what in err, err
    assert Path(victim).read_bytes() == before


@pytest.mark.parametrize("flag,victim,what", [
    ("--save-captures", "w.safetensors", "the --weights file"),
    ("--export-script", "net.py", "the model file"),
    ("--save-json", "x.npy", "the input file"),
    ("--save-session", "labels.txt", "the labels file"),
    ("--export-script", "src.npy", "a source input file"),
])
def test_an_output_never_replaces_an_input(project, capsys, flag, victim, what):
    _refused(capsys, [*BASE, flag, victim], victim, what)


def test_links_and_other_spellings_of_an_input_are_refused(project, capsys):
    os.symlink("w.safetensors", "link.safetensors")
    _refused(capsys, [*BASE, "--save-captures", "link.safetensors"], "w.safetensors",
             "the --weights file")
    os.link("net.py", "hard.py")
    _refused(capsys, [*BASE, "--export-script", "hard.py"], "net.py", "the model file")
    os.mkdir("sub")
    _refused(capsys, [*BASE, "--save-json", "sub/../x.npy"], "x.npy", "the input file")
    _refused(capsys, [*BASE, "--save-json", str(project / "labels.txt")], "labels.txt",
             "the labels file")
    assert main([*BASE, "--save-json", "fine.json"]) == 0  # an ordinary output still works
    capsys.readouterr()


def test_save_plots_never_replaces_an_input_image(project, capsys):
    from PIL import Image

    os.mkdir("plots")
    Image.new("L", (28, 28), 200).save("plots/output.png")
    _refused(capsys, ["run", "demo:cnn", "--input", "plots/output.png", "--save-plots", "plots"],
             "plots/output.png", "the input file")


def test_a_session_run_never_replaces_its_session_file(project, capsys):
    # A demo model: a session file naming a factory would (rightly) need trust to reopen.
    assert main(["run", "demo:clamp", "--input", "x.npy", "--labels", "labels.txt",
                 "--save-session", "s.hookscope.json"]) == 0
    capsys.readouterr()
    _refused(capsys, ["run", "--session", "s.hookscope.json", "--save-json", "s.hookscope.json"],
             "s.hookscope.json", "the session file")
    _refused(capsys, ["run", "--session", "s.hookscope.json", "--export-script", "x.npy"],
             "x.npy", "the input file")
    _refused(capsys, ["run", "--session", "s.hookscope.json", "--save-json", "labels.txt"],
             "labels.txt", "the labels file")


def test_the_window_never_exports_over_what_it_reads(make_window, qtbot, project):
    from hookscope.app.export_actions import export_captures, export_script, save_session
    from hookscope.app.window_tools import export_figure

    win = make_window(["demo:clamp", "--input", "x.npy", "--labels", "labels.txt",
                       "--capture", "0"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    before = {name: Path(name).read_bytes() for name in ("x.npy", "labels.txt")}
    assert export_script(win.session, win.ui, "x.npy") is None
    assert "would overwrite the input file the open model reads" in win.error_text()
    assert export_captures(win.session, win.ui, "labels.txt") is None
    assert "would overwrite the labels file" in win.error_text()
    os.symlink("labels.txt", "l.hookscope.json")
    assert save_session(win.session, win.ui, "l.hookscope.json") is None
    os.symlink("x.npy", "fig.png")
    assert export_figure(win, "fig.png") is None
    assert "would overwrite the input file" in win.error_text()
    assert {name: Path(name).read_bytes() for name in before} == before
    assert export_script(win.session, win.ui, "repro.py") is not None  # still usable
