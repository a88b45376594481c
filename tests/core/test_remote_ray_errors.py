"""What --ray says when Ray is missing or the address is malformed (no Ray needed)."""

import sys

import pytest

from hookscope.app.cli import main
from hookscope.core.base.extras import MissingExtraError
from hookscope.core.remote.remote_ray import RemoteError, check_address, make_runner


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'hookscope\[ray\]'"):
        make_runner("local")


def test_malformed_address_says_the_three_forms(capsys):
    for bad in ("nowhere", "http://head:10001"):
        with pytest.raises(RemoteError, match="local .*auto .*ray://HOST:PORT"):
            check_address(bad)
    pytest.importorskip("ray")
    assert main(["run", "demo:clamp", "--ray", "nowhere"]) == 2
    assert "ray://HOST:PORT" in capsys.readouterr().err
