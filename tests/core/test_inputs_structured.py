"""Keyword inputs, positional + keyword, text through a tokenizer, .safetensors, random alike."""

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from hookscope.core import InputError, Plan, compare, parse_input
from hookscope.core.base.call_args import CallArgs
from hookscope.core.base.text_codec import CharCodec

IDS = {"input_ids": torch.tensor([[5, 7, 9]]), "attention_mask": torch.ones(1, 3, dtype=torch.long)}


class MaskedSum(nn.Module):
    """forward(ids, attention_mask=None): embeds, zeroes masked positions, sums."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(10, 4)

    def forward(self, input_ids, attention_mask=None):
        e = self.embed(input_ids)
        if attention_mask is not None:
            e = e * attention_mask.unsqueeze(-1)
        return e.sum(1)


def test_dict_literal_and_json_give_keyword_tensors():
    got = parse_input('{"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1, 0]]}', IDS)
    assert list(got) == ["input_ids", "attention_mask"]
    assert got["input_ids"].dtype == torch.long and got["attention_mask"].tolist() == [[1, 1, 0]]
    js = parse_input('{"x": [1.5, 2.0], "flag": [true, false]}')
    assert js["x"].dtype == torch.float32 and js["flag"].dtype == torch.bool


def test_positional_and_keyword_together_call_the_model_both_ways():
    model = MaskedSum()
    x = parse_input('([[1, 2, 3]], {"attention_mask": [[1, 0, 1]]})', torch.tensor([[0, 0, 0]]))
    assert isinstance(x, CallArgs) and x.args[0].dtype == torch.long
    r = compare(model, x, Plan(capture=["embed"]))
    with torch.no_grad():
        want = model(torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[1, 0, 1]]))
    assert torch.equal(r.output_with, want) and r.calls["embed"] == 1


def test_random_honours_every_key_of_a_dict_example():
    got = parse_input("random:1x6:seed=3", IDS)
    assert set(got) == {"input_ids", "attention_mask"}
    assert got["input_ids"].shape == (1, 6) and got["input_ids"].dtype == torch.long
    assert int(got["input_ids"].max()) <= 9  # below the example's largest id + 1
    assert torch.equal(got["attention_mask"], torch.ones(1, 6, dtype=torch.long))
    same = parse_input("random", IDS)
    assert same["input_ids"].shape == IDS["input_ids"].shape
    assert torch.equal(parse_input("random:1x6:seed=3", IDS)["input_ids"], got["input_ids"])
    assert not torch.equal(parse_input("random:1x6:seed=4", IDS)["input_ids"], got["input_ids"])
    tup = parse_input("random:seed=0", (torch.zeros(2, 3), torch.tensor([1, 4])))
    assert isinstance(tup, tuple) and tup[0].dtype == torch.float32 and tup[1].dtype == torch.long


def test_safetensors_and_pt_dicts_are_keyword_inputs(tmp_path):
    f = tmp_path / "in.safetensors"
    save_file({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 1]])}, str(f))
    got = parse_input(str(f), IDS)
    assert got["input_ids"].tolist() == [[1, 2]] and set(got) == {"input_ids", "attention_mask"}
    p = tmp_path / "in.pt"
    torch.save({"input_ids": torch.tensor([[3]])}, p)
    assert parse_input(str(p))["input_ids"].tolist() == [[3]]


def test_text_goes_through_the_codec_shaped_like_the_example():
    codec = CharCodec("?abc ")
    t = parse_input("text:ab c", torch.tensor([[1, 2]]), codec)
    assert t.tolist() == [codec.encode("ab c")] and t.dtype == torch.long
    d = parse_input("text:cab", IDS, codec)
    assert d["input_ids"].tolist() == [codec.encode("cab")]
    assert torch.equal(d["attention_mask"], torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(InputError, match="tokenizer"):
        parse_input("text:hello", torch.tensor([[1]]))
    with pytest.raises(InputError, match="prompt"):
        parse_input("text:", torch.tensor([[1]]), codec)


def test_bad_structured_inputs_say_what_to_write():
    with pytest.raises(InputError, match="neither a Python literal nor JSON"):
        parse_input('{"input_ids": [[1, 2}', IDS)
    with pytest.raises(InputError, match="not a Python name"):
        parse_input('{"input ids": [[1]]}', IDS)
    with pytest.raises(InputError, match="rectangular"):
        parse_input('{"input_ids": [[1, 2], [3]]}', IDS)
