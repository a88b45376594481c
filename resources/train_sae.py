"""Train the tiny SAE shipped for ``demo:lm`` and write it in SAELens's folder layout.

Run by hand from the repository root, after ``train_lm.py`` (pure torch)::

    python resources/train_sae.py

It reads ``demo:lm``'s residual stream after its first block (``blocks.0``,
64 wide) on the demo's own training sentences, trains a standard ReLU sparse
autoencoder with 128 features (MSE plus an L1 penalty on the features weighted
by the decoder norms), and writes ``demo_sae/cfg.json`` and
``demo_sae/sae_weights.safetensors`` next to this file (about 66 KB). The
fraction of variance it explains and the mean number of active features are
printed. Seeded, CPU only, well under a minute.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from train_lm import corpus  # noqa: E402  (the demo's own sentences)

from hookscope.core.demos.demo_lm import CODEC, lm_demo  # noqa: E402

OUT = HERE / "demo_sae"
LAYER, D_SAE, SEED, STEPS, L1 = "blocks.0", 128, 0, 2000, 0.6


def activations() -> torch.Tensor:
    model, _ = lm_demo()
    rows: list[torch.Tensor] = []
    h = model.get_submodule(LAYER).register_forward_hook(lambda _m, _i, out: rows.append(out[0]))
    try:
        with torch.no_grad():
            for line in corpus():
                model(torch.tensor([CODEC.encode(line + "\n")]))
    finally:
        h.remove()
    return torch.cat(rows)


def main() -> None:
    t0 = time.time()
    torch.manual_seed(SEED)
    x = activations()
    d_in = x.shape[1]
    b_dec = torch.nn.Parameter(x.mean(0).clone())
    w_dec = torch.nn.Parameter(torch.randn(D_SAE, d_in) / d_in ** 0.5)
    w_enc = torch.nn.Parameter(w_dec.detach().t().clone())
    b_enc = torch.nn.Parameter(torch.zeros(D_SAE))
    opt = torch.optim.Adam([w_enc, b_enc, w_dec, b_dec], lr=3e-3)
    gen = torch.Generator().manual_seed(SEED)
    for step in range(STEPS):
        batch = x[torch.randint(0, len(x), (256,), generator=gen)]
        f = torch.relu((batch - b_dec) @ w_enc + b_enc)
        recon = f @ w_dec + b_dec
        loss = ((recon - batch) ** 2).sum(-1).mean() + L1 * (f * w_dec.norm(dim=1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        f = torch.relu((x - b_dec) @ w_enc + b_enc)
        recon = f @ w_dec + b_dec
        fve = 1 - ((recon - x) ** 2).sum() / ((x - x.mean(0)) ** 2).sum()
        print(f"variance explained {fve:.3f}, mean active features {(f > 0).sum(-1).float().mean():.1f}"
              f" of {D_SAE}, {time.time() - t0:.1f} s")
    OUT.mkdir(exist_ok=True)
    tensors = {"W_enc": w_enc.detach().contiguous(), "b_enc": b_enc.detach().contiguous(),
               "W_dec": w_dec.detach().contiguous(), "b_dec": b_dec.detach().contiguous()}
    save_file(tensors, str(OUT / "sae_weights.safetensors"))
    cfg = {"architecture": "standard", "d_in": d_in, "d_sae": D_SAE, "dtype": "float32",
           "device": "cpu", "model_name": "demo:lm", "hook_name": LAYER,
           "apply_b_dec_to_input": True, "normalize_activations": "none",
           "trained_by": "resources/train_sae.py"}
    (OUT / "cfg.json").write_text(json.dumps(cfg, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
