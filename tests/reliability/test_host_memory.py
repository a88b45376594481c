"""The memory budget counts a container's limit: the cgroup files are read as data (short,
decimal, under the cgroup mount), and anything else leaves the host's figure standing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from hookscope.core.analyses import fit_plan_to_budget
from hookscope.core.base import host_memory
from hookscope.core.base.host_memory import available_memory, cgroup_room
from hookscope.core import Plan

GIB, MIB = 1 << 30, 1 << 20
HOST = 64 * GIB   # the host's MemAvailable in the fake /proc


def _proc(tmp_path: Path, cgroup_lines: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {HOST // 1024} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup_lines)
    return proc


def _group(folder: Path, limit: str | None, usage: int | None, stat: str = "",
           v1: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if limit is not None:
        (folder / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(limit + "\n")
    if usage is not None:
        (folder / ("memory.usage_in_bytes" if v1 else "memory.current")).write_text(f"{usage}\n")
    (folder / "memory.stat").write_text(stat)


def test_a_v2_limit_leaves_its_room_less_the_reclaimable_cache(tmp_path):
    proc = _proc(tmp_path, "0::/ci/job\n")
    cg = tmp_path / "cg"
    _group(cg / "ci" / "job", str(GIB), 600 * MIB, f"anon 1\ninactive_file {100 * MIB}\n")
    assert available_memory(proc, cg) == GIB - 500 * MIB


def test_the_tightest_limit_above_counts_and_max_means_none(tmp_path):
    proc = _proc(tmp_path, "0::/ci/job\n")
    cg = tmp_path / "cg"
    _group(cg / "ci" / "job", "max", 100 * MIB)
    _group(cg / "ci", str(2 * GIB), GIB)
    assert available_memory(proc, cg) == GIB
    (cg / "ci" / "memory.max").write_text("max\n")
    assert cgroup_room(proc / "self" / "cgroup", cg) is None
    assert available_memory(proc, cg) == HOST


def test_inside_a_container_its_own_group_is_the_mount_root(tmp_path):
    proc = _proc(tmp_path, "0::/\n")
    cg = tmp_path / "cg"
    _group(cg, str(4 * GIB), GIB)
    assert available_memory(proc, cg) == 3 * GIB


def test_v1_reads_the_memory_controller_and_its_huge_limit_is_none(tmp_path):
    proc = _proc(tmp_path, "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n")
    cg = tmp_path / "cg"
    _group(cg / "memory" / "docker" / "abc", str(3 * GIB), 2 * GIB,
           f"cache 5\ntotal_inactive_file {GIB}\n", v1=True)
    assert available_memory(proc, cg) == 2 * GIB
    (cg / "memory" / "docker" / "abc" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert available_memory(proc, cg) == HOST


@pytest.mark.parametrize("limit", ["12abc", "-5", "1e9", "0x40000000", "\u0663" * 3, "9" * 400,
                                   "", " ", "1 2"])
def test_a_limit_that_is_not_a_plain_count_is_ignored(tmp_path, limit):
    proc = _proc(tmp_path, "0::/job\n")
    cg = tmp_path / "cg"
    _group(cg / "job", limit, MIB)
    assert available_memory(proc, cg) == HOST


def test_a_file_too_long_to_be_the_kernels_is_not_read(tmp_path):
    proc = _proc(tmp_path, "0::/job\n")
    cg = tmp_path / "cg"
    _group(cg / "job", str(GIB), MIB)
    (cg / "job" / "memory.max").write_text(str(GIB) + "\n" + "0" * (1 << 20))
    assert available_memory(proc, cg) == HOST
    (proc / "self" / "cgroup").write_text("0::/job\n" * 100_000)   # 800 kB: ignored too
    assert available_memory(proc, cg) == HOST


def test_a_path_that_climbs_out_of_the_mount_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    _group(outside, str(MIB), 0)   # would give a 1 MiB budget if it were read
    cg = tmp_path / "cg"
    cg.mkdir()
    proc = _proc(tmp_path, "0::/../outside\n")
    assert available_memory(proc, cg) == HOST


def test_missing_files_leave_the_host_figure(tmp_path):
    proc = _proc(tmp_path, "garbage line\n0::/nowhere\n")
    assert available_memory(proc, tmp_path / "no-cgroups") == HOST
    (proc / "meminfo").write_text("MemAvailable: lots kB\n")   # unreadable: the OS is asked
    assert available_memory(proc, tmp_path / "no-cgroups") > 0


def test_usage_above_the_limit_leaves_no_room(tmp_path):
    proc = _proc(tmp_path, "0::/job\n")
    cg = tmp_path / "cg"
    _group(cg / "job", str(GIB), 2 * GIB)
    assert available_memory(proc, cg) == 0


def test_this_machine_gives_a_positive_figure_no_larger_than_its_free_memory():
    host = host_memory._host_available(host_memory.PROC)
    assert 0 < available_memory() <= host


def test_the_capture_budget_follows_a_container_limit(tmp_path, monkeypatch):
    """The default budget is half the room under the limit: a plan that fits the host
    but not the container is turned to statistics only, with its note."""
    proc = _proc(tmp_path, "0::/\n")
    cg = tmp_path / "cg"
    _group(cg, str(64 * MIB), 63 * MIB)   # 1 MiB of room: a 512 KiB budget
    monkeypatch.setattr(host_memory, "PROC", proc)
    monkeypatch.setattr(host_memory, "CGROUPS", cg)
    module = nn.Sequential(nn.Linear(256, 1024), nn.ReLU())
    decision = fit_plan_to_budget(module, torch.randn(256, 256), Plan(capture=["0", "1"]))
    assert decision.budget == MIB // 2
    assert decision.note is not None and not decision.plan.keep_tensors
    monkeypatch.setattr(host_memory, "CGROUPS", tmp_path / "no-cgroups")
    assert fit_plan_to_budget(module, torch.randn(256, 256), Plan(capture=["0", "1"])).note is None
