"""The window drives a model in a Ray actor exactly as a local one (hookscope SPEC --ray local)."""

import inspect

import pytest
import torch

from hookscope.app.main_window import MainWindow

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")
pytestmark = [pytest.mark.ray, pytest.mark.skipif(
    "runner_factory" not in inspect.signature(MainWindow).parameters,
    reason="the window takes a runner factory once it runs on the session's runner")]


@pytest.fixture(scope="module")
def ray_local():
    from hookscope.core.remote.remote_ray import connect

    connect("local", num_cpus=1)
    yield
    ray.shutdown()


def test_window_on_ray_shows_what_the_local_window_shows(ray_local, make_window, qtbot):
    argv = ["demo:features", "--capture", "fc1,fc2", "--clamp", "fc1=-0.2:0.2"]
    wins = [make_window(argv), make_window(argv + ["--ray", "local"])]
    for w in wins:
        qtbot.waitUntil(lambda w=w: w.last_result is not None and w.is_idle(), timeout=90_000)
    local, remote = (w.last_result for w in wins)
    assert torch.equal(local.output_with, remote.output_with) and remote.outputs_differ
    assert remote.transfer.total > 0
    for path in ("fc1", "fc2"):
        assert torch.equal(local.captures[path][0].tensor, remote.captures[path][0].tensor)
    assert [n.path for n in wins[0].session.tree.walk()] == [n.path for n in wins[1].session.tree.walk()]


def test_live_steps_and_errors_on_ray_as_locally(ray_local, make_window, qtbot):
    from hookscope.core import Clamp

    argv = ["demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5", "--live"]
    wins = [make_window(argv), make_window(argv + ["--ray", "local"])]
    for w in wins:
        qtbot.waitUntil(lambda w=w: w.last_result is not None and w.is_idle(), timeout=90_000)
        for hi in (0.4, 0.3, 0.2, 0.1):  # a dragged bound: newest wins
            w.session.intervene("0", Clamp(-0.5, hi), merge="drag")
        qtbot.waitUntil(lambda w=w: w.is_idle() and w.last_result.plan.clamp["0"] == (-0.5, 0.1),
                        timeout=90_000)
    local, remote = (w.last_result for w in wins)
    assert torch.equal(local.output_with, remote.output_with)
    assert torch.equal(local.captures["0"][0].tensor, remote.captures["0"][0].tensor)
    for w in wins:  # a bad input is the same message in both, and the window stays usable
        w.session.set_input("[[1.0, 2.0]]")
        qtbot.waitUntil(lambda w=w: w.is_idle() and bool(w.error_text()), timeout=90_000)
    assert wins[0].error_text() == wins[1].error_text()


def test_text_prompt_on_ray_shows_the_local_tokens(ray_local, make_window, qtbot):
    prompt = "the pig sat on the "
    argv = ["demo:lm", "--input", f"text:{prompt}", "--capture", "blocks.0.mlp"]
    wins = [make_window(argv), make_window(argv + ["--ray", "local"])]
    for w in wins:
        qtbot.waitUntil(lambda w=w: w.last_result is not None and w.is_idle(), timeout=90_000)
    local, remote = wins
    assert remote.error_text() == ""
    torch.testing.assert_close(local.last_result.output_with, remote.last_result.output_with)
    # The prompt's tokens on the token axis and in the next-token table, as locally.
    ticks = [w.panel.panels()[("blocks.0.mlp", 0)].view_widget.getPlotItem().getAxis("left")
             ._tickLevels[0] for w in wins]
    assert [s for _, s in ticks[1]] == [s for _, s in ticks[0]] and len(ticks[0]) == len(prompt)
    cells = [w.outputs.meaning_view.cell_texts() for w in wins]
    assert [c[1] for c in cells[1]] == [c[1] for c in cells[0]]
    assert [c[2].split()[0] for c in cells[1]] == [c[2].split()[0] for c in cells[0]]
