"""The registry of files a command reads (core/base/read_files.py): by identity, filled by the
openers of the thread that records into it, and one per owner, never process-wide."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from hookscope.core import HookscopeError
from hookscope.core.base import ReadFiles, write_text
from hookscope.core.base.regular_file import read_regular


def test_a_file_opened_while_recording_is_that_file_by_any_name(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("x")
    reads = ReadFiles()
    with reads.recording():
        read_regular(f, 100, "labels file")
    os.symlink(f, tmp_path / "soft.txt")
    os.link(f, tmp_path / "hard.txt")
    for name in ("x.txt", "soft.txt", "hard.txt", "../" + tmp_path.name + "/x.txt"):
        assert reads.clash(tmp_path / name) == ("the labels file", f)
    assert reads.clash(tmp_path / "other.txt") is None
    with pytest.raises(HookscopeError, match=r"--out .* would overwrite the labels file this"):
        reads.refuse([("--out", tmp_path / "hard.txt")])


def test_nothing_is_recorded_outside_recording_nor_in_another_registry_or_thread(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("x")
    mine, theirs = ReadFiles(), ReadFiles()
    read_regular(f, 100)  # no registry records: nothing to remember
    with theirs.recording():
        pass
    with mine.recording():
        worker = threading.Thread(target=read_regular, args=(f, 100))
        worker.start()
        worker.join()  # another thread's opener records into that thread's registry (none)
    assert len(mine) == 0 and len(theirs) == 0
    with mine.recording():
        read_regular(f, 100)
    assert len(mine) == 1 and len(theirs) == 0


def test_a_write_is_refused_over_a_file_read_while_recording(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("keep")
    with ReadFiles().recording():
        read_regular(f, 100, "input file")
        with pytest.raises(HookscopeError, match="would overwrite the input file"):
            write_text(tmp_path / "x.txt", "lost")
        write_text(tmp_path / "y.txt", "fine")
    assert f.read_text() == "keep" and (tmp_path / "y.txt").read_text() == "fine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt", "y.txt"]  # no temporary


def test_the_files_of_a_recorded_folder_are_counted_by_the_folder(tmp_path):
    d = tmp_path / "inputs" / "cats"
    d.mkdir(parents=True)
    for i in range(50):
        (d / f"{i}.txt").write_text(str(i))
    reads = ReadFiles()
    reads.add("the input file", tmp_path / "inputs")
    with reads.recording():
        for i in range(50):
            read_regular(d / f"{i}.txt", 100)
    assert len(reads) == 1  # the folder, once
    assert reads.clash(d / "7.txt") == ("the input folder", tmp_path / "inputs")
    assert reads.clash(d / "new.txt") is None  # a new file in it is no input
    assert reads.clash(Path(tmp_path / "inputs")) is not None


def test_a_symlink_in_a_recorded_folder_to_a_file_elsewhere_records_that_file(tmp_path):
    (tmp_path / "inputs").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    os.symlink(outside, tmp_path / "inputs" / "link.txt")
    reads = ReadFiles()
    reads.add("the input file", tmp_path / "inputs")
    with reads.recording():
        read_regular(tmp_path / "inputs" / "link.txt", 100, "input file")
    assert reads.clash(outside) is not None

