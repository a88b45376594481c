"""A GPT-2 (small config, built here) loaded by ``from_pretrained`` with a device map
that puts part of it on disk gives the in-memory model's outputs and captures."""

import pytest
import torch

from hookscope.core import Plan, compare, module_tree
from hookscope.core.model.dispatch import device_map_options, from_pretrained_kwargs

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    cfg = transformers.GPT2Config(n_layer=3, n_embd=64, n_head=2, vocab_size=97, n_positions=16,
                                  attn_implementation="eager")
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("gpt2")
    transformers.GPT2LMHeadModel(cfg).eval().save_pretrained(folder)
    return folder


def test_gpt2_partly_on_disk_matches_in_memory(gpt2_dir, tmp_path):
    mem = transformers.GPT2LMHeadModel.from_pretrained(gpt2_dir).eval()
    # A block is ~200 KB of float32: 450 KB of CPU keeps the embeddings and a block or two.
    opts = device_map_options("auto", "cpu=450KB", str(tmp_path / "off"))
    split = transformers.GPT2LMHeadModel.from_pretrained(gpt2_dir, **from_pretrained_kwargs(opts)).eval()
    where = split.hf_device_map
    assert "disk" in where.values() and "cpu" in where.values()
    ids = torch.tensor([[5, 17, 3, 60, 2, 9]])
    plan = Plan(capture=("transformer.h.0.mlp", "transformer.h.2.mlp", "transformer.h.2.attn"),
                clamp={"transformer.h.2.mlp": (-0.002, 0.002)})
    got = compare(split, {"input_ids": ids}, plan)
    ref = compare(mem, {"input_ids": ids}, plan)
    assert torch.allclose(got.output_with["logits"], ref.output_with["logits"], atol=1e-6)
    assert torch.allclose(got.output_without["logits"], ref.output_without["logits"], atol=1e-6)
    assert got.outputs_differ and ref.outputs_differ
    for path in plan.capture:
        g, r = got.captures[path][0], ref.captures[path][0]
        assert torch.allclose(g.tensor, r.tensor, atol=1e-6)
    clamped = got.captures["transformer.h.2.mlp"][0]
    assert torch.equal(clamped.tensor, clamped.pre_tensor.clamp(-0.002, 0.002))
    tree = module_tree(split)
    for path, dev in where.items():
        assert tree.find(path).device == dev
