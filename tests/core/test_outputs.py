"""Outputs read by meaning: classes, next tokens, detections, named leaves; checked against torch."""

import torch

from hookscope.core import Plan, compare, load_model
from hookscope.core.base.meaning import CLASSES, DETECTIONS, TOKENS, OutputMeaning
from hookscope.core.views.outputs import describe_outputs, summary_lines


def test_classes_top_k_with_labels_and_changes():
    torch.manual_seed(0)
    a, b = torch.randn(2, 6), torch.randn(2, 6)
    labels = list("abcdef")
    d = describe_outputs(a, b, OutputMeaning(kind=CLASSES, labels=labels), top_k=3)
    assert d["kind"] == CLASSES and len(d["rows"]) == 2
    for r in range(2):
        pa, pb = torch.softmax(a[r].double(), -1), torch.softmax(b[r].double(), -1)
        row = d["rows"][r]
        assert [t["label"] for t in row["top_without"]] == [labels[i] for i in pa.topk(3).indices]
        assert [t["label"] for t in row["top_with"]] == [labels[i] for i in pb.topk(3).indices]
        assert row["top_changed"] == (int(pa.argmax()) != int(pb.argmax()))
        moved = (pb - pa).abs().argmax()
        assert row["largest_changes"][0]["label"] == labels[moved]
        assert abs(row["largest_changes"][0]["change"] - float(pb[moved] - pa[moved])) < 1e-4


def test_language_model_positions_next_tokens_and_changed_positions():
    lm = load_model("demo:lm")
    x = lm.example_input
    r = compare(lm.module, x, Plan(clamp={"blocks.0.mlp": (-0.02, 0.02)}))
    d = describe_outputs(r.output_without, r.output_with, lm.meaning, x)
    assert d["kind"] == TOKENS and d["positions_total"] == x.shape[1]
    codec = lm.meaning.codec
    assert [p["input"] for p in d["positions"]] == codec.token_strings(x[0].tolist())
    top_a, top_b = r.output_without[0].argmax(-1), r.output_with[0].argmax(-1)
    assert d["changed_positions"] == torch.nonzero(top_a != top_b).flatten().tolist()
    last = d["positions"][-1]
    p = torch.softmax(r.output_without[0, -1].double(), -1)
    assert last["top_without"][0]["label"] == codec.token_strings([int(p.argmax())])[0]
    assert abs(last["top_without"][0]["prob"] - float(p.max())) < 1e-4
    assert any("->" in line for line in summary_lines(d))


def test_detections_stay_per_field():
    det = lambda s: {"boxes": torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 20.0, 20.0]]),
                     "labels": torch.tensor([1, 2]), "scores": torch.tensor(s)}
    d = describe_outputs([det([0.2, 0.9])], [det([0.8, 0.1])],
                         OutputMeaning(kind=DETECTIONS, labels=["bg", "cat", "dog"]))
    img = d["images"][0]
    assert [t["label"] for t in img["top_without"]] == ["dog", "cat"]
    assert [t["label"] for t in img["top_with"]] == ["cat", "dog"]
    assert img["top_with"][0]["box"] == [0.0, 0.0, 10.0, 10.0]
    assert img["fields"]["boxes"]["same"] and not img["fields"]["scores"]["same"]


def test_nested_output_each_leaf_by_name_largest_change_first():
    a = {"logits": torch.zeros(2, 3), "hidden": (torch.ones(4),)}
    b = {"logits": torch.tensor([[0.0, 0.5, 0.0], [0.0, 0.0, -2.0]]), "hidden": (torch.ones(4),)}
    d = describe_outputs(a, b)
    by = {leaf["name"]: leaf for leaf in d["leaves"]}
    assert set(by) == {"['logits']", "['hidden'][0]"}
    assert by["['logits']"]["changed_values"] == 2 and by["['hidden'][0]"]["changed_values"] == 0
    assert by["['logits']"]["largest_changes"][0]["index"] == [1, 2]
    assert by["['logits']"]["largest_changes"][1]["index"] == [0, 1]
