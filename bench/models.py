"""The benchmark's models, built in plain torch with seeded weights (no downloads).

* ``resnet18``: the structure of torchvision's ``resnet18`` (conv1/bn1/relu/
  maxpool/layer1..4/avgpool/fc, BasicBlocks with BatchNorm, ``ReLU(inplace=True)``
  and the residual added in place, ``out += identity``), ~11.7M parameters.
  Its in-place ops are what make plain ``detach()`` captures go stale.
* ``gpt2``: a GPT-2-small-shaped decoder (12 layers, d=768, 12 heads, MLP
  3072, GELU, LayerNorm, causal attention through ``nn.Linear`` and
  ``F.scaled_dot_product_attention``, token and position embeddings, tied
  LM head), ~124M parameters.
* ``resnet50-b1/-b8``, ``vit_b16-b1/-b8`` (:mod:`bench.models_vision`): the
  torchvision layouts of ResNet-50 and ViT-B/16 at 224², batch 1 and 8.
* ``gpt2-b1/-b8``: the GPT-2 shape at batch 1 and 8 (128 tokens).
* the demos, through ``hookscope.core.load_model``.

Every builder returns a :class:`BenchModel` in eval mode. Quick mode shrinks
the input (and the GPT's depth) so the suite finishes in minutes; the label
says exactly what was built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

SEED = 0


@dataclass
class BenchModel:
    """A model ready to benchmark: module (eval), input, and the layers cases use."""

    name: str
    label: str            # what was built, e.g. "ResNet-18, batch 8, 224²"
    module: nn.Module
    inputs: Any
    capture3: tuple[str, ...]   # the "3 chosen layers"
    clamp_path: str             # the layer that gets one clamp
    clamp: tuple[float, float] = (-1.0, 1.0)
    params: int = 0


# -- ResNet-18 ------------------------------------------------------------------
def resnet18(quick: bool = False) -> BenchModel:
    from .models_vision import BasicBlock, ResNet

    torch.manual_seed(SEED)
    m = ResNet(BasicBlock, (2, 2, 2, 2)).eval()
    batch, side = (2, 112) if quick else (8, 224)
    x = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(SEED + 1))
    return BenchModel(
        name="resnet18",
        label=f"ResNet-18, batch {batch}, {side}²",
        module=m, inputs=x,
        capture3=("layer1.0.conv1", "layer3.1.bn2", "fc"),
        clamp_path="layer2.0.bn1",
        params=sum(p.numel() for p in m.parameters()),
    )


# -- GPT-2 small ----------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.c_fc = nn.Linear(d, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2 small's shape: wte/wpe, ``h.N`` blocks, ln_f, LM head tied to wte."""

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, hidden: int = 3072,
                 vocab: int = 50257, context: int = 1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads, hidden) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt2(quick: bool = False, batch: int = 1) -> BenchModel:
    torch.manual_seed(SEED)
    layers = 4 if quick else 12
    m = GPT2(layers=layers).eval()
    tokens = 128
    x = torch.randint(0, 50257, (batch, tokens), generator=torch.Generator().manual_seed(SEED + 1))
    mid = layers // 2
    depth = "12 layers" if layers == 12 else f"{layers} of 12 layers (quick)"
    return BenchModel(
        name=f"gpt2-b{batch}",
        label=f"GPT-2-small shape, {depth}, batch {batch} × {tokens} tokens",
        module=m, inputs=x,
        capture3=("h.0.mlp.c_fc", f"h.{mid}.attn.c_proj", "ln_f"),
        clamp_path=f"h.{mid}.mlp.act",
        params=sum(p.numel() for p in m.parameters()),
    )


# -- ResNet-50 and ViT-B/16 -------------------------------------------------------
def resnet50(quick: bool = False, batch: int = 1) -> BenchModel:
    from .models_vision import Bottleneck, ResNet

    torch.manual_seed(SEED)
    m = ResNet(Bottleneck, (3, 4, 6, 3)).eval()
    side = 112 if quick else 224
    x = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(SEED + 1))
    return BenchModel(
        name=f"resnet50-b{batch}", label=f"ResNet-50, batch {batch}, {side}²", module=m, inputs=x,
        capture3=("layer1.0.conv1", "layer3.2.bn2", "fc"), clamp_path="layer2.0.bn1",
        params=sum(p.numel() for p in m.parameters()),
    )


def vit_b16(quick: bool = False, batch: int = 1) -> BenchModel:
    from .models_vision import ViTB16

    torch.manual_seed(SEED)
    layers = 4 if quick else 12
    m = ViTB16(layers=layers).eval()
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(SEED + 1))
    mid = layers // 2
    depth = "12 layers" if layers == 12 else f"{layers} of 12 layers (quick)"
    return BenchModel(
        name=f"vit_b16-b{batch}", label=f"ViT-B/16, {depth}, batch {batch}, 224²", module=m,
        inputs=x,
        capture3=("conv_proj", f"encoder.layers.encoder_layer_{mid}.mlp.0", "heads.head"),
        clamp_path=f"encoder.layers.encoder_layer_{mid}.mlp.1",
        params=sum(p.numel() for p in m.parameters()),
    )


# -- demos ------------------------------------------------------------------------
_DEMO_LAYERS = {
    # name: (3 capture layers, clamp layer)
    "cnn": (("conv1", "relu2", "fc"), "relu1"),
    "transformer": (("embed", "encoder.layers.0.linear1", "head"), "encoder.layers.0.linear1"),
    "clamp": (("0", "1"), "0"),
}


def demo(name: str) -> BenchModel:
    from hookscope.core import load_model

    lm = load_model(f"demo:{name}")
    cap, clamp = _DEMO_LAYERS[name]
    return BenchModel(name=f"demo:{name}", label=f"demo:{name}", module=lm.module.eval(),
                      inputs=lm.example_input, capture3=cap, clamp_path=clamp,
                      params=sum(p.numel() for p in lm.module.parameters()))


BUILDERS: dict[str, Callable[[bool], BenchModel]] = {
    "resnet18": resnet18,
    "resnet50-b1": lambda quick=False: resnet50(quick, 1),
    "resnet50-b8": lambda quick=False: resnet50(quick, 8),
    "vit_b16-b1": lambda quick=False: vit_b16(quick, 1),
    "vit_b16-b8": lambda quick=False: vit_b16(quick, 8),
    "gpt2-b1": lambda quick=False: gpt2(quick, 1),
    "gpt2-b8": lambda quick=False: gpt2(quick, 8),
    "demo:cnn": lambda quick=False: demo("cnn"),
    "demo:transformer": lambda quick=False: demo("transformer"),
}


#: The models ``python -m bench`` runs without ``--models``: every shape but the two
#: slowest (ViT-B/16 and GPT-2 at batch 8, ~2.5 s a forward on 2 cores), which
#: ``--models all`` adds.
DEFAULT_MODELS = ("resnet18", "resnet50-b1", "resnet50-b8", "vit_b16-b1", "gpt2-b1",
                  "demo:cnn", "demo:transformer")
QUICK_MODELS = ("resnet18", "gpt2-b1", "demo:cnn", "demo:transformer")
#: Models whose forward is large enough for the ratio targets and the memory figures.
BIG = tuple(n for n in BUILDERS if not n.startswith("demo:"))


def build(name: str, quick: bool = False) -> BenchModel:
    """Build one benchmark model by name (see :data:`BUILDERS`)."""
    return BUILDERS[name](quick)


def leaf_paths(module: nn.Module) -> list[str]:
    """Paths of every module with no children (the "every leaf" of the cases)."""
    return [p for p, m in module.named_modules() if p and not any(True for _ in m.children())]
