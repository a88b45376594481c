"""The ``hookscope`` console entry point.

``hookscope run ...`` is the headless comparison, ``hookscope sweep ...`` a grid of
them, ``hookscope scan ...`` one model over an input set, ``hookscope diff ...`` two models
layer by layer and ``hookscope analyse NAME ...`` any registered analysis (no Qt imported);
anything else opens the window. A mistake a person made (bad spec, input,
layer, bounds, device) prints one line on stderr and exits with status 2,
never a traceback.
"""

from __future__ import annotations

import sys

from hookscope.core import HookscopeError
from hookscope.core.model import set_max_input_bytes
from hookscope.core.base import one_line
from hookscope.core.fast import apply_default as apply_memory_default

EXIT_USER_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The app and the CLI keep freed memory for reuse (core/fast/memory.py;
    # HOOKSCOPE_KEEP_FREED_MEMORY=0 opts out); importing hookscope.core does not.
    apply_memory_default()
    try:
        if argv[:1] == ["run"]:
            from .headless import run_command

            return run_command(argv[1:])
        if argv[:1] == ["sweep"]:
            from .sweep_cli import sweep_command

            return sweep_command(argv[1:])
        if argv[:1] == ["analyse"] or argv[:1] == ["analyze"]:
            from .analyse_cli import analyse_command

            return analyse_command(argv[1:])
        if argv[:1] == ["diff"]:
            from .diff_cli import diff_command

            return diff_command(argv[1:])
        if argv[:1] == ["scan"]:
            from .scan_cli import scan_command

            return scan_command(argv[1:])
        from .launch import gui_main

        return gui_main(argv)
    except HookscopeError as exc:
        print(f"hookscope: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("hookscope: interrupted", file=sys.stderr)
        return 130
    finally:
        set_max_input_bytes(None)  # --max-input-bytes holds for this command only


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
