"""The runner on a Ray actor, and the actor.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .ray_actor import is_text_input
from .remote_ray import RemoteModel, RemoteModelSession, make_runner

__all__ = ["RemoteModel", "RemoteModelSession", "is_text_input", "make_runner"]
