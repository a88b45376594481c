"""Window screenshots of wide activations: GPT-2's MLP (128 tokens × 3072) and a
ViT's MLP (197 tokens × 1536), in the default map and in the norm / top-k views.

    python -m bench.wide_screenshots [--out bench/screenshots]

Both models are built from small configs with random weights (nothing
downloaded; GPT-2 gets a tokenizer trained here) and saved with
``save_pretrained`` to a temporary folder. Random weights give noise without
the outlier units real models are known for, so a few are planted, and said so
in the file names' README lines below: GPT-2 layer 0's MLP units 447 and 2071
have their input weights scaled ×12, and the ViT's layer 0 MLP unit 5 ×1e5
(values over ~4 decades: its panel opens on the log scale by itself).

The default screenshots are taken exactly as a person would
(``hookscope hf:DIR --input ... --capture ... --screenshot FILE``); the other
views through a session file whose view state names the layer's view, as the
window saves it when a person picks one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "core"))  # the tests' local tokenizer builder

_SENTENCES = ["The quick brown fox jumps over the lazy dog",
              "hello world this is a small test of a tiny tokenizer",
              "a cat sat on the mat and the dog sat on the log"] * 3
GPT2_LAYER = "transformer.h.0.mlp.c_fc"
VIT_LAYER = "vit.layers.0.mlp.fc1"


def build_gpt2(folder: Path) -> Path:
    from hf_models import tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tokenizer()
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=768, n_head=12, n_positions=128, vocab_size=len(tok),
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():   # planted outlier units (GPT-2's real MLPs have a few)
        model.transformer.h[0].mlp.c_fc.weight[:, [447, 2071]] *= 12
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def prompt(limit: int = 128) -> str:
    """As many of the sentences as fit GPT-2's ``limit`` positions."""
    from hf_models import tokenizer

    tok = tokenizer()
    text = ""
    for s in _SENTENCES:
        longer = f"{text} {s}".strip()
        if len(tok(longer)["input_ids"]) > limit:
            break
        text = longer
    return text


def build_vit(folder: Path) -> Path:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=384, num_hidden_layers=2, num_attention_heads=6,
                    intermediate_size=1536, image_size=224, patch_size=16, num_labels=10)
    model = ViTForImageClassification(cfg)
    with torch.no_grad():   # one planted heavy unit: values spanning many decades
        model.vit.layers[0].mlp.fc1.weight[5] *= 1e5
    model.save_pretrained(folder)
    return folder


def session_file(path: Path, spec: str, text: str, capture: str, clamp: tuple[float, float],
                 view: str | None) -> Path:
    """A session file as the window writes it, with ``view`` chosen for the layer."""
    from hookscope.core import Plan
    from hookscope.core.session.session_types import Options
    from hookscope.core.session.session_file import FORMAT, VERSION

    plan = Plan(capture=(capture,), clamp={capture: clamp})
    data = {"format": FORMAT, "version": VERSION, "model": {"spec": spec, "weights": None},
            "input": {"text": text, "file": False}, "device": "cpu", "plan": plan.to_dict(),
            "options": dataclasses.asdict(Options()),
            "view": {"layer_views": {capture: {"view": view, "log": None}}}}
    path.write_text(json.dumps(data))
    return path


def shoot(args: list[str], out: Path) -> None:
    cmd = [str(Path(sys.executable).with_name("hookscope")), *args, "--screenshot", str(out),
           "--size", "1400x900"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    shrink(out)
    print(out)


def shrink(path: Path) -> None:
    """A 256-colour palette PNG (a third of the size; the plots stay sharp), where
    Pillow is installed; else the PNG stays as Qt wrote it."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                           dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.wide_screenshots")
    ap.add_argument("--out", default=str(ROOT / "bench" / "screenshots"))
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        gpt2 = build_gpt2(Path(tmp) / "gpt2")
        text = prompt()
        vit = build_vit(Path(tmp) / "vit")
        shoot([f"hf:{gpt2}", "--input", f"text:{text}", "--capture", "transformer.h.*.mlp.c_fc",
               "--clamp", f"{GPT2_LAYER}=-1:1"], out / "gpt2-wide-map.png")
        for view in ("row_norm", "unit_norm", "top_k"):
            s = session_file(Path(tmp) / f"gpt2-{view}.hookscope.json", f"hf:{gpt2}",
                             f"text:{text}", GPT2_LAYER, (-1.0, 1.0), view)
            shoot([str(s)], out / f"gpt2-wide-{view.replace('_', '-')}.png")
        shoot([f"hf:{vit}", "--capture", "vit.layers.*.mlp.fc1",
               "--clamp", f"{VIT_LAYER}=-1:1"], out / "vit-wide-map.png")
        for view in ("row_norm", "top_k"):
            s = session_file(Path(tmp) / f"vit-{view}.hookscope.json", f"hf:{vit}", "example",
                             VIT_LAYER, (-1.0, 1.0), view)
            shoot([str(s)], out / f"vit-wide-{view.replace('_', '-')}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
