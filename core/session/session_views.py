"""The views a session's runs compute beside the comparison, and the SAEs attached to its layers.

:class:`DerivedViews` is owned by a :class:`~hookscope.core.session.session.Session`
(composition: it holds no reference back). It keeps the views every run also
computes, by name (the window's logit lens, generation and SAE panels:
:meth:`Session.set_derived`), the SAE folders attached to layers, and makes the
requests of the session's one-off views (:meth:`Session.lens`, ``generate``,
``sweep``, ``sae_features``), whose answers it reads out of a run's result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..analyses import (DEFAULT_BUDGET, DEFAULT_MAX_CELLS, GenerateRequest, LensRequest, SaeRequest,
                        ScanJob, ScanRequest, SweepRequest)
from ..base.errors import HookscopeError, PlanError
from ..dataset import open_inputs
from ..model.loaded_model import LoadedModel
from ..model.sae import SparseAutoencoder, attach_sae
from ..model.tree import TreeNode
from .runner_messages import ViewFailed


class DerivedViews:
    """Views by name that every run computes, and SAE folders by layer path."""

    def __init__(self) -> None:
        #: ``{name: view}``: each run also computes these (``result.extras[name]``)
        self.by_name: dict[str, Any] = {}
        #: ``{layer path: SAE folder}`` attached to the open model
        self.saes: dict[str, str] = {}

    def set(self, name: str, view: Any | None) -> bool:
        """Compute ``view`` on every run from now on (``None``: stop); whether that changed."""
        if view is None:
            return self.by_name.pop(name, None) is not None
        changed = self.by_name.get(name) != view
        self.by_name[name] = view
        return changed

    def for_run(self, extra: tuple = ()) -> tuple:
        """What a run computes: every view set, and ``extra`` (one-off views; a name
        given both ways is computed once, as ``extra`` says)."""
        return tuple({**self.by_name, **{v.name: v for v in extra}}.values())

    def attach_sae(self, model: LoadedModel, tree: TreeNode | None, layer: str,
                   folder: str | Path, sae: SparseAutoencoder | None = None) -> Any:
        """Attach the SAE in ``folder`` (``sae``: already read from it) to ``layer`` of
        ``model``; refused where the width differs from the layer's output as a run has
        shown it."""
        node = tree.find(layer) if tree is not None else None
        shape = node.output_shape if node is not None else None
        sae = attach_sae(model.module, layer, sae or folder, shape[-1] if shape else None)
        self.saes[layer] = str(folder)
        return sae

    # -- the one-off views: a request, and its answer read out of the result -------------
    @staticmethod
    def lens(target: str | int | None, head: str | None, top_k: int) -> LensRequest:
        return LensRequest(head, target, top_k)

    @staticmethod
    def generation(n: int, temperature: float, seed: int, cache: bool = True,
                   check_cache: bool = False) -> GenerateRequest:
        return GenerateRequest(n, temperature, seed, cache=cache, check_cache=check_cache)

    @staticmethod
    def sweep(over: Any, intervene: Any, metric: Any, max_cells: int | None,
              progress: Callable[[int, int], None] | None, batch: bool | int = True,
              normalise: bool = False, estimate: bool = False, verify: int = 0,
              inputs: Any = None, model: LoadedModel | None = None) -> SweepRequest:
        """The request of :meth:`Session.sweep`; ``inputs`` (an input set, or the file or
        folder :func:`~hookscope.core.dataset.open_inputs` reads) read as ``model`` takes them."""
        items = names = None
        if inputs is not None:
            if model is None:
                raise HookscopeError("no model is open: load one first (Session.load(spec))")
            iset = open_inputs(inputs) if isinstance(inputs, (str, Path)) else inputs
            items = [iset.item(i, model.example_input, model.meaning.codec)
                     for i in range(len(iset))]
            names = [iset.describe(i) for i in range(len(iset))]
        return SweepRequest(over, intervene, metric, max_cells or DEFAULT_MAX_CELLS, progress,
                            batch=batch, normalise=normalise, estimate=estimate, verify=verify,
                            input_set=items, input_names=names)

    def sae_report(self, layers: tuple[str, ...], top_k: int) -> SaeRequest:
        return SaeRequest(tuple(layers or self.saes), top_k)

    @staticmethod
    def scan(inputs: Any, capture: Any, intervene: Any, metric: Any, plan: Any, device: str,
             top_k: int, limit: int | None, budget_bytes: int | None, progress: Any) -> ScanJob:
        """The job of :meth:`Session.scan`: ``capture``/``intervene`` default to ``plan``'s."""
        iset = open_inputs(inputs) if isinstance(inputs, (str, Path)) else inputs
        req = ScanRequest(iset, tuple(plan.capture if capture is None else capture),
                          dict(plan.interventions if intervene is None else intervene), metric,
                          top_k=top_k, device=device, limit=limit,
                          budget_bytes=budget_bytes or DEFAULT_BUDGET)
        return ScanJob(req, progress)

    @staticmethod
    def sweep_on_pool(pool: Any, model: LoadedModel | None, input_text: str, device: str,
                      over: Any, intervene: Any, metric: Any, max_cells: int | None,
                      progress: Any, batch: bool | int, normalise: bool, estimate: bool = False,
                      verify: int = 0, inputs: Any = None) -> Any:
        """:meth:`Session.sweep` over a pool of workers holding the session's model
        (``inputs``: an input set, or the file or folder it is read from, in shards)."""
        if model is None:
            raise HookscopeError("no model is open: load one first (Session.load(spec))")
        held = (pool.model.spec, pool.model.weights)
        if held != (model.spec, model.weights):
            raise HookscopeError(f"the pool's workers hold {held[0]!r}, the session "
                                 f"{model.spec!r} (weights {model.weights!r}): "
                                 "start the pool with the session's model")
        if normalise:
            raise HookscopeError("normalise runs in this process only: sweep without pool=")
        options = dict(device=device, max_cells=max_cells or DEFAULT_MAX_CELLS,
                       progress=progress, batch=batch, estimate=estimate, verify=verify)
        if inputs is not None:
            iset = open_inputs(inputs) if isinstance(inputs, (str, Path)) else inputs
            return pool.sweep_inputs(iset, over, intervene, metric, **options)
        return pool.sweep(input_text, over, intervene, metric, **options)

    @staticmethod
    def answer(result: Any, view: Any) -> Any:
        """``view``'s answer in a run's ``result``; a view that failed raises its message."""
        value = result.extras[view.name]
        if isinstance(value, ViewFailed):
            raise PlanError(value.message)
        return value

