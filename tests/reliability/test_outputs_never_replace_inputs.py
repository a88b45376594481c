"""No output replaces a file the command reads, whichever flag named that file.

Each case runs the real CLI (``hookscope.app.cli.main``) on its own files and checks
the answer: status 2, one line naming the input, and the input's bytes unchanged.
The files here are those that slipped past a list of flags: a ``--vector`` file, a
template's ``patch:`` source (sweep and scan), a ``diff:`` vector's prompt set, and a
file inside an ``--sae`` folder; links to them count as them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from hookscope.app.cli import main

MODEL = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4)), torch.tensor([[1.0, 2.0, 3.0]])
'''


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    Path("net.py").write_text(MODEL)
    np.save("v.npy", np.linspace(-1, 1, 4, dtype=np.float32))
    np.save("src.npy", np.array([[2.0, 1.0, 0.0]], dtype=np.float32))
    np.save("other.npy", np.array([[0.0, 1.0, 2.0]], dtype=np.float32))
    os.mkdir("inputs")
    for i in range(3):
        np.save(f"inputs/{i}.npy", np.array([[i, 1.0, -1.0]], dtype=np.float32))
    Path("a.txt").write_text("the cat sat on the\nthe cat ran\n")
    Path("b.txt").write_text("the dog sat on the\nthe dog ran\n")
    sae = Path("sae")
    sae.mkdir()
    (sae / "cfg.json").write_text(json.dumps({"d_in": 64, "d_sae": 8, "architecture": "standard"}))
    torch.manual_seed(3)
    save_file({"W_enc": torch.randn(64, 8), "b_enc": torch.zeros(8),
               "W_dec": torch.randn(8, 64), "b_dec": torch.zeros(64)},
              str(sae / "sae_weights.safetensors"))
    return tmp_path


def _refused(capsys, argv: list[str], victim: str, what: str, talk: int = 0,
             named: str | None = None) -> None:
    """``talk``: the lines the command says on stderr before the error (what it runs);
    ``named``: the input's name as the command line gave it (default ``victim``)."""
    before = Path(victim).read_bytes()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 + talk, err
    error = err.splitlines()[-1]
    assert error.startswith("hookscope: error:") and "would overwrite" in error, err
    assert what in error and f"reads ('{named or victim}')" in error, err
    assert Path(victim).read_bytes() == before


TRUSTED = ["--trust-code"]  # net.py is this test's own file
SWEEP = ["sweep", "net.py:build", *TRUSTED, "--over", "f=1,2"]


def test_a_sweep_never_replaces_its_vector_file(files, capsys):
    _refused(capsys, [*SWEEP, "--intervene", "0=add:v:{f}", "--vector", "v=v.npy",
                      "--csv", "v.npy"], "v.npy", "the vector file")


def test_links_to_a_vector_file_are_that_file(files, capsys):
    os.symlink("v.npy", "soft.npy")
    _refused(capsys, [*SWEEP, "--intervene", "0=add:v:{f}", "--vector", "v=v.npy",
                      "--csv", "soft.npy"], "v.npy", "the vector file")
    os.link("v.npy", "hard.npy")
    _refused(capsys, [*SWEEP, "--intervene", "0=add:v:{f}", "--vector", "v=soft.npy",
                      "--csv", "hard.npy"], "v.npy", "the vector file", named="soft.npy")


def test_a_sweep_never_replaces_a_templates_patch_source(files, capsys):
    _refused(capsys, ["sweep", "net.py:build", *TRUSTED, "--over", "layer=0,1",
                      "--intervene", "{layer}=patch:src.npy", "--csv", "src.npy"],
             "src.npy", "a source input file")


def test_a_source_named_by_a_later_cell_is_refused_before_anything_runs(files, capsys):
    # The second cell reads other.npy: every cell's template is filled in before the first
    # forward, so the output is refused with nothing run (no announcement on stderr).
    _refused(capsys, ["sweep", "net.py:build", *TRUSTED, "--over", "s=src.npy,other.npy",
                      "--intervene", "0=patch:{s}", "--csv", "other.npy"],
             "other.npy", "a source input file")


@pytest.mark.parametrize("over", [["layer=0,1"], ["s=src.npy,other.npy", "--over", "layer=0"]],
                         ids=["fixed source", "source axis"])
def test_a_ray_sweep_never_replaces_a_templates_patch_source(files, capsys, over):
    # The model and the templates' files are read on the Ray workers, where this process's
    # registry never sees them: the templates are read here, and Ray never starts.
    tpl = "{layer}=patch:src.npy" if over == ["layer=0,1"] else "{layer}=patch:{s}"
    victim = "src.npy" if over == ["layer=0,1"] else "other.npy"
    import ray  # noqa: F401  (the --ray flags need it installed; it must not start)
    _refused(capsys, ["sweep", "net.py:build", *TRUSTED, "--over", *over, "--intervene", tpl,
                      "--ray", "local", "--ray-workers", "1", "--csv", victim],
             victim, "a source input file")
    assert not ray.is_initialized()


def test_a_ray_sweep_never_replaces_a_file_of_its_input_set(files, capsys):
    # The set's inputs are read on the Ray workers: the set is declared here, and Ray
    # never starts.
    import ray  # noqa: F401  (the --ray flags need it installed; it must not start)
    _refused(capsys, ["sweep", "net.py:build", *TRUSTED, "--inputs", "inputs", "--over",
                      "f=0.5,2", "--intervene", "0=scale:{f}", "--ray", "local",
                      "--ray-workers", "1", "--csv", "inputs/1.npy"],
             "inputs/1.npy", "the input folder", named="inputs")
    assert not ray.is_initialized()


def test_a_scan_never_replaces_its_patch_source(files, capsys):
    _refused(capsys, ["scan", "net.py:build", *TRUSTED, "--inputs", "inputs",
                      "--intervene", "0=patch:src.npy", "--csv", "src.npy"],
             "src.npy", "a source input file")


def test_a_scan_never_replaces_a_file_of_its_input_folder(files, capsys):
    _refused(capsys, ["scan", "net.py:build", *TRUSTED, "--inputs", "inputs",
                      "--csv", "inputs/1.npy"], "inputs/1.npy", "the input folder",
             named="inputs")


def test_a_sweep_never_replaces_a_diff_vectors_prompt_set(files, capsys):
    _refused(capsys, ["sweep", "demo:lm", "--over", "f=1,2", "--intervene",
                      "blocks.0=add:v:{f}", "--vector", "v=diff:a.txt|b.txt", "--csv", "a.txt"],
             "a.txt", "the prompt-set file")


def test_a_run_never_replaces_a_diff_vectors_prompt_set(files, capsys):
    _refused(capsys, ["run", "demo:lm", "--intervene", "blocks.0=add:v:1", "--vector",
                      "v=diff:a.txt|b.txt", "--save-json", "b.txt"], "b.txt",
             "the prompt-set file")


def test_a_run_never_replaces_an_sae_folders_weights(files, capsys):
    _refused(capsys, ["run", "demo:lm", "--sae", "blocks.0=sae", "--capture", "blocks.0",
                      "--save-captures", "sae/sae_weights.safetensors"],
             "sae/sae_weights.safetensors", "the SAE folder", named="sae")
    _refused(capsys, ["run", "demo:lm", "--sae", "blocks.0=sae", "--save-json", "sae/cfg.json"],
             "sae/cfg.json", "the SAE folder", named="sae")


def test_an_ordinary_output_beside_the_inputs_is_written(files, capsys):
    assert main([*SWEEP, "--intervene", "0=add:v:{f}", "--vector", "v=v.npy",
                 "--csv", "grid.csv"]) == 0
    assert Path("grid.csv").read_text().count("\n") == 3  # a header and two cells
    assert main(["run", "demo:lm", "--sae", "blocks.0=sae", "--capture", "blocks.0",
                 "--save-captures", "caps.safetensors"]) == 0
    capsys.readouterr()


# -- the window: its exports never replace a file its session read --------------------------

def test_the_window_never_exports_over_a_file_its_session_read(make_window, qtbot, files):
    from hookscope.app.export_actions import export_captures, export_script

    np.save("vec.npy", np.linspace(-1, 1, 64, dtype=np.float32))
    win = make_window(["demo:lm", "--capture", "blocks.0", "--intervene", "blocks.0=add:v:1",
                       "--vector", "v=vec.npy"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    # read as the window opened: recorded in its session, though no export names --vector
    assert any(path.name == "vec.npy" for _, path in win.session.read_files)
    win.session.attach_sae("blocks.0", "sae")
    before = {name: Path(name).read_bytes() for name in ("vec.npy", "sae/sae_weights.safetensors")}
    assert export_script(win.session, win.ui, "vec.npy") is None
    assert "would overwrite the vector file the open model reads" in win.error_text()
    assert export_captures(win.session, win.ui, "sae/sae_weights.safetensors") is None
    assert "would overwrite the SAE" in win.error_text()
    # a plot's own export (its context menu) asks the window that holds it
    from hookscope.core import HookscopeError
    from hookscope.widgets.output_guard import refuse_output

    plot = next(iter(win.panel.panels().values())).view_tools.widget
    with pytest.raises(HookscopeError, match="the plot 'vec.npy' would overwrite the vector file"):
        refuse_output(plot, "the plot", "vec.npy")
    refuse_output(plot, "the plot", "view.png")  # a new file: fine
    assert {name: Path(name).read_bytes() for name in before} == before
    assert export_captures(win.session, win.ui, "caps.npz") is not None  # still usable


def test_a_screenshot_never_replaces_the_image_it_shows(qapp, files, capsys):
    from PIL import Image

    from hookscope.app.launch import gui_main

    Image.new("L", (8, 8), 200).save("digit.png")
    before = Path("digit.png").read_bytes()
    assert gui_main(["demo:cnn", "--input", "digit.png", "--screenshot", "digit.png"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--screenshot 'digit.png' would overwrite the input file" in err
    assert Path("digit.png").read_bytes() == before


# -- a live session's files: the three land together or not at all -------------------------

def _tiny_session():
    from torch import nn

    from hookscope.core import Session

    return Session.from_module(nn.Sequential(nn.Linear(3, 2)), torch.ones(1, 3), timeout_s=60)


def test_a_session_file_that_cannot_be_written_leaves_no_weights_or_input(tmp_path):
    from hookscope.core import HookscopeError

    s = _tiny_session()
    try:
        (tmp_path / "out.hookscope.json").mkdir()  # the session file's name is taken by a folder
        with pytest.raises(HookscopeError, match="nothing was written"):
            s.save(tmp_path / "out.hookscope.json", weights=True)
        assert [p.name for p in tmp_path.iterdir()] == ["out.hookscope.json"]  # no temporaries
    finally:
        s.close()


def test_a_session_that_cannot_be_serialised_leaves_the_old_files_untouched(tmp_path):
    from hookscope.core import HookscopeError

    s = _tiny_session()
    try:
        old = {name: name.encode() for name in ("v.weights.pt", "v.input.pt")}
        for name, data in old.items():
            (tmp_path / name).write_bytes(data)
        deep: list = []
        for _ in range(100_000):  # a view nested far too deep to write
            deep = [deep]
        s.view["deep"] = deep
        with pytest.raises(HookscopeError, match="nested too deeply"):
            s.save(tmp_path / "v.hookscope.json", weights=True)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old
    finally:
        s.close()


def test_a_session_records_the_files_its_runner_opens(files):
    from hookscope.core import Session

    np.save("x.npy", np.array([[0.5, 1.0, -1.0]], dtype=np.float32))
    s = Session.load("demo:clamp", input_text="x.npy", timeout_s=60)
    try:
        s.run(timeout_s=60)
        assert s.read_files.clash("x.npy") == ("the input file", Path("x.npy"))
        os.link("x.npy", "same.npy")
        assert s.read_files.clash("same.npy") is not None  # a hard link is the file
        assert s.read_files.clash("other.npy") is None
    finally:
        s.close()
