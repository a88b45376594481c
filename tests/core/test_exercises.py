"""The two seed exercises, checked against an independent hand-written computation."""

from collections import OrderedDict

import torch
from torch import nn

from hookscope.core import feature_extraction_test, modify_hook_test


def _hand_exercise_1():
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    x = torch.tensor([[1.0, 2.0, 3.0]])
    without = model(x).detach()
    handle = model[0].register_forward_hook(lambda m, i, o: o.clamp(-0.5, 0.5))
    with_ = model(x).detach()
    handle.remove()
    return without, with_


def test_modify_hook_matches_torch():
    without, with_ = _hand_exercise_1()
    got = modify_hook_test()
    assert set(got) == {"output_without", "output_with", "outputs_differ"}
    assert got["output_without"] == [round(v, 4) for v in without.flatten().tolist()]
    assert got["output_with"] == [round(v, 4) for v in with_.flatten().tolist()]
    assert got["outputs_differ"] is (not torch.equal(without, with_))
    assert all(isinstance(v, float) for v in got["output_with"])


def test_feature_extraction_matches_hand_hooks():
    torch.manual_seed(42)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(4, 8), relu1=nn.ReLU(), fc2=nn.Linear(8, 4),
                                      relu2=nn.ReLU(), fc3=nn.Linear(4, 2)))
    feats = {}
    handles = [getattr(model, n).register_forward_hook(
        (lambda name: lambda m, i, o: feats.__setitem__(name, o.detach()))(n))
        for n in ("fc1", "fc2", "fc3")]
    model(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    for h in handles:
        h.remove()
    expected = {f"{n}_shape": list(t.shape) for n, t in feats.items()}
    expected["num_features_captured"] = len(feats)
    assert feature_extraction_test() == expected
    assert expected == {"fc1_shape": [1, 8], "fc2_shape": [1, 4], "fc3_shape": [1, 2],
                        "num_features_captured": 3}


def test_feature_values_are_each_layers_own():
    # No late-binding bug: fc1, fc2 and fc3 hold three different tensors, fc3's equals the output.
    from hookscope.core import Plan, load_model, run

    lm = load_model("demo:features")
    r = run(lm.module, lm.example_input, Plan(capture=["fc1", "fc2", "fc3"]))
    shapes = [r.captures[p][0].tensor.shape for p in ("fc1", "fc2", "fc3")]
    assert shapes == [torch.Size([1, 8]), torch.Size([1, 4]), torch.Size([1, 2])]
    assert torch.equal(r.captures["fc3"][0].tensor, r.output)
    assert torch.equal(r.captures["fc1"][0].tensor, lm.module.fc1(lm.example_input).detach())
