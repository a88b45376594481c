"""The window shows a language model's output by meaning: next tokens of the typed text."""

from hookscope.core import load_model, parse_input


def test_demo_lm_with_a_text_input_lists_its_tokens_and_next_tokens(make_window, qtbot):
    prompt = "the owl sat on the "
    win = make_window(["demo:lm", "--input", f"text:{prompt}", "--clamp", "blocks.1.mlp=-0.05:0.05"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    view = win.outputs.meaning_view
    assert view.isVisible()
    lm = load_model("demo:lm")
    codec = lm.meaning.codec
    cells = view.cell_texts()
    assert [c[1] for c in cells] == codec.token_strings(codec.encode(prompt))
    x = parse_input(f"text:{prompt}", lm.example_input, codec)
    top = codec.token_strings([int(lm.module(x)[0, -1].argmax())])[0]
    assert cells[-1][2].split()[0] == top


def test_command_line_wildcards_tick_every_matching_layer(make_window, qtbot):
    win = make_window(["demo:lm", "--capture", "blocks.*.attn.probs"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert set(win.last_result.captures) == {"blocks.0.attn.probs", "blocks.1.attn.probs"}
