"""A dataset scan whose shards are spread over a :class:`~.ray_pool.RayPool`.

Each worker runs :func:`~hookscope.core.analyses.scan_shard` unchanged on its own copy of
the model; the shards' partials come back here in order and are merged as one local
scan merges its own (exact top-k with ties to the lower input number, moments merged in
float64, histograms on power-of-two bins), so the result equals :func:`~hookscope.core.analyses.scan`
where both run the same batches. An image folder or a text file is read by the workers
from the same path (a cluster needs it on a shared file system); a ``.pt`` or
``.safetensors`` set travels inside the request.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..analyses import ScanRequest, finish, merge, scan_shard, shards


def _meaning(loaded: Any, _item: Any) -> Any:
    """Task: the model's output meaning (what its scores are, its tokenizer)."""
    return loaded.meaning


def pool_scan(pool: Any, request: ScanRequest, *, shard_size: int = 64,
              progress: Callable[[int, int, float | None], None] | None = None) -> Any:
    """:func:`~hookscope.core.analyses.scan` on ``pool``'s model, ``shard_size`` inputs a
    shard; ``progress(done, total, eta_s)`` here as shards arrive. A shard no live worker
    could compute raises :class:`~.pool_errors.PoolError` naming its inputs."""
    t0 = time.perf_counter()
    meaning = pool.run_one(_meaning, None)
    request.metric_name(meaning)  # a metric the model's output cannot give: refused here
    total = request.size()
    parts = shards(total, max(1, shard_size))
    done = [0]

    def arrived(i: int, _partial: Any) -> None:
        done[0] += len(parts[i])
        if progress is not None:
            el = time.perf_counter() - t0
            progress(done[0], total, el / done[0] * (total - done[0]))

    partials = pool.map(scan_shard, parts, request, on_result=arrived,
                        names=lambda i: f"inputs {parts[i][0]}-{parts[i][-1]}")
    return finish(merge(partials), request, meaning, time.perf_counter() - t0)
