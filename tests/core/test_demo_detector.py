"""demo:detector: torchvision's output structure, boxes where the shapes are, clamps as hooks do."""

from __future__ import annotations

import numpy as np
import torch

from hookscope.core import Plan, compare, load_model
from hookscope.core.demos.demo_detector import (LABELS, SHAPES, connected_regions,
                                                constructed_state_dict, sample_array)
from hookscope.core.views.detections import detr_to_torchvision, image_boxes
from hookscope.core.plan.interventions import Scale, Zero
from hookscope.core.views.outputs import describe_outputs
from hookscope.core.engine.verdict import output_verdict


def _hooked(model, x, layer, fn):
    """The model's output with a hand-written forward hook on ``layer`` (removed after)."""
    handle = model.get_submodule(layer).register_forward_hook(lambda m, i, o: fn(o))
    try:
        with torch.inference_mode():
            return model(x)
    finally:
        handle.remove()


def _same(a, b):
    assert len(a) == len(b)
    for da, db in zip(a, b):
        assert set(da) == set(db) == {"boxes", "labels", "scores"}
        for k in da:
            assert torch.equal(da[k], db[k]), k


def test_output_has_torchvision_structure_and_finds_every_shape():
    lm = load_model("demo:detector")
    with torch.inference_mode():
        out = lm.module(lm.example_input)
    assert isinstance(out, list) and len(out) == 1
    d = out[0]
    n = len(SHAPES)
    assert d["boxes"].shape == (n, 4) and d["boxes"].dtype == torch.float32
    assert d["labels"].shape == (n,) and d["labels"].dtype == torch.int64
    assert d["scores"].shape == (n,) and bool((d["scores"][:-1] >= d["scores"][1:]).all())
    # a list of 3 x H x W images, as torchvision takes, gives the same answer
    with torch.inference_mode():
        _same(out, lm.module([lm.example_input[0]]))
    found = {(LABELS[int(lab)], tuple(int(v) for v in box))
             for lab, box in zip(d["labels"], d["boxes"])}
    for label, shape, x1, y1, x2, y2, bright in SHAPES:
        if shape == "rect" and bright == 1.0:  # a bright rectangle: its box exactly
            assert (label, (x1, y1, x2, y2)) in found
        else:  # a disk's rim and a dim shape's edge lie near the pixel threshold: within 1 px
            assert any(name == label and max(abs(a - b) for a, b in zip(box, (x1, y1, x2, y2))) <= 1
                       for name, box in found)
    assert lm.meaning.kind == "detections" and lm.meaning.label(1) == "red"


def test_shipped_weights_and_picture_are_the_constructed_ones():
    lm = load_model("demo:detector")
    state = lm.module.state_dict()
    for k, v in constructed_state_dict().items():
        assert torch.equal(state[k], v), k
    img = (lm.example_input[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    assert np.array_equal(img, sample_array())


def test_clamp_scale_and_zero_equal_hand_written_hooks():
    lm = load_model("demo:detector")
    x, m = lm.example_input, lm.module
    r = compare(m, x, Plan(clamp={"backbone.conv1": (-1.0, 0.6)}))
    _same(r.output_with, _hooked(m, x, "backbone.conv1", lambda o: o.clamp(-1.0, 0.6)))
    _same(r.output_without, _hooked(m, x, "backbone.conv1", lambda o: o))
    assert not m.backbone.conv1._forward_hooks  # hookscope's hooks are gone
    base = r.output_without[0]
    # the clamp caps every feature: every score drops, no box is lost
    assert len(r.output_with[0]["scores"]) == len(base["scores"])
    assert float(r.output_with[0]["scores"].max()) < float(base["scores"].min())
    s = compare(m, x, Plan(interventions={"backbone.conv1": Scale(factor=0.5)}))
    _same(s.output_with, _hooked(m, x, "backbone.conv1", lambda o: o * 0.5))
    assert len(s.output_with[0]["boxes"]) < len(base["boxes"])  # the dim shape is gone
    z = compare(m, x, Plan(interventions={"backbone.relu2": Zero()}))
    assert len(z.output_with[0]["boxes"]) == 0 and z.output_with[0]["boxes"].shape == (0, 4)
    assert "0 with" in output_verdict(z) and f"{len(base['boxes'])} boxes without" in output_verdict(z)


def test_connected_regions_join_8_neighbours_and_keep_apart_the_rest():
    mask = torch.zeros(6, 7, dtype=torch.bool)
    mask[0, 0] = mask[1, 1] = True        # diagonal neighbours: one region
    mask[4:6, 4:7] = True                 # a block apart from it
    ids = connected_regions(mask)
    assert ids[0, 0] == ids[1, 1] != 0
    assert len(set(ids[4:6, 4:7].flatten().tolist())) == 1 and ids[4, 4] not in (0, ids[0, 0])
    assert int((ids != 0).sum()) == int(mask.sum())


def test_detr_style_boxes_become_pixels_and_best_class_scores():
    boxes = torch.tensor([[[0.5, 0.25, 0.2, 0.1], [0.1, 0.9, 0.2, 0.2]]])   # cx, cy, w, h
    logits = torch.tensor([[[2.0, 0.0, 1.0], [0.0, 3.0, -1.0]]])           # last: no object
    x = torch.zeros(1, 3, 40, 100)
    (d,) = detr_to_torchvision({"pred_boxes": boxes, "logits": logits}, (40, 100))
    p = torch.softmax(logits[0], -1)
    want_scores = p[:, :2].max(-1).values
    order = want_scores.argsort(descending=True)
    assert torch.allclose(d["scores"], want_scores[order])
    assert d["labels"].tolist() == [int(i) for i in p[:, :2].argmax(-1)[order]]
    hand = torch.tensor([[40.0, 8.0, 60.0, 12.0], [0.0, 32.0, 20.0, 40.0]])
    assert torch.allclose(d["boxes"], hand[order])
    listed = image_boxes({"pred_boxes": boxes, "logits": logits}, None, x)
    assert torch.allclose(torch.tensor([b["box"] for b in listed]), hand[order])


def test_describe_outputs_counts_detections_per_image():
    lm = load_model("demo:detector")
    r = compare(lm.module, lm.example_input, Plan(interventions={"backbone.conv1": Scale(factor=0.5)}))
    desc = describe_outputs(r.output_without, r.output_with, lm.meaning, lm.example_input)
    img = desc["images"][0]
    assert img["count_without"] == len(r.output_without[0]["boxes"])
    assert img["count_with"] == len(r.output_with[0]["boxes"])
    top = img["top_without"][0]
    assert top["label"] == LABELS[int(r.output_without[0]["labels"][0])]
    assert top["score"] == round(float(r.output_without[0]["scores"][0]), 4)
