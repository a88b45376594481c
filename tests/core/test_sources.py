"""Every kind of model spec, weights file, and the mistakes a person can make with them."""

import textwrap

import pytest
import torch
from torch import nn

from hookscope.core import Plan, SpecError, compare, load_model, run

FACTORY = textwrap.dedent('''
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(3, 4)
            self.fc2 = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    def make():
        torch.manual_seed(7)
        return Net()

    def make_with_input():
        return make(), torch.ones(1, 3)

    def broken():
        raise ValueError("no GPU budget")

    def not_a_model():
        return 42
''')


@pytest.fixture
def model_file(tmp_path):
    f = tmp_path / "mymodel.py"
    f.write_text(FACTORY)
    return f


def test_demos_load_in_eval_mode():
    for name in ("clamp", "features", "cnn", "transformer"):
        lm = load_model(f"demo:{name}")
        assert not lm.module.training and lm.example_input is not None and lm.kind == "demo"


def test_file_factory_with_and_without_input(model_file):
    lm = load_model(f"{model_file}:make")
    assert isinstance(lm.module, nn.Module) and lm.example_input is None
    lm2 = load_model(f"{model_file}:make_with_input")
    assert torch.equal(lm2.example_input, torch.ones(1, 3))


def test_package_module_factory(model_file, monkeypatch):
    monkeypatch.syspath_prepend(str(model_file.parent))
    lm = load_model("mymodel:make_with_input")
    assert lm.module(lm.example_input).shape == (1, 2)


def test_exported_program_keeps_module_paths_and_hooks_fire(model_file, tmp_path):
    lm = load_model(f"{model_file}:make_with_input")
    ep = torch.export.export(lm.module, (lm.example_input,))
    path = tmp_path / "net.pt2"
    torch.export.save(ep, str(path))
    ex = load_model(str(path))
    names = {n for n, _ in ex.module.named_modules()}
    assert {"fc1", "fc2"} <= names
    r = compare(ex.module, ex.example_input, Plan(capture=["fc1"], clamp={"fc1": (0.0, 0.1)}))
    ref = lm.module.fc1(lm.example_input).detach()
    assert torch.allclose(r.captures["fc1"][0].pre_tensor, ref)
    assert torch.allclose(r.output_without, lm.module(lm.example_input).detach())
    assert r.outputs_differ


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_weights_applied(model_file, tmp_path, fmt):
    src = load_model(f"{model_file}:make").module
    with torch.no_grad():
        for p in src.parameters():
            p.mul_(3.0)
    f = tmp_path / f"w.{fmt}"
    if fmt == "pt":
        torch.save({"state_dict": src.state_dict()}, f)  # wrapped checkpoints are common
    else:
        from safetensors.torch import save_file
        save_file(src.state_dict(), str(f))
    lm = load_model(f"{model_file}:make", weights=str(f))
    for a, b in zip(lm.module.parameters(), src.parameters()):
        assert torch.equal(a, b)


def test_weights_mismatch_names_keys(model_file, tmp_path):
    f = tmp_path / "bad.safetensors"
    from safetensors.torch import save_file
    save_file({"fc1.weight": torch.zeros(4, 3), "extra.bias": torch.zeros(2),
               "fc2.weight": torch.zeros(5, 5)}, str(f))
    with pytest.raises(SpecError) as e:
        load_model(f"{model_file}:make", weights=str(f))
    msg = str(e.value)
    assert "missing keys" in msg and "fc1.bias" in msg
    assert "unexpected keys" in msg and "extra.bias" in msg
    assert "fc2.weight: file (5, 5) vs model (2, 4)" in msg


def test_pickle_needs_trust(model_file, tmp_path):
    f = tmp_path / "full.pt"
    torch.save(load_model(f"{model_file}:make").module, f)
    with pytest.raises(SpecError, match="trust-code"):
        load_model(str(f))
    lm = load_model(str(f), trust_pickle=True)
    assert isinstance(lm.module, nn.Module)


def test_weights_pt_never_unpickles_code(model_file, tmp_path):
    f = tmp_path / "evil.pt"
    torch.save(load_model(f"{model_file}:make").module, f)  # a module, not a state_dict
    with pytest.raises(SpecError, match="weights_only"):
        load_model(f"{model_file}:make", weights=str(f))


@pytest.mark.parametrize("spec, match", [
    ("demo:nope", "unknown demo 'nope'.*demo:cnn"),
    ("missing.py:make", "does not exist"),
    ("{file}:absent", "has no function 'absent'.*make"),
    ("{file}:broken", r"broken\(\) .* raised ValueError: no GPU budget .*line"),
    ("{file}:not_a_model", "returned int"),
    ("no_such_pkg_xyz:make", "no module named 'no_such_pkg_xyz'"),
    ("{file}", "names a file but no factory"),
    ("", "no model given"),
    ("gibberish", "cannot tell"),
    ("nothing.pt2", "does not exist"),
])
def test_bad_specs(model_file, spec, match):
    with pytest.raises(SpecError, match=match):
        load_model(spec.format(file=model_file))


def test_syntax_error_names_file_and_line(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import torch\n\ndef make(:\n    pass\n")
    with pytest.raises(SpecError, match=r"syntax error in broken.py line 3"):
        load_model(f"{f}:make")


def test_import_error_inside_file(tmp_path):
    f = tmp_path / "needs.py"
    f.write_text("import not_installed_thing\n")
    with pytest.raises(SpecError, match="importing .*needs.py failed with ModuleNotFoundError"):
        load_model(f"{f}:make")


def test_loaded_factory_runs(model_file):
    lm = load_model(f"{model_file}:make_with_input")
    r = run(lm.module, lm.example_input, Plan(capture=["fc1"]))
    assert r.captures["fc1"][0].shape == (1, 4)
