"""A layer path's ``:input`` suffix: the module's first positional input instead of its
output (``transformer.h.3.ln_2:input``), reached through a forward pre-hook."""

#: The suffix that aims at a module's first positional input instead of its output
#: (``transformer.h.3.ln_2:input``), reached through a forward pre-hook.
INPUT_SUFFIX = ":input"


def split_input(path: str) -> tuple[str, bool]:
    """``("a.b", True)`` for ``"a.b:input"``, ``(path, False)`` otherwise."""
    if path.endswith(INPUT_SUFFIX):
        return path[:-len(INPUT_SUFFIX)], True
    return path, False
