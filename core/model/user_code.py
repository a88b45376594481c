"""Running code from the user's model file: a clean ``sys.argv``, and no silent exits.

A model script often parses the command line at import (``argparse`` at module
level) or calls ``sys.exit()``; under Hookscope it would see Hookscope's own
arguments and exit the whole program. :func:`user_code` gives it
``sys.argv == [its own path]`` while it runs, and turns ``SystemExit`` and any
other ``BaseException`` it raises (except Ctrl+C, which stays an interrupt)
into a project error that says what happened. The CLI wraps the forward in it
too, so a model that exits mid-run is reported (status 2), not a silent exit 0.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from ..base.errors import HookscopeError, SpecError
from ..base.user_text import safe_str


@contextlib.contextmanager
def user_code(what: str, argv0: str,
              error: type[HookscopeError] = SpecError) -> Iterator[None]:
    """Run the body as the user's code ``what`` (e.g. "importing net.py") with argv ``[argv0]``;
    an exit or a foreign ``BaseException`` becomes ``error`` (a :class:`SpecError` by default)."""
    saved = sys.argv
    sys.argv = [argv0]
    try:
        yield
    except SystemExit as exc:
        raise error(f"{what} called sys.exit({exc.code!r}); a model must not exit "
                    "(move command-line handling under if __name__ == '__main__':)") from exc
    except KeyboardInterrupt:
        raise
    except Exception:
        raise
    except BaseException as exc:  # GeneratorExit, a custom BaseException subclass
        detail = safe_str(exc)
        raise error(f"{what} raised {type(exc).__name__}{': ' + detail if detail else ''}; "
                    "fix the model's code") from exc
    finally:
        sys.argv = saved
