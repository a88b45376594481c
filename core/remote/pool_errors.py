"""What a :class:`~.ray_pool.RayPool` raises (apart from the errors its tasks raise)."""

from __future__ import annotations

from typing import Sequence

from .remote_ray import RemoteError


class PoolError(RemoteError):
    """Items a map could not compute (``missing``: their names), or a pool that cannot start."""

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = list(missing)


class PoolTaskError(PoolError):
    """The task raised on one item (named in the message, and in ``missing``)."""
