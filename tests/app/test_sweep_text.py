"""The Sweep dock's template written from the Intervention panel's intervention: its layer
and positions (units, heads) become the placeholders of the axes that sweep them; a patch's
source goes to the Source field; a tensor a template cannot spell is refused."""

from __future__ import annotations

import pytest
import torch

from hookscope.core import Add, At, Patch, PlanError, Scale, Zero, parse_intervention
from hookscope.app.sweep_text import pairs, source_binder, template_from


def test_layer_and_positions_become_placeholders():
    iv = Zero(at=At(positions=(3,)))
    assert template_from("blocks.1.mlp", iv, "layer=blocks.*; pos=all") == (
        "{layer}=zero@pos={pos}", None)
    assert template_from("blocks.1.mlp", iv, "unit=0:4") == (
        "blocks.1.mlp=zero@pos=3@units={unit}", None)
    tpl, _ = template_from("conv2", Scale(0.5), "layer=conv1,conv2")
    assert tpl == "{layer}=scale:0.5"
    # what it writes parses back to the intervention (the cell's coordinates filled in)
    assert parse_intervention("zero@pos=3@units=2") == Zero(at=At(positions=(3,), units=(2,)))


def test_a_patch_source_goes_to_the_source_field_and_binds_back():
    tpl, src = template_from("blocks.0", Patch("text:the dog sat on the "), "layer=blocks.*; pos=all")
    assert tpl == "{layer}=patch@pos={pos}" and src == "text:the dog sat on the "
    bound = source_binder(src)({"blocks.0": parse_intervention("patch@pos=4")})
    assert bound["blocks.0"] == Patch("text:the dog sat on the ", at=At(positions=(4,)))
    with pytest.raises(PlanError, match="Source input"):
        source_binder("  ")({"blocks.0": parse_intervention("patch")})


def test_what_a_template_cannot_say_is_refused_with_what_to_do():
    with pytest.raises(PlanError, match="select a layer"):
        template_from("", None, "layer=blocks.*")
    with pytest.raises(PlanError, match="cannot spell"):
        template_from("blocks.0", Add(torch.ones(4)), "layer=blocks.*")
    with pytest.raises(PlanError, match="NAME=VALUE"):
        pairs("layer", "axes")
