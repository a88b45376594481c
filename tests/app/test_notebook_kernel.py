"""explore() in a real IPython kernel with Qt's event loop integrated (``%gui qt``): the cell
returns while the window is open, and the notebook and the window edit one session."""

from __future__ import annotations

import pytest

from kernel_cells import Kernel

pytestmark = pytest.mark.timeout(600)

BUILD = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.tensor([[1.0, 2.0, 3.0]])
"""


@pytest.fixture
def kernel(tmp_path):
    try:
        k = Kernel(tmp_path)
    except RuntimeError as exc:  # the kernel process died or never answered
        pytest.skip(f"an IPython kernel cannot start here: {exc}")
    yield k
    k.close()


def test_explore_from_a_kernel_returns_at_once_and_shares_its_session(kernel, tmp_path):
    kernel.ok("%gui qt")
    kernel.ok(BUILD)
    kernel.ok("from hookscope.app import explore\n"
              "from hookscope.app.notebook import _OPEN\n"
              "s = explore(model, x)\n"
              "win = _OPEN[-1]")
    # the cell above returned, and the window is open and showing the model
    assert kernel.ok("print(win.isVisible(), win.session is s, s.model.module is model)"
                     ).stdout.split() == ["True", "True", "True"]
    kernel.wait_for("s.last_result is not None and not s.busy")  # answers arrive between cells

    # a plan edited from a cell: the window's tree model follows
    kernel.ok("from hookscope.core import Clamp\n"
              "s.capture('0')\n"
              "s.intervene('0', Clamp(-0.5, 0.5))")
    shown = kernel.ok(
        "from PySide6.QtCore import Qt\n"
        "from hookscope.widgets.layer_tree_model import COL_CAPTURE, COL_LO, COL_HI\n"
        "from hookscope.widgets.value_format import format_bound\n"
        "m = win.tree.model\n"
        "print(m.data(m.index_for_path('0', COL_CAPTURE), Qt.ItemDataRole.CheckStateRole)"
        " == Qt.CheckState.Checked)\n"
        "print(m.data(m.index_for_path('0', COL_LO), Qt.ItemDataRole.EditRole) == format_bound(-0.5))\n"
        "print(m.data(m.index_for_path('0', COL_HI), Qt.ItemDataRole.EditRole) == format_bound(0.5))")
    assert shown.stdout.split() == ["True", "True", "True"]

    # a clamp changed through the window's own model: the notebook's session has it
    kernel.ok("ok = m.setData(m.index_for_path('0', COL_HI), '0.2', Qt.ItemDataRole.EditRole)")
    assert kernel.ok("print(ok, s.plan.clamp['0'])").stdout.strip() == "True (-0.5, 0.2)"

    # a run from a cell: the result in the notebook (HTML) and in the window
    cell = kernel.ok("r = s.run(timeout_s=60)\nr")
    html = cell.data.get("text/html", "")
    assert "Hookscope comparison" in html and "data:image/png;base64," in html
    assert "<td>0</td>" in html  # the captured layer's row
    kernel.ok("assert s.last_result is r and r.plan.clamp['0'] == (-0.5, 0.2)")
    kernel.wait_for("win.last_result is r and win.status is not None and not s.busy")
    kernel.ok("import torch\n"
              "want = model[2](model[1](model[0](x).clamp(-0.5, 0.2)))\n"
              "assert torch.equal(r.output_with, want.detach())")

    # the window as the kernel shows it
    shot = tmp_path / "window.png"
    kernel.ok(f"win.resize(1200, 800)\nwin.grab().save({str(shot)!r}, 'PNG')")
    from PIL import Image

    img = Image.open(shot)
    assert img.size[0] >= 1200 and len(img.convert("RGB").getcolors(1 << 24)) > 50

    # closing the window leaves the session readable, and says it runs no more
    kernel.ok("win.close()")
    closed = kernel.run("s.run(timeout_s=5)")
    assert closed.status == "error" and "closed" in closed.error
    assert kernel.ok("print(s.plan.clamp['0'], s.last_result is r)").stdout.strip() == "(-0.5, 0.2) True"


HF_BUILD = """
import sys
sys.path.insert(0, {core_tests!r})
from pathlib import Path
import hf_models
from transformers import AutoTokenizer, GPT2LMHeadModel
folder = hf_models.gpt2(Path({folder!r}))
model = GPT2LMHeadModel.from_pretrained(folder)
tok = AutoTokenizer.from_pretrained(folder)
"""


def test_a_hugging_face_model_and_its_tokenizer_from_a_kernel(kernel, tmp_path):
    from pathlib import Path

    core_tests = str(Path(__file__).resolve().parents[1] / "core")
    kernel.ok("%gui qt")
    kernel.ok(HF_BUILD.format(core_tests=core_tests, folder=str(tmp_path / "gpt2")), timeout_s=180)
    kernel.ok("from hookscope.app import explore\n"
              "from hookscope.app.notebook import _OPEN\n"
              "s = explore(model, 'the dog sat on the', tokenizer=tok)\n"
              "win = _OPEN[-1]")
    assert kernel.ok("print(win.isVisible(), s.model.module is model)").stdout.split() == [
        "True", "True"]
    kernel.wait_for("win.last_result is not None and not s.busy", timeout_s=120)
    # the window reads the output as next tokens, named by the notebook's tokenizer
    kernel.ok("texts = win.outputs.meaning_view.cell_texts()\n"
              "ids = tok('the dog sat on the', return_tensors='pt')\n"
              "import torch\n"
              "with torch.no_grad():\n"
              "    top = int(model(**ids).logits[0, -1].argmax())\n"
              "from hookscope.core.base.text_codec import readable\n"
              "name = readable(tok.convert_ids_to_tokens([top])[0])\n"
              "assert any(name in cell for row in texts for cell in row), (name, texts[-3:])")
    kernel.ok("from hookscope.core import Scale\n"
              "s.intervene('transformer.h.0.mlp', Scale(0.0))")
    kernel.ok("from hookscope.widgets.layer_tree_model import COL_INTERVENTION\n"
              "from PySide6.QtCore import Qt\n"
              "m = win.tree.model\n"
              "shown = m.data(m.index_for_path('transformer.h.0.mlp', COL_INTERVENTION),"
              " Qt.ItemDataRole.DisplayRole)\n"
              "assert shown and 'scale' in str(shown).lower(), shown")
    cell = kernel.ok("r = s.run(timeout_s=120)\nr", timeout_s=150)
    assert "Next token" in cell.data.get("text/html", "")
    kernel.ok("win.close()")


def test_the_example_notebook_runs(kernel, tmp_path):
    """resources/explore.ipynb, cell by cell, in a kernel working in a temporary folder."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "resources" / "explore.ipynb")
                    .read_text())
    kernel.ok(f"import os\nos.chdir({str(tmp_path)!r})")
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for code in cells:
        kernel.ok(code)
    kernel.ok("import pandas\n"
              "assert isinstance(r.to_dataframe(), pandas.DataFrame)\n"
              "from hookscope.app.notebook import _OPEN\n"
              "assert _OPEN[-1].session is s and s.plan.clamp['2'] == (0.0, 0.5)\n"
              "_OPEN[-1].close()")
    assert (tmp_path / "explore.weights.pt").is_file()
    assert (tmp_path / "explore.hookscope.json").is_file()
