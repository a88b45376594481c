"""An ``argparse`` parser whose mistakes are one line, like every other error of the CLI.

Plain argparse prints the usage block and then the error, and exits by
itself; here the error is raised as a :class:`HookscopeError`, which
``hookscope``'s entry point prints as one line with status 2 (``--help``
still prints the full help and exits 0).
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from hookscope.core import HookscopeError


class UsageError(HookscopeError):
    """A command line argparse could not parse."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")
