"""What the engine learned about one model by running it: :class:`ModelMemory`.

Some facts about a model are only found by running it: which captured layers
a later in-place op overwrites (their captures must be copied), whether its
forward needs autograd, and, for the speed-ups of ``hookscope.core.fast``,
which layers were already watched for in-place writes and which victims
cannot be computed again from their input. Each is learned once and used by
every later run of the same model, e.g. each step of a Live drag.

They live in one object per model: a :class:`~.loaded_model.LoadedModel`
holds one, :func:`~hookscope.core.engine.run.compare` and ``run`` take one
(``memory=``), and a module run without one gets its own default
(:func:`memory_for`). :meth:`ModelMemory.reset` forgets everything, e.g.
after a model's code changed in place.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from torch import nn

from ..base.nested import tensor_leaves


@dataclass
class ModelMemory:
    """The learned per-model facts (see the module docstring)."""

    #: Layers whose kept capture a later in-place op overwrote: copied at capture time.
    victims: set[str] = field(default_factory=set)
    #: Captured layers already watched for in-place writes by a guarded first run
    #: (``hookscope.core.fast``); a later run does not watch them again.
    watched: set[str] = field(default_factory=set)
    #: Victims whose capture cannot be computed again from their input on first read
    #: (a run found that input, or the layer's statistics, changed in place): copied.
    no_remake: set[str] = field(default_factory=set)
    #: The model's forward needs autograd (it differentiates inside ``forward``).
    needs_grad: bool = False
    #: Whether watching its first run under a dispatch guard is worth it (``None``: not
    #: decided yet; see ``hookscope.core.fast.inplace_guard.worth_guarding``).
    guard_worth: bool | None = None
    #: The input signatures (each tensor leaf's shape, dtype and device) a forward of this
    #: model has run on in this process: the first forward on a new one carries one-time
    #: set-up (torch picks and readies the kernels for those shapes), so a comparison whose
    #: baseline is that forward says so (``RunResult.first_run``) instead of passing the
    #: set-up off as the model's time.
    ran_on: set[tuple] = field(default_factory=set)

    def first_forward_on(self, inputs: object) -> bool:
        """Whether no forward of the model has run on inputs like ``inputs`` (the same
        tensor shapes, dtypes and devices) yet; notes that one runs now."""
        sig = tuple((tuple(t.shape), t.dtype, t.device) for _, t in tensor_leaves(inputs))
        new = sig not in self.ran_on
        self.ran_on.add(sig)
        return new

    def reset(self) -> None:
        """Forget every learned fact: the next run learns them again."""
        self.victims.clear()
        self.watched.clear()
        self.no_remake.clear()
        self.needs_grad = False
        self.guard_worth = None
        self.ran_on.clear()


# The memory of a module run without one (a script calling compare(module, ...)). One
# entry per live module, dropped with it; a LoadedModel shares its module's entry.
_DEFAULTS: "weakref.WeakKeyDictionary[nn.Module, ModelMemory]" = weakref.WeakKeyDictionary()


def memory_for(module: nn.Module, memory: ModelMemory | None = None) -> ModelMemory:
    """``memory`` if given, else ``module``'s default memory (made on first use)."""
    if memory is not None:
        return memory
    got = _DEFAULTS.get(module)
    if got is None:
        got = _DEFAULTS[module] = ModelMemory()
    return got
