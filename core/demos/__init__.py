"""The built-in demo models (demo:cnn, demo:lm, demo:detector, ...), pure torch. Below the
model floor because ``demo:`` specs resolve to them.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .demo_models import DEMOS, DEMO_DESCRIPTIONS

__all__ = ["DEMOS", "DEMO_DESCRIPTIONS"]
