"""Load and first-run times of big real architectures through hf: (random weights, nothing downloaded).

    python -m bench.big_models [--json] [--only gpt2,vit,resnet]

Builds each model from its config (GPT-2 small: 12 layers x 768, vocab 50257;
ViT-B/16 at 224 px, 1000 classes; a ResNet-50 layout: bottleneck depths
3-4-6-3, 1000 classes), saves it with ``save_pretrained`` to a temporary
folder, then times what a person waits for: ``load_model("hf:DIR")``, the
module tree, the first comparison (a wildcard capture over every block and
one clamp) and a second one, beside one plain ``inference_mode`` forward
(after a warm-up) for scale. Needs the ``hf`` extra. Not a test: the figures
depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "core"))  # the tests' local tokenizer builder


def build(name: str, folder: Path) -> dict:
    import transformers as tf

    torch.manual_seed(0)
    if name == "gpt2":
        from hf_models import tokenizer

        model = tf.GPT2LMHeadModel(tf.GPT2Config())
        tokenizer().save_pretrained(folder)
        plan = {"capture": ["transformer.h.*.mlp"], "clamp": {"transformer.h.5.mlp": (-0.01, 0.01)}}
    elif name == "vit":
        model = tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000))
        plan = {"capture": ["vit.**.layer*.?", "vit.**.layers.*"],
                "clamp": {"classifier": (-0.1, 0.1)}}
    else:
        model = tf.ResNetForImageClassification(tf.ResNetConfig(num_labels=1000))
        plan = {"capture": ["resnet.encoder.stages.*"], "clamp": {"classifier": (-0.1, 0.1)}}
    model.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    return {"params": params, "plan": plan}


def measure(name: str) -> dict:
    from hookscope.core import Plan, compare, load_model, module_tree
    from hookscope.core.base.errors import PlanError
    from hookscope.core.plan.path_patterns import expand_plan

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        t0 = time.perf_counter()
        info = build(name, folder)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        lm = load_model(f"hf:{folder}")
        load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tree = module_tree(lm.module)
    tree_ms = (time.perf_counter() - t0) * 1e3
    caps = []
    for pattern in info["plan"]["capture"]:
        try:
            caps.append(expand_plan(Plan(capture=[pattern]), lm.module).capture)
        except PlanError:  # the block names differ between transformers versions
            pass
    plan = Plan(capture=tuple(p for c in caps for p in c), clamp=info["plan"]["clamp"],
                keep_tensors=False)
    t0 = time.perf_counter()
    r1 = compare(lm.module, lm.example_input, plan)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r2 = compare(lm.module, lm.example_input, plan)
    second_s = time.perf_counter() - t0
    from hookscope.core.base.call_args import call_model

    with torch.inference_mode():  # the same forward without Hookscope, for scale
        t0 = time.perf_counter()
        call_model(lm.module, lm.example_input)
        plain_ms = (time.perf_counter() - t0) * 1e3

    return {"model": name, "params": info["params"], "modules": sum(1 for _ in tree.walk()),
            "captured_layers": len(plan.capture), "build_save_s": round(build_s, 2),
            "load_s": round(load_s, 2), "tree_ms": round(tree_ms, 1),
            "first_compare_s": round(first_s, 2), "second_compare_s": round(second_s, 2),
            "baseline_forward_ms": round(r1.timings_ms["baseline"], 1),
            "second_baseline_ms": round(r2.timings_ms["baseline"], 1),
            "second_intervened_ms": round(r2.timings_ms["intervened"], 1),
            "plain_forward_ms": round(plain_ms, 1),
            "outputs_differ": r1.outputs_differ}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.big_models")
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", default="gpt2,vit,resnet")
    ns = p.parse_args(argv)
    rows = [measure(n.strip()) for n in ns.only.split(",") if n.strip()]
    if ns.json:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                          "rows": rows}, indent=1))
    else:
        for r in rows:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
