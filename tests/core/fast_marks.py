"""Marks for tests of the speed-ups (hookscope.core.fast): ``make test`` runs tests/core
twice, with them on (the default) and off (``HOOKSCOPE_FAST=0``, the reference path)."""

import pytest

from hookscope.core.engine import fast_slot

#: The test checks something only the speed-ups do (their internals, their own cost).
fast_only = pytest.mark.skipif(fast_slot.active() is None,
                               reason="checks the speed-ups, switched off by HOOKSCOPE_FAST=0")
