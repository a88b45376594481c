"""An SAE folder is read as SAELens, its maker, reads it, or refused naming the field.

Every ``cfg.json`` field that changes SAELens's arithmetic (``rescale_acts_by_decoder_norm``,
``apply_b_dec_to_input``, ``normalize_activations``, a pre-6.0 config's ``activation_fn``)
is computed; those that need what the folder does not hold (``expected_average_only_in``,
``covariance_whitening``, ``reshape_activations: hook_z``, ``finetuning_scaling_factor``, a
``scaling_factor`` tensor) are refused in one line. ``SaeLensReference`` below is SAELens
6's inference arithmetic written out by hand from its ``sae.py``/``standard_sae.py``/
``topk_sae.py``/``jumprelu_sae.py`` (``process_sae_in``, the run-time activation norms,
``TopK``, ``act_times_W_dec``); when sae_lens itself is importable, a folder written by its
own ``save_model`` is compared with its own ``encode``/``decode`` too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from hookscope.app.cli import main
from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.model.sae import attach_sae, detach_sae, load_sae
from hookscope.core.plan.sae_interventions import SaeClamp

D_IN, D_SAE = 64, 48
#: float32 matrix products of the same numbers in another order
TOL = dict(rtol=1e-5, atol=1e-5)


class SaeLensReference:
    """SAELens 6's inference encode/decode for one cfg and state dict, by hand."""

    def __init__(self, cfg: dict, sd: dict[str, torch.Tensor]):
        self.cfg, self.sd = cfg, sd

    def _norm_in(self, x):
        how = self.cfg.get("normalize_activations", "none")
        if how == "constant_norm_rescale":
            self.x_norm_coeff = (self.sd["W_enc"].shape[0] ** 0.5) / x.norm(dim=-1, keepdim=True)
            return x * self.x_norm_coeff
        if how == "layer_norm":
            mu = x.mean(dim=-1, keepdim=True)
            x = x - mu
            std = x.std(dim=-1, keepdim=True)
            self.ln_mu, self.ln_std = mu, std
            return x / (std + 1e-5)
        return x

    def _norm_out(self, x):
        how = self.cfg.get("normalize_activations", "none")
        if how == "constant_norm_rescale":
            return x / self.x_norm_coeff
        if how == "layer_norm":
            return x * self.ln_std + self.ln_mu
        return x

    def encode(self, x):
        sd = self.sd
        sae_in = self._norm_in(x) - sd["b_dec"] * self.cfg.get("apply_b_dec_to_input", True)
        hidden_pre = sae_in @ sd["W_enc"] + sd["b_enc"]
        arch = self.cfg["architecture"]
        if arch == "jumprelu":
            return torch.relu(hidden_pre) * (hidden_pre > sd["threshold"]).to(hidden_pre.dtype)
        if arch == "topk":
            if self.cfg.get("rescale_acts_by_decoder_norm"):
                hidden_pre = hidden_pre * sd["W_dec"].norm(dim=-1)
            vals, idx = torch.topk(hidden_pre, k=self.cfg["k"], dim=-1, sorted=False)
            return torch.zeros_like(hidden_pre).scatter_(-1, idx, vals.relu())
        return torch.relu(hidden_pre)

    def decode(self, f):
        sd = self.sd
        if self.cfg.get("rescale_acts_by_decoder_norm"):
            f = f * (1 / sd["W_dec"].norm(dim=-1))
        return self._norm_out(f @ sd["W_dec"] + sd["b_dec"])


def state_dict(arch: str, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd = {"W_enc": torch.randn(D_IN, D_SAE, generator=g) * 0.3,
          "b_enc": torch.randn(D_SAE, generator=g) * 0.1,
          # decoder rows of very different norms: rescaling by them changes the top k
          "W_dec": torch.randn(D_SAE, D_IN, generator=g) * torch.linspace(0.05, 3.0, D_SAE)[:, None],
          "b_dec": torch.randn(D_IN, generator=g) * 0.2}
    if arch == "jumprelu":
        sd["threshold"] = torch.rand(D_SAE, generator=g) * 0.5
    return sd


def write(root: Path, name: str, cfg: dict, sd: dict[str, torch.Tensor]) -> Path:
    d = root / name
    d.mkdir()
    (d / "cfg.json").write_text(json.dumps({"d_in": D_IN, "d_sae": D_SAE, **cfg}))
    save_file(sd, str(d / "sae_weights.safetensors"))
    return d


V6 = {"sae_lens_version": "6.5.0"}
READ = {
    "topk rescaled by decoder norm": {**V6, "architecture": "topk", "k": 5,
                                      "rescale_acts_by_decoder_norm": True},
    "topk without b_dec on input": {**V6, "architecture": "topk", "k": 7,
                                    "apply_b_dec_to_input": False},
    "standard, constant_norm_rescale": {**V6, "architecture": "standard",
                                        "normalize_activations": "constant_norm_rescale"},
    "standard, layer_norm": {**V6, "architecture": "standard", "normalize_activations": "layer_norm"},
    "jumprelu, layer_norm, no b_dec": {**V6, "architecture": "jumprelu",
                                       "normalize_activations": "layer_norm",
                                       "apply_b_dec_to_input": False},
    "topk rescaled, constant_norm_rescale": {**V6, "architecture": "topk", "k": 4,
                                             "rescale_acts_by_decoder_norm": True,
                                             "normalize_activations": "constant_norm_rescale"},
}
#: a pre-6.0 config says TopK by its activation function (SAELens's handle_pre_6_0_config)
PRE_6_TOPK = {"activation_fn_str": "topk", "activation_fn_kwargs": {"k": 6},
              "normalize_activations": False}


def inputs() -> torch.Tensor:
    return torch.randn(3, 5, D_IN, generator=torch.Generator().manual_seed(7)) * 2 + 0.5


@pytest.mark.parametrize("name", list(READ))
def test_encode_and_decode_are_saelens_arithmetic(tmp_path, name):
    cfg = READ[name]
    sd = state_dict(cfg["architecture"])
    sae = load_sae(write(tmp_path, "sae", cfg, sd))
    ref = SaeLensReference(cfg, sd)
    x = inputs()
    f_ref = ref.encode(x)
    f = sae.encode(x)
    assert torch.allclose(f, f_ref, **TOL)
    assert torch.equal(f != 0, f_ref != 0)  # the same features fire
    assert torch.allclose(sae.decode(f, x), ref.decode(f_ref), **TOL)


def test_a_pre_6_topk_config_is_a_topk_sae(tmp_path):
    sd = state_dict("topk")
    sae = load_sae(write(tmp_path, "old", PRE_6_TOPK, sd))
    ref = SaeLensReference({"architecture": "topk", "k": 6}, sd)
    x = inputs()
    assert sae.architecture == "topk" and sae.k == 6
    assert torch.allclose(sae.encode(x), ref.encode(x), **TOL)
    assert int((sae.encode(x) != 0).sum(-1).max()) <= 6


def test_sae_clamp_on_a_rescaled_topk_sae_moves_the_output_as_saelens_decodes(tmp_path):
    """``sae-clamp`` keeps the error term: ``x + decode(f') - decode(f)`` with SAELens's decode."""
    cfg = READ["topk rescaled, constant_norm_rescale"]
    sd = state_dict("topk", seed=3)
    lm = load_model("demo:lm")
    x = parse_input("text:the cat sat on the ", lm.example_input, lm.meaning.codec)
    attach_sae(lm.module, "blocks.0", write(tmp_path, "sae", cfg, sd))
    try:
        got = compare(lm.module, x, Plan(interventions={"blocks.0": SaeClamp((3, 9), 2.5)}))
    finally:
        detach_sae(lm.module, "blocks.0")
    ref = SaeLensReference(cfg, sd)

    def hand(_m, _a, out):
        f = ref.encode(out)
        edited = f.clone()
        edited[..., [3, 9]] = 2.5
        return out + ref.decode(edited) - ref.decode(f)  # encode kept this input's norm

    handle = lm.module.get_submodule("blocks.0").register_forward_hook(hand)
    with torch.inference_mode():
        want = lm.module(x)
    handle.remove()
    assert torch.allclose(got.output_with, want, rtol=1e-4, atol=1e-4)


REFUSED = {
    "expected_average_only_in": ({**V6, "architecture": "standard",
                                  "normalize_activations": "expected_average_only_in"},
                                 "normalize_activations"),
    "covariance_whitening": ({**V6, "architecture": "standard",
                              "normalize_activations": "covariance_whitening"},
                             "normalize_activations"),
    "hook_z": ({**V6, "architecture": "standard", "reshape_activations": "hook_z"},
               "reshape_activations"),
    "pre-6 hook_z by its hook name": ({"hook_name": "blocks.0.attn.hook_z"}, "reshape_activations"),
    "finetuning scale": ({"finetuning_scaling_factor": True}, "finetuning_scaling_factor"),
    "another activation": ({"activation_fn_str": "tanh"}, "activation_fn"),
    "b_dec flag as text": ({**V6, "architecture": "standard", "apply_b_dec_to_input": "false"},
                           "apply_b_dec_to_input"),
    "rescale on standard": ({**V6, "architecture": "standard",
                             "rescale_acts_by_decoder_norm": True}, "rescale_acts_by_decoder_norm"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_field_hookscope_cannot_compute_is_refused_in_one_line(tmp_path, capsys, name):
    cfg, field = REFUSED[name]
    d = write(tmp_path, "sae", cfg, state_dict(cfg.get("architecture", "standard")))
    assert main(["run", "demo:lm", "--sae", f"blocks.0={d}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and "Traceback" not in err, err


def test_a_scaling_factor_tensor_is_refused(tmp_path, capsys):
    sd = {**state_dict("standard"), "scaling_factor": torch.full((D_SAE,), 2.0)}
    d = write(tmp_path, "sae", {"architecture": "standard"}, sd)
    assert main(["run", "demo:lm", "--sae", f"blocks.0={d}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scaling_factor" in err, err


@pytest.mark.parametrize("name", list(READ))
def test_a_folder_saved_by_saelens_itself_reads_as_saelens_reads_it(tmp_path, name):
    """The same fields, the folder written by SAELens's own ``save_model`` and read back by
    its ``load_from_disk``: encode and decode agree (skipped where sae_lens is not installed)."""
    sae_lens = pytest.importorskip("sae_lens")
    from sae_lens.saes.jumprelu_sae import JumpReLUSAE, JumpReLUSAEConfig
    from sae_lens.saes.standard_sae import StandardSAE, StandardSAEConfig
    from sae_lens.saes.topk_sae import TopKSAE, TopKSAEConfig

    cfg = {k: v for k, v in READ[name].items() if k != "sae_lens_version"}
    arch = cfg.pop("architecture")
    cls, cfg_cls = {"topk": (TopKSAE, TopKSAEConfig), "standard": (StandardSAE, StandardSAEConfig),
                    "jumprelu": (JumpReLUSAE, JumpReLUSAEConfig)}[arch]
    made = cls(cfg_cls(d_in=D_IN, d_sae=D_SAE, **cfg))
    with torch.no_grad():
        for n, t in state_dict(arch).items():
            getattr(made, n).copy_(t)
    made.save_model(tmp_path / "made")
    theirs = sae_lens.SAE.load_from_disk(tmp_path / "made")
    ours = load_sae(tmp_path / "made")
    x = inputs()
    with torch.no_grad():
        f = theirs.encode(x)
        assert torch.allclose(ours.encode(x), f, **TOL)
        assert torch.allclose(ours.decode(f, x), theirs.decode(f), **TOL)
