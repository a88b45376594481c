"""The ``hookscope`` console entry point.

``hookscope run ...`` is the headless comparison, ``hookscope sweep ...`` a grid of
them, ``hookscope scan ...`` one model over an input set, ``hookscope diff ...`` two models
layer by layer and ``hookscope analyse NAME ...`` any registered analysis (no Qt imported; the list is :mod:`.commands`); anything else
opens the window. A mistake a person made (bad spec, input, layer, bounds, device)
prints one line on stderr and exits with status 2, never a traceback. stdout carries
only data (:mod:`.std_streams`). Ctrl+C exits with status 130 and says how far the long
step got (:mod:`.progress`).
"""

from __future__ import annotations

import os
import sys

from hookscope.core import HookscopeError
from hookscope.core.model import set_max_input_bytes
from hookscope.core.base import ReadFiles, one_line
from hookscope.core.fast import apply_default as apply_memory_default

from .commands import command
from .progress import Interrupted
from .std_streams import talk_on_stderr

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl+C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a writer whose reader left


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The app and the CLI keep freed memory for reuse (core/fast/memory.py;
    # HOOKSCOPE_KEEP_FREED_MEMORY=0 opts out); importing hookscope.core does not.
    apply_memory_default()
    try:
        with talk_on_stderr() as out:
            run = command(argv[0]) if argv else None
            if run is not None:
                # Every file a command opens is recorded in its own registry as it is read;
                # no output of the command may replace one (core/base/read_files.py).
                with ReadFiles().recording():
                    return run(argv[1:], out, sys.stderr)
            from .launch import gui_main

            return gui_main(argv)
    except HookscopeError as exc:
        print(f"hookscope: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:
        # stdout's reader went away (`| head`): stop quietly, as other Unix tools do, with
        # stdout pointed at /dev/null so the interpreter's last flush does not fail again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout with no descriptor (a test's capture)
            pass
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:
        said = str(exc) if isinstance(exc, Interrupted) else "interrupted"
        print(f"hookscope: {said}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        set_max_input_bytes(None)  # --max-input-bytes holds for this command only


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
