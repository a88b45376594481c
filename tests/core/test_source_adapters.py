"""hf:, torchvision: and timm: sources. HF models are small configs saved here; nothing downloaded."""

import importlib
import sys

import pytest
import torch

from hookscope.core import Plan, SpecError, compare, load_model, module_tree
from hookscope.core.base.meaning import CLASSES, TOKENS
from hookscope.core.model.source_hf import DEFAULT_PROMPT

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {name: getattr(hf_models, name)(root / name) for name in ("gpt2", "bert", "llama", "vit", "t5")}


def hand_clamped(model, layer, lo, hi, kwargs):
    """The model's output with a plain forward hook clamping ``layer``'s first output."""
    def hook(_m, _i, out):
        return (out[0].clamp(lo, hi),) + tuple(out[1:]) if isinstance(out, tuple) else out.clamp(lo, hi)

    h = model.get_submodule(layer).register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(**kwargs).logits
    finally:
        h.remove()


@pytest.mark.parametrize("name,layer", [("gpt2", "transformer.h.0.mlp"),
                                        ("llama", "model.layers.0.mlp"),
                                        ("bert", "bert.encoder.layer.0.output")])
def test_text_models_load_with_their_tokenizer_and_clamp_like_a_hook(saved, name, layer):
    lm = load_model(f"hf:{saved[name]}")
    assert lm.kind == "hf" and lm.meaning.kind == TOKENS and lm.meaning.codec is not None
    assert not lm.module.training
    ex = lm.example_input
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(saved[name])
    assert ex["input_ids"].tolist() == tok(DEFAULT_PROMPT, return_tensors="pt")["input_ids"].tolist()
    assert torch.equal(ex["attention_mask"], torch.ones_like(ex["input_ids"]))
    assert lm.meaning.causal == (name != "bert")
    r = compare(lm.module, ex, Plan(capture=[layer], clamp={layer: (-1e-3, 1e-3)}))
    assert r.outputs_differ and r.calls[layer] == 1
    assert torch.equal(r.output_with["logits"], hand_clamped(lm.module, layer, -1e-3, 1e-3, ex))
    assert not compare(lm.module, ex, Plan()).outputs_differ


def test_text_input_through_the_hf_tokenizer(saved):
    from transformers import AutoTokenizer

    from hookscope.core import parse_input

    lm = load_model(f"hf:{saved['gpt2']}")
    x = parse_input("text:a cat sat on the log", lm.example_input, lm.meaning.codec)
    want = AutoTokenizer.from_pretrained(saved["gpt2"])("a cat sat on the log", return_tensors="pt")
    assert set(x) == set(lm.example_input)
    assert torch.equal(x["input_ids"], want["input_ids"])
    r = compare(lm.module, x, Plan())
    assert r.output_with["logits"].shape[:2] == want["input_ids"].shape
    strings = lm.meaning.codec.token_strings(x["input_ids"][0].tolist())
    assert "".join(strings).replace("·", " ") == "a cat sat on the log"


def test_vit_classifier_gets_an_image_of_its_size_and_its_labels(saved):
    lm = load_model(f"hf:{saved['vit']}")
    assert lm.meaning.kind == CLASSES and lm.meaning.labels == ["cat", "dog", "fox"]
    px = lm.example_input["pixel_values"]
    assert px.shape == (1, 3, 32, 32) and px.dtype == torch.float32
    # the block's path differs between transformers versions (encoder.layer.1, layers.1)
    block = next(p for p, _ in lm.module.named_modules() if p.endswith((".layer.1", ".layers.1")))
    r = compare(lm.module, lm.example_input, Plan(capture=[block]))
    assert r.output_with["logits"].shape == (1, 3) and r.calls[block] == 1
    assert module_tree(lm.module).find(block + ".attention") is not None


def test_missing_hf_model_says_nothing_is_downloaded(tmp_path):
    with pytest.raises(SpecError, match="nothing is downloaded"):
        load_model(f"hf:{tmp_path / 'absent'}")
    with pytest.raises(SpecError, match="hf: needs a model"):
        load_model("hf:")


def test_hf_without_transformers_names_the_extra(monkeypatch, saved):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(SpecError, match=r"pip install 'hookscope\[hf\]'"):
        load_model(f"hf:{saved['gpt2']}")


def _imports(name: str) -> str | None:
    """None when ``name`` imports, else why not."""
    try:
        importlib.import_module(name)
    except Exception as exc:  # absent, or the CUDA wheel beside CPU torch
        return f"{name} does not import here: {type(exc).__name__}: {str(exc)[:80]}"
    return None


@pytest.mark.parametrize("prefix,package", [("torchvision", "torchvision"), ("timm", "timm")])
def test_vision_adapter_without_its_package_says_why(prefix, package):
    if _imports(package) is None:
        pytest.skip(f"{package} imports here; the message for a missing package is not reachable")
    with pytest.raises(SpecError, match=f"{package}.*hookscope\\[vision\\]|{package}.*fails to import"):
        load_model(f"{prefix}:resnet18")


@pytest.mark.skipif(_imports("torchvision.models") is not None,
                    reason=str(_imports("torchvision.models")))
def test_torchvision_classifier_random_weights_with_labels_and_note():
    lm = load_model("torchvision:resnet18")
    assert lm.notes and "random weights" in lm.notes[0]
    assert lm.meaning.kind == CLASSES and len(lm.meaning.labels) == 1000
    assert lm.example_input.shape == (1, 3, 224, 224)
    r = compare(lm.module, lm.example_input, Plan(clamp={"layer1.0.conv1": (-0.1, 0.1)}))
    assert r.outputs_differ and r.output_with.shape == (1, 1000)


@pytest.mark.skipif(_imports("timm") is not None, reason=str(_imports("timm")))
def test_timm_model_random_weights_example_from_its_data_config():
    lm = load_model("timm:resnet18")
    import timm.data

    cfg = timm.data.resolve_data_config({}, model=lm.module)
    assert tuple(lm.example_input.shape[1:]) == tuple(cfg["input_size"])
    assert not compare(lm.module, lm.example_input, Plan()).outputs_differ


def test_gpt2_json_is_compact_unless_full_output_is_asked(tmp_path, capsys, saved):
    import json

    from hookscope.app.cli import main

    folder = hf_models.gpt2(tmp_path / "wide", layers=1, width=8, vocab_size=50257)
    session = tmp_path / "session.json"
    args = ["run", f"hf:{folder}", "--clamp", "transformer.h.0.mlp=-0.001:0.001", "--json"]
    assert main(args + ["--save-json", str(session)]) == 0
    saved_session = json.loads(session.read_text())
    assert "output_with" not in saved_session and saved_session["spec"] == f"hf:{folder}"
    assert session.stat().st_size < 120_000
    text = capsys.readouterr().out
    data = json.loads(text)
    assert len(text) < 60_000 and "output_with" not in data and not data["full_output"]
    out = data["output"]
    assert out["kind"] == TOKENS and out["vocab"] == 50257 and out["positions"]
    small = ["run", f"hf:{saved['gpt2']}", "--json"]  # 9 positions x 300 tokens
    assert main(small) == 0 and "output_with" not in json.loads(capsys.readouterr().out)
    assert main(small + ["--full-output"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["output_with"]) == full["output"]["positions_total"] * full["output"]["vocab"]


def test_vit_output_reads_as_its_labelled_classes(saved):
    from hookscope.core.views.outputs import describe_outputs

    lm = load_model(f"hf:{saved['vit']}")
    r = compare(lm.module, lm.example_input, Plan(clamp={"classifier": (-1e-3, 1e-3)}))
    d = describe_outputs(r.output_without, r.output_with, lm.meaning, lm.example_input)
    p = torch.softmax(r.output_without["logits"][0].double(), -1)
    assert d["kind"] == CLASSES
    assert d["rows"][0]["top_without"][0]["label"] == ["cat", "dog", "fox"][int(p.argmax())]
    assert abs(d["rows"][0]["top_without"][0]["prob"] - float(p.max())) < 1e-4


def test_encoder_decoder_gets_a_decoder_start_and_reads_as_tokens(saved):
    lm = load_model(f"hf:{saved['t5']}")
    ex = lm.example_input
    assert ex["decoder_input_ids"].tolist() == [[lm.module.config.decoder_start_token_id]]
    r = compare(lm.module, ex, Plan(clamp={"encoder.final_layer_norm": (-1e-3, 1e-3)}))
    assert r.outputs_differ and r.output_with["logits"].shape[:2] == (1, 1)
