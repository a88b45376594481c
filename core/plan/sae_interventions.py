"""Interventions over an SAE's features: ablate, clamp or scale chosen features of
the SAE attached to the layer (:func:`~hookscope.core.model.sae.attach_sae`).

The layer's output ``x`` is encoded to features ``f``; the edit gives ``f'``;
the output becomes ``x + decode(f') - decode(f)`` (``decode_change``), which is ``decode(f') + (x -
decode(f))``: the edited reconstruction with the SAE's reconstruction error
added back. Written as a difference, an edit that changes no feature leaves the
output exactly as it was (bit for bit), and only what the edit changed moves.

``sae-ablate:12,40`` zeroes features 12 and 40; ``sae-clamp:12=5.0`` sets
feature 12 to 5.0 at every position; ``sae-scale:12=0.5`` halves it. The first
tensor leaf of the layer's output is changed (the residual stream of a block
returning a tuple); other leaves pass through. Pure torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch

from ..base.errors import PlanError
from .aim import aimed, fits
from .at import At
from .intervention_base import Intervention, InterventionContext, _no_fit_message
from .param_values import check_number, param
from ..base.nested import map_tensors_keyed
from ..model.sae import SparseAutoencoder, attached_sae
from .intervention_registry import register
from .sae_leaf import SAE_HELPERS, sae_ablate_leaf, sae_clamp_leaf, sae_scale_leaf


class SaeEdit(Intervention):
    """What the three kinds share: the features, finding the SAE, the difference."""

    features: tuple[int, ...]
    per_position: ClassVar[bool] = True  # the SAE encodes and decodes each token alone
    leaf_kinds: ClassVar[str] = "first"  # the first floating-point leaf (the residual stream)
    # the exported script's form (:mod:`.sae_leaf`): the SAE's weights travel beside it
    leaf_helpers: ClassVar[tuple[Callable[..., Any], ...]] = SAE_HELPERS

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(int(u) for u in (self.features or ())))

    def apply(self, value: Any, context: InterventionContext | None = None) -> Any:
        ctx = context or InterventionContext()
        done = [False]
        at = self.where()

        def leaf(t: torch.Tensor, _key: str) -> torch.Tensor:
            if done[0] or not t.is_floating_point():
                return t
            done[0] = True
            if at is None:
                return self.apply_tensor(t, ctx)
            # @pos=...: the picked positions alone are encoded, edited and decoded
            where = f" in layer {ctx.path!r}" if ctx.path else ""
            if not fits(t, at, ctx.module, ctx.n_heads):
                raise PlanError(_no_fit_message(self.name, at, [tuple(t.shape)], where,
                                                ctx.n_heads))
            return aimed(t, None, at, lambda part, _src: self.apply_tensor(part, ctx),
                         ctx.module, ctx.n_heads, where)

        return map_tensors_keyed(leaf, value)

    def sae_for(self, ctx: InterventionContext, width: int) -> SparseAutoencoder:
        sae = attached_sae(ctx.module)
        if sae is None:
            raise PlanError(f"{self.name}: no SAE is attached to layer {ctx.path!r}: attach one "
                            "(--sae LAYER=DIR, File → Attach SAE, or attach_sae in Python)")
        sae.check_width(width, ctx.path or "the layer")
        bad = [u for u in self.features if not 0 <= u < sae.d_sae]
        if bad:
            raise PlanError(f"{self.name}: feature(s) {bad} out of range: the SAE has "
                            f"{sae.d_sae} features (0..{sae.d_sae - 1})")
        return sae

    def edit(self, f: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover - every kind defines it

    def edited_features(self, sae: SparseAutoencoder, x: torch.Tensor) -> torch.Tensor:
        """The features of ``x`` (positions × width) after this edit (what the feature view
        shows); with ``@pos=``, at the picked positions only."""
        f = sae.encode(x)
        at = self.where()
        if at is None:
            return self.edit(f)
        return aimed(f[None], None, At(positions=at.positions),
                     lambda part, _src: self.edit(part))[0]

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        if t.dim() == 0:
            raise PlanError(f"{self.name}: layer {ctx.path!r} returns a scalar, not features")
        sae = self.sae_for(ctx, t.shape[-1])
        if not self.features:
            return t
        f = sae.encode(t)
        return (t.float() + sae.decode_change(f, self.edit(f), t)).to(t.dtype)

    @classmethod
    def parse(cls, args: str) -> "Intervention":
        feats, sep, value = args.partition("=")
        if cls.params()[-1].name == "features":
            if sep:
                raise PlanError(f"{cls.name} takes features only; write {cls.usage()}")
            return super().parse(feats)
        if not sep or not value.strip():
            raise PlanError(f"{cls.name}: write {cls.usage()}")
        return super().parse(f"{feats}:{value}")

    def describe(self) -> str:
        feats = ",".join(map(str, self.features)) or "nothing"
        extra = [f"{v:g}" for k, v in self.values().items() if k != "features"]
        return f"{self.name}({feats}{'=' + extra[0] if extra else ''})"


@dataclass(frozen=True)
class SaeAblate(SaeEdit):
    """Zero the listed features of the attached SAE (reconstruction error kept)."""

    features: tuple[int, ...] = param("units", (), start=(0,), help="SAE features to zero")
    name: ClassVar[str] = "sae-ablate"
    leaf_function: ClassVar[Any] = staticmethod(sae_ablate_leaf)
    syntax: ClassVar[str] = "sae-ablate:FEATURES (e.g. sae-ablate:12,40; needs --sae)"

    def edit(self, f: torch.Tensor) -> torch.Tensor:
        out = f.clone()
        out[..., list(self.features)] = 0.0
        return out


@dataclass(frozen=True)
class SaeClamp(SaeEdit):
    """Set the listed features to ``value`` at every position."""

    features: tuple[int, ...] = param("units", (), start=(0,), help="SAE features to set")
    value: float = param("float", 0.0, lo=-1e6, hi=1e6, help="their activation")
    name: ClassVar[str] = "sae-clamp"
    leaf_function: ClassVar[Any] = staticmethod(sae_clamp_leaf)
    draggable: ClassVar[tuple[str, ...]] = ("value",)
    syntax: ClassVar[str] = "sae-clamp:FEATURES=VALUE (e.g. sae-clamp:12=5.0; needs --sae)"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_finite(self.name, "value", self.value)
        object.__setattr__(self, "value", float(self.value))

    def edit(self, f: torch.Tensor) -> torch.Tensor:
        out = f.clone()
        out[..., list(self.features)] = self.value
        return out


@dataclass(frozen=True)
class SaeScale(SaeEdit):
    """Multiply the listed features by ``factor``."""

    features: tuple[int, ...] = param("units", (), start=(0,), help="SAE features to scale")
    factor: float = param("float", 1.0, lo=-1e6, hi=1e6, help="multiplier")
    name: ClassVar[str] = "sae-scale"
    leaf_function: ClassVar[Any] = staticmethod(sae_scale_leaf)
    draggable: ClassVar[tuple[str, ...]] = ("factor",)
    syntax: ClassVar[str] = "sae-scale:FEATURES=FACTOR (e.g. sae-scale:12=0.5; needs --sae)"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_finite(self.name, "factor", self.factor)
        object.__setattr__(self, "factor", float(self.factor))

    def edit(self, f: torch.Tensor) -> torch.Tensor:
        out = f.clone()
        out[..., list(self.features)] *= self.factor
        return out


def _check_finite(kind: str, name: str, v: Any) -> None:
    """A feature's new activation must be a number: NaN or infinity would turn the whole
    output into NaN through the decoder."""
    check_number(kind, name, v)
    if math.isinf(float(v)):
        raise PlanError(f"{kind}: {name}={v!r} is infinite; give a finite number such as 5.0")


def _register() -> None:
    for cls in (SaeAblate, SaeClamp, SaeScale):
        register(cls)


_register()
