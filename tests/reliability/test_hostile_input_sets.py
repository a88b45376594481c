"""Input sets as an attacker writes them: ``--inputs`` (and ``open_inputs``) must never
run code from a file, hang on a name that is not a file, walk a symlink loop forever,
hold a huge file in memory, or let a CSV write clobber a file by accident.

Each case is refused in one line that says what to do (the CLI: status 2), or, where
the file is merely large, read lazily within a small memory bound."""

from __future__ import annotations

import json
import os
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from catalogue_files import png_header
from hostile_files import torch_save_payload
from hookscope.app.cli import main
from hookscope.core import InputError, load_model
from hookscope.core.analyses import ScanRequest, scan
from hookscope.core.dataset import open_inputs

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["scan", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line_refusal(rc: int, err: str, *words: str) -> None:
    assert rc == 2, err
    lines = err.splitlines()
    # the refusal is one line, last; before it at most the scan's announcement
    assert lines[-1].startswith("hookscope: error: ") and len(lines) <= 2, err
    assert all(line.startswith("hookscope: ") for line in lines), err
    for w in words:
        assert w in err, err


def test_a_pickle_payload_in_a_pt_batch_never_runs(tmp_path, capsys):
    marker = tmp_path / "ran"
    f = tmp_path / "batch.pt"
    f.write_bytes(torch_save_payload(marker))
    with pytest.raises(InputError, match="weights_only"):
        open_inputs(f)
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(f))
    _one_line_refusal(rc, err, "weights_only")
    assert not marker.exists()


def _safetensors_with_header(header: bytes, claimed_len: int | None = None, body: bytes = b"") -> bytes:
    n = len(header) if claimed_len is None else claimed_len
    return struct.pack("<Q", n) + header + body


@pytest.mark.timeout(60)
@pytest.mark.parametrize("data", [
    _safetensors_with_header(b"{}", claimed_len=1 << 60),      # a header "of an exabyte"
    _safetensors_with_header(json.dumps({"inputs": {"dtype": "F32", "shape": [1 << 40, 8],
                                                    "data_offsets": [0, 32 << 40]}}).encode(),
                             body=b"\0" * 64),                   # a tensor bigger than the file
    _safetensors_with_header(json.dumps({"inputs": {"dtype": "F32", "shape": [2, 2],
                                                    "data_offsets": [0, 16]}}).encode()),
    _safetensors_with_header(b"{" * 50_000, body=b""),           # nested until the parser gives up
], ids=["huge-header-length", "tensor-beyond-the-file", "truncated", "deep-header"])
def test_a_lying_safetensors_header_is_refused(tmp_path, capsys, data):
    f = tmp_path / "batch.safetensors"
    f.write_bytes(data)
    with pytest.raises(InputError):
        open_inputs(f)
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(f))
    _one_line_refusal(rc, err)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".pt", ".safetensors", ""])
@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_a_fifo_or_dev_zero_as_the_inputs_file_is_refused_at_once(tmp_path, capsys, kind, suffix):
    f = tmp_path / f"inputs{suffix}"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f.symlink_to("/dev/zero")
    t0 = time.monotonic()
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(f))
    _one_line_refusal(rc, err, "not a regular file")
    assert time.monotonic() - t0 < 10
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", "/dev/zero")
    _one_line_refusal(rc, err, "character device")


@pytest.mark.timeout(30)
def test_symlink_loops_in_an_image_folder_end(tmp_path):
    root = tmp_path / "set"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8), np.uint8), "L").save(root / cls / "x.png")
    (root / "a" / "self").symlink_to(root / "a")        # a folder that holds itself
    (root / "b" / "up").symlink_to(root)                # a folder that holds its parent
    (root / "b" / "dangling.png").symlink_to(tmp_path / "gone.png")
    (root / "a" / "zero.png").symlink_to("/dev/zero")   # an image name that is a device
    s = open_inputs(root)
    assert s.class_names == ["a", "b"]
    names = [s.describe(i) for i in range(len(s))]
    # each image once: the loops are entered at most once and add nothing new
    assert names == ["a/x.png", "a/zero.png", "b/dangling.png", "b/x.png"]
    lm = load_model("demo:cnn")
    zero = names.index("a/zero.png")
    with pytest.raises(InputError, match="not a regular file"):
        s.item(zero, lm.example_input)


@pytest.mark.timeout(120)
def test_ten_million_lines_are_read_lazily_in_bounded_memory(tmp_path):
    f = tmp_path / "many.txt"
    with open(f, "wb") as out:
        block = b"".join(b"p%d\n" % i for i in range(10_000))
        for _ in range(1000):
            out.write(block)
    tracemalloc.start()
    try:
        s = open_inputs(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(s) == 10_000_000
    assert peak < 32 << 20, f"indexing held {peak} bytes"  # the file is 69 MB
    assert s.text(9_999_999) == "p9999" and s.text(12_345) == "p2345"
    lm = load_model("demo:lm")
    res = scan(lm, ScanRequest(s, capture=("blocks.0",), limit=5))
    assert len(res.rows) == 5


@pytest.mark.timeout(60)
def test_a_decompression_bomb_image_is_refused_not_decoded(tmp_path, capsys):
    (tmp_path / "set" / "bomb").mkdir(parents=True)
    (tmp_path / "set" / "bomb" / "big.png").write_bytes(png_header(200_000, 200_000))
    s = open_inputs(tmp_path / "set")  # listing reads no pixels
    lm = load_model("demo:cnn")
    with pytest.raises(InputError, match="decompression-bomb|too large|budget"):
        s.item(0, lm.example_input)
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(tmp_path / "set"))
    _one_line_refusal(rc, err, "input 0")


@pytest.mark.parametrize("data, words", [
    (b"caf\xe9 au lait\n", ["UTF-8", "line 1"]),
    (b"ok\nfine\n\xff\xfe\x00bad\n", ["UTF-8", "line 3"]),
    (b"ends inside \xe2\x82", ["UTF-8"]),
])
def test_non_utf8_text_is_refused_with_its_line(tmp_path, capsys, data, words):
    f = tmp_path / "p.txt"
    f.write_bytes(data)
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(f))
    _one_line_refusal(rc, err, *words)


def test_a_long_line_and_deep_json_are_refused(tmp_path, capsys):
    f = tmp_path / "p.txt"
    f.write_bytes(b"a" * (2 << 20) + b"\n")
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(f))
    _one_line_refusal(rc, err, "longer than")
    j = tmp_path / "s.jsonl"
    j.write_text("[" * 100_000 + "\n")
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(j))
    _one_line_refusal(rc, err, "line 1", "JSON")


def test_csv_never_clobbers_an_input_or_a_file_on_failure(tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("the cat\nthe dog\n")
    before = prompts.read_bytes()
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(prompts), "--csv", str(prompts))
    _one_line_refusal(rc, err, "--csv")
    assert prompts.read_bytes() == before
    # a scan that fails half-way leaves an existing CSV whole (it is written only at the end,
    # to a temporary file renamed over it)
    out = tmp_path / "effect.csv"
    out.write_text("precious\n")
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"text": "the cat"}\n{"text": "a dog"}\nnot json\n')
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(bad), "--csv", str(out))
    _one_line_refusal(rc, err, "line 3")
    assert out.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name] == []


def test_csv_cells_that_would_be_formulas_are_quoted(tmp_path, capsys):
    f = tmp_path / "s.jsonl"
    f.write_text('{"text": "=HYPERLINK(\\"x\\")", "label": "e"}\n{"text": "@cmd", "label": "+"}\n')
    out = tmp_path / "e.csv"
    rc, _, err = _cli(capsys, "demo:lm", "--inputs", str(f), "--csv", str(out))
    assert rc == 0, err
    import csv

    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[1][1].startswith("'=") and rows[2][1] == "'@cmd" and rows[2][2] == "'+"


def test_a_pt_batch_over_the_input_budget_is_refused_before_loading(tmp_path, capsys):
    f = tmp_path / "b.pt"
    torch.save(torch.zeros(64, 1, 8, 8), f)
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(f), "--max-input-bytes", "1000")
    _one_line_refusal(rc, err, "budget")
    save_file({"inputs": torch.zeros(64, 1, 8, 8)}, str(tmp_path / "b.safetensors"))
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(tmp_path / "b.safetensors"),
                      "--max-input-bytes", "1000")
    _one_line_refusal(rc, err, "budget")


def test_an_image_folder_of_too_many_entries_is_refused(tmp_path, monkeypatch):
    from hookscope.core.dataset import input_sets

    monkeypatch.setattr(input_sets, "MAX_FILES", 5)
    for i in range(8):
        Image.fromarray(np.zeros((2, 2), np.uint8), "L").save(tmp_path / f"{i}.png")
    with pytest.raises(InputError, match="more than 5"):
        open_inputs(tmp_path)
    sub = tmp_path / "deep"
    for i in range(3):
        (sub / f"c{i}").mkdir(parents=True)
        for j in range(2):
            Image.fromarray(np.zeros((2, 2), np.uint8), "L").save(sub / f"c{i}" / f"{j}.png")
    with pytest.raises(InputError, match="more than 5"):
        open_inputs(sub)


@pytest.mark.parametrize("argv, words", [
    (["--budget", "0"], "budget"), (["--budget", "lots"], "size"),
    (["--budget", "99999999999EiB"], "size"), (["--limit", "-3"], "--limit"),
    (["--top-k", "-1"], "--top-k"), (["--unit", "conv2:1e99"], "LAYER:INDEX"),
    (["--unit", "conv2:" + "9" * 40], "out of range"),
])
def test_scan_options_out_of_range_are_one_line(capsys, argv, words):
    rc, _, err = _cli(capsys, "demo:cnn", "--inputs", str(DIGITS), "--limit", "3", *argv)
    _one_line_refusal(rc, err, words)
