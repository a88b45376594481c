"""The language-model views on a Ray actor equal local: the logit lens, a generation, attention
patterns and SAE features (the SAE attached on the client travels with the run), from the CLI
(``hookscope run --ray local``) and from a Session whose runner is a RayRunner.

One local Ray instance for the module (about 40 s to start here). The model is the same demo
with the same weights in both processes, so the numbers agree to float32 rounding: every float
is compared with rel 1e-5, abs 1e-5 (the JSON rounds to 6 decimals); token ids, strings and
counts exactly.
"""

from __future__ import annotations

import json
import math

import pytest

from hookscope.app.cli import main
from hookscope.core import SaeAblate, Session
from hookscope.core.analyses import AttentionRequest, GenerateRequest, LensRequest, SaeRequest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")
pytestmark = pytest.mark.ray

from hookscope.core.remote.remote_ray import connect, make_runner  # noqa: E402

VIEWS = ("lens", "generation", "attention", "sae")


@pytest.fixture(scope="module")
def ray_local():
    connect("local", num_cpus=1, include_dashboard=False)
    yield ray
    ray.shutdown()


def assert_json_close(a, b, where="$"):
    """Equal structure, equal ids and strings; floats within float32 rounding."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), where
        if math.isnan(a):
            assert math.isnan(b), where
        else:
            assert a == pytest.approx(b, rel=1e-5, abs=1e-5), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            assert_json_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_json_close(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _run_json(argv, capsys):
    rc = main(["run", *argv])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)


def test_cli_lm_views_on_ray_equal_local(ray_local, capsys):
    argv = ["demo:lm", "--input", "text:the cat sat on", "--lens", "logit", "--generate", "5",
            "--attention", "blocks.0.attn", "--sae", "blocks.0=demo",
            "--intervene", "blocks.0=sae-ablate:1,2,3,5,8", "--json"]
    here, there = _run_json(argv, capsys), _run_json(argv + ["--ray", "local"], capsys)
    for name in VIEWS:
        assert name in here and name in there, name
        assert_json_close(here[name], there[name], name)
    assert_json_close(here["output"], there["output"], "output")
    assert here["generation"]["with"] != here["generation"]["without"] or \
        here["sae"]["blocks.0"]["top_with"] != here["sae"]["blocks.0"]["top_without"]


def test_a_ray_session_computes_the_lm_views_as_a_local_one(ray_local):
    views = (LensRequest(None, " the", 3), GenerateRequest(4, 0.8, 5),
             AttentionRequest(("blocks.1.attn",)), SaeRequest(("blocks.1",), 4))
    results = []
    for factory in (make_runner("local"), None):
        s = Session(runner_factory=factory) if factory else Session()
        try:
            s.open_model("demo:lm", input_text="text:a dog ran", run_after=False).result(120)
            s.attach_sae("blocks.1", "demo")
            s.intervene("blocks.1", SaeAblate((0, 4, 9)))
            for v in views:
                s.set_derived(v.name, v)
            results.append(s.run(timeout_s=120))
        finally:
            s.close()
    there, here = results
    for name in VIEWS:
        assert_json_close(here.extras[name].to_json_dict(), there.extras[name].to_json_dict(), name)
