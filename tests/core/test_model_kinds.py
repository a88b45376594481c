"""Model kinds hooks cannot see as they are: TorchScript, torch.compile, lazy modules, autograd."""

import textwrap

import pytest
import torch
from torch import nn

from hookscope.core import Plan, SpecError, compare, load_model, module_tree

FACTORIES = textwrap.dedent('''
    import torch
    from torch import nn

    def net():
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

    def scripted():
        return torch.jit.script(net())

    def traced():
        return torch.jit.trace(net(), torch.ones(1, 3))

    def compiled_and_run():
        model = torch.compile(net(), backend="eager")
        model(torch.ones(1, 3))  # the graph is traced here, before any hook exists
        return model, torch.ones(1, 3)

    def lazy():
        torch.manual_seed(3)
        return nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(2)), torch.ones(1, 3)

    def lazy_without_input():
        return nn.Sequential(nn.LazyLinear(4))

    class GradNet(nn.Module):
        """Returns the gradient of its own output with respect to its input."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(3)
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            x = x.detach().requires_grad_(True)
            y = torch.tanh(self.fc(x)).sum()
            (g,) = torch.autograd.grad(y, x)
            return g

    def grad_net():
        return GradNet(), torch.tensor([[0.5, -1.0, 2.0]])
''')


@pytest.fixture
def spec(tmp_path):
    f = tmp_path / "kinds.py"
    f.write_text(FACTORIES)
    return lambda name: f"{f}:{name}"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit is deprecated
@pytest.mark.parametrize("name", ["scripted", "traced"])
def test_torchscript_is_refused_with_what_to_do(spec, name):
    with pytest.raises(SpecError, match="TorchScript.*eager module.*\\.pt2"):
        load_model(spec(name))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("trust", [False, True])
def test_torchscript_file_is_refused_before_unpickling(tmp_path, trust):
    f = tmp_path / "scripted.pt"
    torch.jit.script(nn.Sequential(nn.Linear(3, 4))).save(str(f))
    with pytest.raises(SpecError, match="TorchScript archive.*\\.pt2"):
        load_model(str(f), trust_pickle=trust)
    plain = tmp_path / "module.pt"
    torch.save(nn.Linear(2, 2), plain)  # a full pickle: still the trust question, not this one
    with pytest.raises(SpecError, match="full pickle"):
        load_model(str(plain))


def test_compiled_model_that_already_ran_is_hooked_through_its_original(spec):
    lm = load_model(spec("compiled_and_run"))
    assert "_orig_mod" in lm.description and lm.notes
    assert not any(p.startswith("_orig_mod") for p, _ in lm.module.named_modules())
    r = compare(lm.module, lm.example_input, Plan(capture=["0"], clamp={"0": (-0.1, 0.1)}))
    assert r.calls["0"] == 1 and r.outputs_differ
    plain = load_model(spec("net")).module
    h = plain[0].register_forward_hook(lambda m, i, o: o.clamp(-0.1, 0.1))
    try:
        want = plain(torch.ones(1, 3))
    finally:
        h.remove()
    assert torch.equal(r.output_with, want.detach())


def test_lazy_modules_are_materialised_with_the_example_input(spec):
    lm = load_model(spec("lazy"))
    tree = module_tree(lm.module)
    assert tree.params == 3 * 4 + 4 + 4 * 2 + 2
    r = compare(lm.module, lm.example_input, Plan(capture=["2"]))
    assert r.captures["2"][0].stats.shape == (1, 2)
    with pytest.raises(SpecError, match="lazy modules.*example input"):
        load_model(spec("lazy_without_input"))


def test_forward_that_needs_autograd_runs_with_grad_enabled(spec):
    lm = load_model(spec("grad_net"))
    x = lm.example_input
    r = compare(lm.module, x, Plan(capture=["fc"], clamp={"fc": (-0.01, 0.01)}))
    fc = lm.module.fc
    with torch.no_grad():
        pre = fc(x)
    want_without = (1 - torch.tanh(pre) ** 2) * fc.weight  # d tanh(w.x+b) / dx
    assert torch.allclose(r.output_without, want_without, atol=1e-6)
    # the clamp cuts the gradient through fc wherever it bites (|w.x+b| > 0.01 here)
    assert abs(float(pre)) > 0.01
    assert torch.equal(r.output_with, torch.zeros_like(x))
    assert r.outputs_differ and r.captures["fc"][0].stats.shape == (1, 1)
