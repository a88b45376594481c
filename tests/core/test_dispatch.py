"""Models split by accelerate (device map, CPU and disk offload) run like models in memory.

Every test compares the dispatched model against the same model fully in
memory, run by the same core functions: outputs, captures (before and after
a clamp), statistics and the tree's devices.
"""

import gc

import pytest
import torch

from hookscope.core import DeviceError, Plan, SpecError, compare, load_model, module_tree
from hookscope.core.model.dispatch import (device_map_options, from_pretrained_kwargs,
                                           layer_devices, load_dispatched, parse_max_memory,
                                           parse_size)

import scale_models

pytest.importorskip("accelerate")

SPEC = f"{scale_models.PATH}:mlp_stack"
# Each block holds 4.2 KB of weights: 12 KB of CPU puts the first blocks in memory, the rest on disk.
TIGHT = "cpu=12KB"


def save_weights(tmp_path, suffix: str) -> str:
    module, _ = scale_models.mlp_stack()
    path = tmp_path / f"w{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(module.state_dict(), str(path), metadata={"format": "pt"})
    else:
        torch.save(module.state_dict(), path)
    return str(path)


def plan_over_both(dmap) -> Plan:
    """Capture every block, clamp one layer in memory and one whose weights are on disk."""
    on_disk = sorted(k for k, v in dmap.items() if v == "disk")
    in_mem = sorted(k for k, v in dmap.items() if v == "cpu")
    assert on_disk and in_mem  # the test means a split model
    blocks = [str(i) for i in range(scale_models.BLOCKS + 1)]
    return Plan(capture=(*blocks, f"{on_disk[0]}.lin"),
                clamp={f"{in_mem[0]}.lin": (-0.2, 0.2), f"{on_disk[0]}.lin": (-0.1, 0.05)})


def assert_same_results(got, ref):
    assert torch.equal(got.output_without, ref.output_without)
    assert torch.equal(got.output_with, ref.output_with)
    assert got.outputs_differ and got.max_abs_diff == ref.max_abs_diff
    assert list(got.captures) == list(ref.captures)
    for path, recs in ref.captures.items():
        assert len(got.captures[path]) == len(recs) == 1
        g, r = got.captures[path][0], recs[0]
        for a, b in ((g.tensor, r.tensor), (g.pre_tensor, r.pre_tensor)):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.device.type == "cpu" and torch.equal(a, b)
        assert (g.stats.min, g.stats.max, g.stats.mean, g.stats.std) == \
            (r.stats.min, r.stats.max, r.stats.mean, r.stats.std)
        assert g.stats.fraction_clamped == r.stats.fraction_clamped
        assert (g.stats.hist_counts == r.stats.hist_counts).all()


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
@pytest.mark.parametrize("keep", [True, False], ids=["tensors", "stats-only"])
def test_partly_on_disk_gives_the_in_memory_results(tmp_path, suffix, keep):
    weights = save_weights(tmp_path, suffix)
    mem = load_model(SPEC, weights)
    lm = load_dispatched(SPEC, weights, device_map_options("auto", TIGHT, str(tmp_path / "off")))
    dmap = lm.module.hf_device_map
    disk_block = lm.module.get_submodule(next(k for k, v in dmap.items() if v == "disk"))
    # Offloaded weights are really not in memory between forwards.
    assert all(p.device.type == "meta" for p in disk_block.parameters())
    plan = Plan(**{**plan_over_both(dmap).__dict__, "keep_tensors": keep})
    hooks_before = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in lm.module.modules())
    got = compare(lm.module, lm.example_input, plan, should_stop=lambda: False)
    ref = compare(mem.module, mem.example_input, plan, should_stop=lambda: False)
    assert_same_results(got, ref)
    if keep:  # the clamp landed on the disk layer's output, as a hand-written hook does it
        lin = plan_over_both(dmap).clamp
        path, (lo, hi) = next((p, b) for p, b in lin.items() if p.startswith(tuple(
            k for k, v in dmap.items() if v == "disk")))
        rec = got.captures[path][0]
        assert torch.equal(rec.tensor, rec.pre_tensor.clamp(lo, hi))
    after = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in lm.module.modules())
    assert after == hooks_before
    assert all(p.device.type == "meta" for p in disk_block.parameters())


def test_dispatch_of_a_built_model_without_weights_file(tmp_path):
    mem = load_model(SPEC)
    lm = load_dispatched(SPEC, None, device_map_options(None, TIGHT, str(tmp_path / "off")))
    assert set(lm.module.hf_device_map.values()) == {"cpu", "disk"}
    plan = plan_over_both(lm.module.hf_device_map)
    assert_same_results(compare(lm.module, lm.example_input, plan),
                        compare(mem.module, mem.example_input, plan))


def test_tree_shows_where_each_layer_lives(tmp_path):
    lm = load_dispatched(SPEC, save_weights(tmp_path, ".safetensors"),
                         device_map_options("sequential", TIGHT, str(tmp_path / "off")))
    dmap = lm.module.hf_device_map
    tree = module_tree(lm.module)
    for path, where in dmap.items():
        assert tree.find(path).device == where
        assert all(n.device == where for n in tree.find(path).walk())
    assert tree.device == "cpu, disk"
    assert tree.to_dict()["device"] == "cpu, disk"
    mem = module_tree(load_model(SPEC).module)
    assert {n.device for n in mem.walk() if n.params} == {"cpu"}
    assert mem.find("0.act").device is None  # no tensors of its own: it runs where its input is


def test_layer_devices_without_a_map_read_the_parameters():
    module, _ = scale_models.mlp_stack()
    module[1].to(torch.float64)  # dtype only: still the CPU
    module[2].lin.weight = torch.nn.Parameter(torch.empty_like(module[2].lin.weight, device="meta"))
    devs = layer_devices(module)
    assert devs["2.lin"] == "cpu, meta" and devs["2"] == "cpu, meta" and devs["0"] == "cpu"
    assert "0.act" not in devs


def test_not_fitting_without_offload_says_what_to_do(tmp_path):
    with pytest.raises(DeviceError, match="--offload DIR"):
        load_dispatched(SPEC, save_weights(tmp_path, ".safetensors"), device_map_options("auto", TIGHT))


def test_weights_that_do_not_fit_the_model_are_named(tmp_path):
    from safetensors.torch import save_file

    module, _ = scale_models.mlp_stack()
    state = module.state_dict()
    del state["3.lin.bias"]
    save_file(state, str(tmp_path / "bad.safetensors"))
    with pytest.raises(SpecError, match=r"missing keys \['3.lin.bias'\]"):
        load_dispatched(SPEC, str(tmp_path / "bad.safetensors"),
                        device_map_options("auto", TIGHT, str(tmp_path / "off")))


def test_offload_folder_is_fresh_per_model_and_removed_with_it(tmp_path):
    off = tmp_path / "off"
    weights = save_weights(tmp_path, ".safetensors")
    a = load_dispatched(SPEC, weights, device_map_options("auto", TIGHT, str(off)))
    b = load_dispatched(SPEC, weights, device_map_options("auto", TIGHT, str(off)))
    folders = sorted(off.iterdir())
    assert len(folders) == 2 and all(any(f.iterdir()) for f in folders)
    del a, b
    gc.collect()
    assert list(off.iterdir()) == []


def test_sizes_and_memory_limits_parse():
    assert parse_size("2GiB") == 2 * 2**30 and parse_size("1.5 GB") == 1_500_000_000
    assert parse_size("4096") == 4096 and parse_size("12kb") == 12_000
    assert parse_max_memory("cpu=2GiB, disk=10MB") == {"cpu": 2 * 2**30, "disk": 10**7}
    for bad in ("cpu", "gpu=1GB", "cpu=lots", ""):
        with pytest.raises(DeviceError):
            parse_max_memory(bad)
    with pytest.raises(DeviceError, match="auto, balanced, sequential"):
        device_map_options("everywhere")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_a_gpu_limit_without_cuda_is_refused():
    assert parse_max_memory("0=1GB,cuda:1=2GB") == {0: 10**9, 1: 2 * 10**9}
    with pytest.raises(DeviceError, match="names a GPU"):
        device_map_options("auto", "0=1GB")


def test_from_pretrained_kwargs(tmp_path):
    opts = device_map_options(None, "cpu=1GB", str(tmp_path))
    # a model's own code never runs: trust_remote_code is given, False, every time
    assert from_pretrained_kwargs(opts) == {"device_map": "auto", "max_memory": {"cpu": 10**9},
                                            "offload_folder": str(tmp_path),
                                            "trust_remote_code": False}
    assert from_pretrained_kwargs(device_map_options("sequential")) == {
        "device_map": "sequential", "trust_remote_code": False}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_map_auto_on_cuda(tmp_path):
    weights = save_weights(tmp_path, ".safetensors")
    mem = load_model(SPEC, weights)
    lm = load_dispatched(SPEC, weights, device_map_options("auto", "0=12KB,cpu=12KB",
                                                           str(tmp_path / "off")))
    assert 0 in lm.module.hf_device_map.values()
    plan = plan_over_both({k: ("cpu" if v == 0 else v) for k, v in lm.module.hf_device_map.items()})
    got = compare(lm.module, lm.example_input, plan)
    ref = compare(mem.module, mem.example_input, plan)
    assert torch.allclose(got.output_with, ref.output_with, atol=1e-5)


def test_the_dispatching_runner_answers_as_the_local_runner_on_the_in_memory_model(tmp_path):
    import queue

    from hookscope.core.session.dispatch_runner import dispatching_runner
    from hookscope.core.session.runner import Finished, Loaded, LoadRequest, LocalRunner, RunRequest

    weights = save_weights(tmp_path, ".safetensors")
    answers = {"split": queue.Queue(), "mem": queue.Queue()}
    split = dispatching_runner(device_map_options("auto", TIGHT, str(tmp_path / "off")))(
        lambda ev: isinstance(ev, (Loaded, Finished)) and answers["split"].put(ev))
    mem = LocalRunner(lambda ev: isinstance(ev, (Loaded, Finished)) and answers["mem"].put(ev))
    try:
        got, ref = [], []
        for runner, q, out in ((split, answers["split"], got), (mem, answers["mem"], ref)):
            runner.submit(LoadRequest(SPEC, weights))
            loaded = q.get(timeout=60)
            out.append(loaded)
        dmap = got[0].model.module.hf_device_map
        assert got[0].tree.find(next(k for k, v in dmap.items() if v == "disk")).device == "disk"
        plan = plan_over_both(dmap)
        for runner, q, out in ((split, answers["split"], got), (mem, answers["mem"], ref)):
            runner.submit(RunRequest(out[0].model, "example", plan, observe_tree=True))
            out.append(q.get(timeout=60))
        assert_same_results(got[1].result, ref[1].result)
    finally:
        split.close()
        mem.close()


def test_a_patch_lands_on_a_block_whose_weights_are_on_disk(tmp_path):
    from hookscope.core import Patch

    weights = save_weights(tmp_path, ".safetensors")
    mem = load_model(SPEC, weights)
    lm = load_dispatched(SPEC, weights, device_map_options("auto", TIGHT, str(tmp_path / "off")))
    block = max(k for k, v in lm.module.hf_device_map.items() if v == "disk" and k.isdigit())
    src = torch.randn(4, scale_models.WIDTH, generator=torch.Generator().manual_seed(5))
    plan = Plan(capture=(block, "6"), interventions={block: Patch(src)})
    got = compare(lm.module, lm.example_input, plan)
    ref = compare(mem.module, mem.example_input, plan)
    assert torch.equal(got.output_with, ref.output_with) and got.outputs_differ
    with torch.inference_mode():  # by hand: the block's output on the source input
        expected = mem.module[: int(block) + 1](src)
    assert torch.equal(got.captures[block][0].tensor, expected)


def test_timings_wait_for_no_device_when_the_weights_sit_on_the_cpu():
    from hookscope.core.base.devices import accelerator_devices

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    assert accelerator_devices(torch.device("cpu"), model) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_timings_wait_for_every_gpu_the_weights_sit_on():
    from hookscope.core.base.devices import accelerator_devices

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[1].to("cuda:0")  # a device map's later layer on a GPU, the input on the CPU
    assert accelerator_devices(torch.device("cpu"), model) == [torch.device("cuda", 0)]
