"""The runner on a Ray actor, and the actor; a pool of actors for sweeps and other maps.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .ray_actor import is_text_input
from .pool_scan import pool_scan
from .pool_sweep import SweepJob, pool_sweep
from .pool_sweep_inputs import InputsJob, pool_sweep_inputs
from .pool_errors import PoolError, PoolTaskError
from .ray_pool import PoolModel, RayPool
from .remote_ray import RemoteError, RemoteModel, RemoteModelSession, make_runner

__all__ = ["InputsJob", "PoolError", "PoolModel", "PoolTaskError", "RayPool", "RemoteError", "RemoteModel",
           "RemoteModelSession", "SweepJob", "is_text_input", "make_runner", "pool_scan",
           "pool_sweep", "pool_sweep_inputs"]
