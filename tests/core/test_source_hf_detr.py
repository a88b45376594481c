"""hf: a DETR detector (tiny config with HF's own ResNet backbone, saved here, nothing downloaded)
reads as labelled boxes in the input image's pixels."""

from __future__ import annotations

import pytest
import torch

from hookscope.core import Plan, compare, load_model
from hookscope.core.views.detections import image_boxes
from hookscope.core.base.meaning import DETECTIONS
from hookscope.core.views.outputs import describe_outputs

tf = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")


@pytest.fixture(scope="module")
def detr(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf_detr") / "detr"
    torch.manual_seed(0)
    backbone = tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                               layer_type="basic", out_features=["stage2"])
    cfg = tf.DetrConfig(use_timm_backbone=False, backbone_config=backbone, backbone=None,
                        use_pretrained_backbone=False, d_model=16, encoder_layers=1,
                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=5, num_labels=3,
                        id2label={0: "cat", 1: "dog", 2: "fox"},
                        label2id={"cat": 0, "dog": 1, "fox": 2})
    tf.DetrForObjectDetection(cfg).save_pretrained(folder)
    return folder


def test_detr_output_reads_as_boxes_in_pixels_with_its_labels(detr):
    lm = load_model(f"hf:{detr}")
    assert lm.meaning.kind == DETECTIONS and lm.meaning.labels == ["cat", "dog", "fox"]
    x = lm.example_input
    r = compare(lm.module, x, Plan(clamp={"model.encoder.layers.0": (-0.1, 0.1)}))
    h, w = x["pixel_values"].shape[-2:]
    # by hand: softmax over the classes, the last one "no object"; cx, cy, w, h to corners
    for out in (r.output_without, r.output_with):
        p = torch.softmax(out["logits"][0], -1)[:, :-1]
        cx, cy, bw, bh = out["pred_boxes"][0].unbind(-1)
        corners = torch.stack([(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w,
                               (cy + bh / 2) * h], -1)
        listed = image_boxes(out, lm.meaning, x)
        assert len(listed) == out["logits"].shape[1]
        order = p.max(-1).values.argsort(descending=True)
        assert torch.allclose(torch.tensor([b["box"] for b in listed]), corners[order], atol=1e-4)
        assert [b["label"] for b in listed] == [lm.meaning.labels[int(i)]
                                                for i in p.argmax(-1)[order]]
    desc = describe_outputs(r.output_without, r.output_with, lm.meaning, x)
    assert desc["kind"] == DETECTIONS and desc["images"][0]["count_without"] == 5
