"""``hookscope sweep --inputs`` with sets it cannot use: an empty set, an input the model
cannot take, a grid that differs between inputs, options it does not combine with. Each is
refused in one line with status 2, naming the input where one is at fault."""

from __future__ import annotations

import pytest

from hookscope.app.cli import main

ARGS = ["--over", "layer=blocks.*", "--intervene", "{layer}=zero@pos=-1", "--metric", "logit:e"]


def _refused(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("hookscope: error: ") and err.count("\n") == 1, err
    return err


def test_an_empty_set_is_refused(tmp_path, capsys):
    f = tmp_path / "none.txt"
    f.write_text("\n\n")
    err = _refused(capsys, ["sweep", "demo:lm", "--inputs", str(f), *ARGS])
    assert "none.txt" in err and "no line of text" in err


def test_an_input_the_model_cannot_take_is_named(tmp_path, capsys):
    f = tmp_path / "prompts.txt"
    # demo:lm reads at most 64 characters: the third prompt is too long
    f.write_text("the cat sat\na dog ran\n" + "x" * 80 + "\nhi\n")
    # the error comes once the model has run (quiet: no announcement before it)
    err = _refused(capsys, ["sweep", "demo:lm", "--inputs", str(f), *ARGS, "-q"])
    assert "input 2 (xxxx" in err and "cannot take it" in err and "at most 64" in err


def test_a_grid_that_differs_between_inputs_names_the_input(tmp_path, capsys):
    f = tmp_path / "prompts.txt"
    f.write_text("the cat sat\na dog\n")
    err = _refused(capsys, ["sweep", "demo:lm", "--inputs", str(f), "--over", "pos=all",
                            "--intervene", "blocks.0=zero@pos={pos}"])
    assert "input 1 (a dog) gives a different grid" in err


@pytest.mark.parametrize("more, words", [
    (["--input", "text:the cat"], "give one"),
    (["--normalise"], "--normalise runs on one input"),
])
def test_options_it_does_not_combine_with_are_refused(tmp_path, capsys, more, words):
    f = tmp_path / "prompts.txt"
    f.write_text("the cat sat\n")
    err = _refused(capsys, ["sweep", "demo:lm", "--inputs", str(f), *ARGS, *more])
    assert words in err


def test_sweep_over_an_empty_list_is_refused_before_any_forward():
    from hookscope.core import InputError, load_model
    from hookscope.core.analyses import sweep

    lm = load_model("demo:lm")
    with pytest.raises(InputError, match="the input set is empty"):
        sweep(lm.module, None, {"layer": "blocks.*"}, {"{layer}": "zero"}, "logit:e",
              meaning=lm.meaning, input_set=[])
