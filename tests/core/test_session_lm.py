"""Session files keep the SAEs attached to layers and the open LM views' settings: a session
saved and reopened attaches the same SAEs, computes the same views and gives the same numbers."""

from __future__ import annotations

import json
import shutil
from importlib.resources import files

import torch

from hookscope.core import SaeAblate, SaeScale, Session
from hookscope.core.analyses import AttentionRequest, GenerateRequest, LensRequest, SaeRequest

PROMPT = "text:the cat sat on the"


def _demo_sae_copy(folder):
    shutil.copytree(str(files("hookscope.resources").joinpath("demo_sae")), folder)
    return folder


def test_saes_and_lm_views_survive_a_session_round_trip(tmp_path):
    own = _demo_sae_copy(tmp_path / "saes" / "mine")
    views = (LensRequest(None, " the", 3), GenerateRequest(4, 0.7, 11, top_k=3, cache=False),
             AttentionRequest(("blocks.0.attn", "blocks.1.attn")), SaeRequest(("blocks.0", "blocks.1"), 4))
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        s.attach_sae("blocks.0", "demo")
        s.attach_sae("blocks.1", own)
        s.intervene("blocks.0", SaeAblate((1, 2, 3)))
        s.intervene("blocks.1", SaeScale((5,), 3.0))
        for v in views:
            s.set_derived(v.name, v)
        before = s.run()
        path = s.save(tmp_path / "lm.hookscope.json")
    finally:
        s.close()
    d = json.loads(path.read_text())
    assert d["version"] == 2
    assert d["saes"] == {"blocks.0": "demo", "blocks.1": "saes/mine"}  # relative: the folder moves whole
    assert d["views"]["generation"] == {"n": 4, "temperature": 0.7, "seed": 11, "top_k": 3,
                                        "cache": False, "check_cache": False}
    assert d["views"]["attention"]["layers"] == ["blocks.0.attn", "blocks.1.attn"]

    moved = tmp_path.parent / (tmp_path.name + "-moved")
    shutil.move(str(tmp_path), moved)
    r = Session.open_file(moved / "lm.hookscope.json")
    try:
        assert r.saes == {"blocks.0": "demo", "blocks.1": str(moved / "saes" / "mine")}
        assert r.load_warnings == []
        assert tuple(r.derived.values()) == views
        after = r.run()
    finally:
        r.close()
    # the same computation in the same process: bit for bit
    assert torch.equal(before.output_with, after.output_with)
    assert not torch.equal(after.output_with, after.output_without)  # the SAE edits acted
    for name in ("lens", "generation", "attention", "sae"):
        assert json.dumps(before.extras[name].to_json_dict()) == \
            json.dumps(after.extras[name].to_json_dict()), name


def test_a_version_1_file_still_opens(tmp_path):
    path = tmp_path / "old.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                "model": {"spec": "demo:lm"}}))
    s = Session.open_file(path)
    try:
        assert s.saes == {} and s.derived == {}
    finally:
        s.close()


def test_a_cli_run_saved_with_sae_and_views_reruns_them_from_the_file(tmp_path, capsys):
    from hookscope.app.cli import main

    path = tmp_path / "cli.hookscope.json"
    argv = ["--sae", "blocks.0=demo", "--intervene", "blocks.0=sae-ablate:1,2,3", "--lens", "logit",
            "--generate", "3", "--attention", "blocks.1.attn"]
    assert main(["run", "demo:lm", "--input", PROMPT, *argv, "--save-session", str(path),
                 "--json", "--quiet"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["run", "--session", str(path), "--json", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    for name in ("lens", "generation", "attention", "sae", "output_with"):
        assert first[name] == again[name], name
