"""Hostile files: nothing Hookscope opens runs code from the file unless the user trusts it.

Each payload would create a marker file when unpickled; every case asserts the
marker never appears, and that the refusal is one line telling what to do.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import HookscopeError, SpecError, load_model, parse_input
from hookscope.core.model.weights import read_state_dict

import hostile_files as hf

PT2_CASES = {**hf.HOSTILE_PT2, "native library": lambda tmp, marker: hf.pt2_native_library(tmp)}


@pytest.mark.parametrize("case", sorted(PT2_CASES))
def test_hostile_pt2_is_refused_from_the_cli_without_running_it(case, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    path = PT2_CASES[case](tmp_path, marker)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: ")
    assert "--trust-code" in err and "Traceback" not in err
    assert not marker.exists()


@pytest.mark.parametrize("case", sorted(hf.HOSTILE_PT2))
def test_hostile_pt2_is_refused_by_the_core_api(case, tmp_path):
    marker = tmp_path / "MARKER"
    with pytest.raises(SpecError, match="trust"):
        load_model(str(hf.HOSTILE_PT2[case](tmp_path, marker)))
    assert not marker.exists()


def test_trust_pickle_reaches_the_pt2_loader_from_the_cli(tmp_path, capsys):
    # With the flag, torch's own loader runs: the payload in the example inputs fires.
    marker = tmp_path / "MARKER"
    path = hf.pt2_pickled_sample_inputs(tmp_path, marker)
    main(["run", str(path), "--trust-pickle"])
    assert marker.exists()


def test_a_genuine_pt2_still_loads_and_runs(tmp_path, capsys):
    path = hf.genuine_pt2(tmp_path / "net.pt2")
    lm = load_model(str(path))
    assert lm.example_input.shape == (1, 3)
    assert main(["run", str(path), "--capture", "0"]) == 0
    assert capsys.readouterr().err == ""


def test_hostile_pt2_in_the_window_shows_the_banner_and_runs_nothing(window, qtbot, tmp_path):
    marker = tmp_path / "MARKER"
    path = hf.pt2_opaque_constant(tmp_path, marker)
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as blocker:
        window.load(str(path))
    assert "trust" in blocker.args[0].lower()
    assert not marker.exists()
    assert window.loaded.spec == "demo:clamp"  # the open model stays


def test_corrupt_pt2_gives_one_line_and_no_torch_log(tmp_path, capfd):
    genuine = hf.genuine_pt2(tmp_path / "g.pt2").read_bytes()
    for name, data in (("truncated.pt2", genuine[: len(genuine) // 2]), ("text.pt2", b"hello\n")):
        (tmp_path / name).write_bytes(data)
        for extra in ([], ["--trust-pickle"]):
            assert main(["run", str(tmp_path / name), *extra]) == 2
            err = capfd.readouterr().err
            assert err.count("\n") == 1, err
            assert name in err


# --- pickles elsewhere: weights, input files --------------------------------------------------

def _evil_torch_file(path, marker):
    path.write_bytes(hf.torch_save_payload(marker))
    return path


def test_pickled_weights_and_pt_inputs_are_read_weights_only(tmp_path):
    marker = tmp_path / "MARKER"
    evil = _evil_torch_file(tmp_path / "w.pt", marker)
    with pytest.raises(SpecError, match="weights_only"):
        read_state_dict(evil)
    with pytest.raises(HookscopeError, match="weights_only"):
        parse_input(str(evil))
    assert not marker.exists()


def test_object_npy_is_refused_without_unpickling(tmp_path):
    marker = tmp_path / "MARKER"
    path = tmp_path / "obj.npy"
    arr = np.empty(1, dtype=object)
    arr[0] = hf.MarkerPayload(marker)
    np.save(path, arr, allow_pickle=True)
    with pytest.raises(HookscopeError, match="pickles"):
        parse_input(str(path))
    assert not marker.exists()


def test_full_pickle_model_needs_trust(tmp_path):
    marker = tmp_path / "MARKER"
    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps(hf.MarkerPayload(marker)))
    with pytest.raises(SpecError, match="--trust-code"):
        load_model(str(path))
    assert not marker.exists()


# --- images: only the formats Hookscope means -------------------------------------------------

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n0 0 moveto showpage\n"


def test_postscript_named_png_never_reaches_ghostscript(tmp_path, monkeypatch):
    from PIL import EpsImagePlugin, Image

    calls = []
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *a, **k: calls.append(a))
    path = tmp_path / "photo.png"
    path.write_bytes(EPS)
    # The probe works: PIL left to itself picks the PostScript decoder and calls Ghostscript.
    with Image.open(path) as img:
        assert img.format == "EPS"
        with pytest.raises(Exception):
            img.load()
    assert calls
    calls.clear()
    with pytest.raises(HookscopeError, match="not a PNG, JPEG, BMP, GIF, WebP or TIFF"):
        parse_input(str(path))
    assert calls == []


def test_allowed_formats_still_load(tmp_path):
    from PIL import Image

    for suffix, fmt in ((".png", "PNG"), (".jpg", "JPEG"), (".bmp", "BMP"), (".gif", "GIF"),
                        (".webp", "WEBP"), (".tif", "TIFF")):
        path = tmp_path / f"img{suffix}"
        Image.new("RGB", (5, 4), (255, 0, 0)).save(path, format=fmt)
        x = parse_input(str(path))
        assert x.shape == (1, 3, 4, 5)


def test_trust_from_the_window_reaches_the_pt2_loader(window, qtbot, tmp_path):
    # 'Trust this file' in File > Open model sets trust_pickle: torch's own loader then runs.
    marker = tmp_path / "MARKER"
    path = hf.pt2_pickled_sample_inputs(tmp_path, marker)
    window.load(str(path), trust_pickle=True)
    qtbot.waitUntil(marker.exists, timeout=30_000)
    qtbot.waitUntil(window.is_idle, timeout=30_000)


def test_the_second_line_of_defence_refuses_even_entries_the_check_would_miss(tmp_path):
    # Skip check_archive: the guarded load alone must still refuse every payload.
    import io

    from hookscope.core.model.exported_load import _weights_only_everywhere

    for name, make in hf.HOSTILE_PT2.items():
        marker = tmp_path / f"MARKER-{name.replace(' ', '_')}"
        data = make(tmp_path, marker).read_bytes()
        try:
            with _weights_only_everywhere():
                torch.export.load(io.BytesIO(data))
        except Exception:
            pass
        assert not marker.exists(), name
    import pickle as real_pickle
    from torch.export.pt2_archive import _package

    assert _package.pickle is real_pickle  # restored afterwards
