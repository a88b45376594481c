"""Layer path patterns: ``h.*.mlp``, ``layer*.0.conv1``, ``encoder.**.attn`` -> real paths.

Big models repeat blocks (``h.0`` ... ``h.11``); typing each path is
tedious. A pattern is split on dots; each piece is matched against the same
piece of a path with shell wildcards (``*``, ``?``, ``[...]``, not crossing a
dot), and a ``**`` piece matches any number of pieces (including none).
A path with no wildcard is returned as it is, so an unknown plain path still
gets the plan's "did you mean" message. :func:`expand_plan` rewrites a
:class:`~.plan.Plan`'s capture list, clamps and other interventions.
"""

from __future__ import annotations

import dataclasses
from fnmatch import fnmatchcase
from typing import Iterable, Mapping

from torch import nn

from ..base.errors import PlanError
from .plan import INPUT_SUFFIX, Plan, split_input, unknown_layer_message

WILDCARDS = "*?["


def is_pattern(path: str) -> bool:
    return any(c in path for c in WILDCARDS)


def _match(pieces: list[str], parts: list[str]) -> bool:
    if not pieces:
        return not parts
    head, rest = pieces[0], pieces[1:]
    if head == "**":
        return any(_match(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match(rest, parts[1:])


def matches(pattern: str, path: str) -> bool:
    """Whether layer ``path`` fits ``pattern`` (see the module docstring)."""
    return _match(pattern.split("."), path.split(".") if path else [])


def rooted_suggestion(pattern: str, paths: Iterable[str]) -> str | None:
    """The pattern with the first real prefix that makes it match (``h.*.mlp`` ->
    ``transformer.h.*.mlp`` on a Hugging Face GPT-2), or ``None`` when no path has a
    part that fits it (patterns match from the root: what was typed may sit deeper)."""
    pieces = pattern.split(".")
    for path in paths:
        parts = path.split(".")
        for k in range(1, len(parts)):
            if _match(pieces, parts[k:]):
                return ".".join(parts[:k]) + "." + pattern
    return None


def expand_paths(pattern: str, module: nn.Module | Iterable[str]) -> list[str]:
    """The paths of ``module`` (or of a list of paths) that fit ``pattern``, in model order.

    Raises :class:`PlanError` when a pattern matches nothing. A pattern ending in ``:input``
    (a module's input, see :data:`~.plan.INPUT_SUFFIX`) gives paths ending in it.
    """
    if not is_pattern(pattern):
        return [pattern]
    base, at_input = split_input(pattern)
    if at_input:
        return [p + INPUT_SUFFIX for p in expand_paths(base, module)]
    paths = ([p for p, _ in module.named_modules() if p] if isinstance(module, nn.Module)
             else list(module))
    if pattern.startswith("resid_"):  # resid_pre.* and the like: over the model's blocks
        from .residual_points import residual_points

        named = [p for p in residual_points(paths) if matches(pattern, p)]
        if named:
            return sorted(named, key=lambda p: (p.split(".")[0], int(p.split(".")[1])))
    found = [p for p in paths if matches(pattern, p)]
    if not found:
        better = rooted_suggestion(pattern, paths)
        if better:
            raise PlanError(f"layer pattern {pattern!r} matches no layer: patterns match from "
                            f"the root, and {better!r} does")
        example = next((p for p in paths if "." in p), paths[0] if paths else "")
        raise PlanError(f"layer pattern {pattern!r} matches no layer: '*' stands for one name "
                        f"between dots ('**' for any number), e.g. a path here is {example!r}")
    return found


def expand_plan(plan: Plan, module: nn.Module, tree_paths: Iterable[str] = ()) -> Plan:
    """``plan`` with every wildcard path replaced by the layers it matches.

    A clamp or intervention given by a pattern applies to each match; an
    explicit path given as well keeps its own setting.
    """
    if not any(is_pattern(p) for p in plan.paths()):
        return plan
    # a model in a Ray actor is known here only by its tree (``tree_paths``)
    paths = [p for p in dict.fromkeys([*(p for p, _ in module.named_modules()), *tree_paths]) if p]

    def spread(mapping: Mapping) -> dict:
        out: dict = {}
        for key, value in mapping.items():  # patterns first, so exact paths win
            if is_pattern(key):
                for p in expand_paths(key, paths):
                    out[p] = value
        out.update({k: v for k, v in mapping.items() if not is_pattern(k)})
        return out

    capture = [p for c in plan.capture for p in expand_paths(c, paths)]
    # plan.interventions holds the clamps too (plan.clamp is a view of them)
    return dataclasses.replace(plan, capture=tuple(capture), interventions=spread(plan.interventions))


def without_unknown_layers(plan: Plan, module: nn.Module,
                           tree_paths: Iterable[str] = ()) -> tuple[Plan, str | None]:
    """``plan`` less the paths ``module`` has no module at, and a message naming them.

    A session file or command line written for another version of a model may
    name layers this one lacks. The rest of the plan still applies; the message
    says what was left out and the closest real names, so nothing is dropped
    without a word. ``tree_paths`` are known layers too: a model in a Ray actor
    is known here only by its tree.
    """
    known = {p for p, _ in module.named_modules(remove_duplicate=False)} | set(tree_paths)
    from .residual_points import residual_points

    known |= set(residual_points(known))
    missing = [p for p in plan.paths() if split_input(p)[0] not in known]
    if not missing:
        return plan, None
    gone = set(missing)
    kept = dataclasses.replace(
        plan, capture=tuple(p for p in plan.capture if p not in gone),
        interventions={p: iv for p, iv in plan.interventions.items() if p not in gone})
    in_order = list(dict.fromkeys(["", *(p for p, _ in module.named_modules()), *tree_paths]))
    first = unknown_layer_message(missing[0], in_order)
    more = f" (and {len(missing) - 1} more: {', '.join(map(repr, missing[1:4]))})" if len(missing) > 1 else ""
    return kept, f"{first}{more}"
