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


def test_token_views_name_their_rows_by_the_input_tokens(make_window, qtbot):
    prompt = "the pig sat on the "
    win = make_window(["demo:lm", "--input", f"text:{prompt}", "--capture", "blocks.0.mlp,blocks.0.attn.probs"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    panels = {path: p for (path, _), p in win.panel.panels().items()}
    codec = load_model("demo:lm").meaning.codec
    want = codec.token_strings(codec.encode(prompt))
    tokens_view = panels["blocks.0.mlp"]
    assert tokens_view.view_kind == "tokens"
    ticks = tokens_view.view_widget.getPlotItem().getAxis("left")._tickLevels
    assert [s for _, s in ticks[0]] == want
    # the attention pattern is not a token x feature map: its axes keep numbers
    assert panels["blocks.0.attn.probs"].view_widget.getPlotItem().getAxis("left")._tickLevels is None


def test_train_flag_runs_dropout_in_train_mode_with_no_false_difference(make_window, qtbot, tmp_path):
    f = tmp_path / "drop.py"
    f.write_text("import torch\nfrom torch import nn\n\ndef make():\n    torch.manual_seed(0)\n"
                 "    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2)), "
                 "torch.ones(3, 4)\n")
    win = make_window([f"{f}:make", "--train", "--capture", "1"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert win.loaded.module.training
    r = win.last_result
    assert not r.outputs_differ
    kept = r.captures["1"][0].tensor
    assert bool((kept == 0).any())  # dropout did drop: train mode really ran


def test_a_labels_file_names_a_user_classifiers_classes_in_the_cli_and_the_window(
        make_window, qtbot, tmp_path, capsys):
    import json

    from hookscope.app.cli import main

    f = tmp_path / "clf.py"
    f.write_text("import torch\nfrom torch import nn\n\ndef make():\n    torch.manual_seed(3)\n"
                 "    return nn.Sequential(nn.Linear(4, 3)), torch.ones(1, 4)\n")
    names = ["heron", "otter", "vole"]
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
    lm = load_model(f"{f}:make")
    want = names[int(lm.module(lm.example_input)[0].argmax())]
    assert main(["run", f"{f}:make", "--labels", str(tmp_path / "names.txt"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output"]["rows"][0]["top_without"][0]["label"] == want
    win = make_window([f"{f}:make", "--labels", str(tmp_path / "names.txt")])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    cells = win.outputs.meaning_view.cell_texts()  # rows: sample, rank, without, with
    assert cells[0][2].split()[0] == want
    assert sorted(row[2].split()[0] for row in cells) == sorted(names)


def test_the_output_panel_never_draws_its_plots_under_the_token_table(make_window, qtbot):
    """At 1000×650 (stacked docks) the output dock holds its summary, both plots and the
    next-token table one under the other: the table's title used to sit on the
    difference plot's axis label, the dock being shorter than their minimum heights."""
    from PySide6.QtWidgets import QApplication

    win = make_window(["demo:lm", "--input", "text:the owl sat on the ",
                       "--clamp", "blocks.1.mlp=-0.05:0.05"])
    for size in ((1000, 650), (2560, 1440)):
        win.resize(*size)
        qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
        for _ in range(3):
            QApplication.processEvents()
        out = win.outputs
        assert out.meaning_view.isVisible()
        parts = [out.summary, out.legend, out.graphics, out.meaning_view]
        for upper, lower in zip(parts, parts[1:]):
            assert upper.geometry().bottom() < lower.geometry().top(), (size, upper, lower)
        assert out.graphics.height() >= out.graphics.minimumHeight()
