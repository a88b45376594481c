"""A runner whose loads go through accelerate's dispatch (models larger than one device).

The factory lives with the runner it extends; the dispatch itself is
:mod:`hookscope.core.model.dispatch`.
"""

from __future__ import annotations

from ..model.dispatch import DeviceMapOptions, load_dispatched
from .runner import Loaded, LocalRunner
from ..model.tree import module_tree


def dispatching_runner(opts: DeviceMapOptions):
    """A runner factory (``factory(listener) -> runner``) whose loads go through
    :func:`load_dispatched`: the session's local runner for a model that needs a device map."""
    class DispatchingRunner(LocalRunner):
        def _load(self, job, req):  # the one step that differs from the local runner
            lm = load_dispatched(req.spec, req.weights, opts, req.trust_pickle, req.trust)
            tree = module_tree(lm.module)
            with self._cv:
                self.counts.loads_done += 1
            return Loaded(job.rid, lm, tree)

    return lambda listener=None: DispatchingRunner(listener)
