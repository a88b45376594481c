"""The engine: what one run needs. Hooks and their handles, CaptureRecord, statistics,
run/compare, output difference, receipts, verdict, forward state and the source pass of
a patch. It is complete and correct on its own (the reference path);
the speed-ups of hookscope.core.fast plug in through :mod:`.fast_slot`, and
``HOOKSCOPE_FAST=0`` switches them off. The analyses built on runs (sweep, lens,
generation, SAE features, steering vectors, scans, the capture budget's measuring pass)
live a floor above, in :mod:`hookscope.core.analyses`.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .fast_slot import FAST_ENV
from .output_diff import flat_array, flat_floats
from .receipts import plan_effect
from .capture_record import ModelPair
from .record_stats import reference_of, version_names
from .verdict import output_verdict

__all__ = ["FAST_ENV", "flat_array", "flat_floats", "output_verdict",
           "plan_effect", "reference_of", "version_names", "ModelPair"]
