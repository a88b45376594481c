"""Exceptions a person can cause, each with a message that says what to do.

Everything the core raises on purpose derives from :class:`HookscopeError`, so
the CLI and the GUI can show the message and carry on, while a genuine bug
(any other exception) still surfaces with its traceback.
"""

from __future__ import annotations


class HookscopeError(Exception):
    """Base class: a mistake in what the user asked for, explained."""


class SpecError(HookscopeError):
    """A model spec or weights file that cannot be loaded."""


class InputError(HookscopeError):
    """An input spec that cannot be turned into tensors, or does not fit the model."""


class PlanError(HookscopeError):
    """A plan that does not fit the model: unknown layer, lo > hi, ..."""


class DeviceError(HookscopeError):
    """A device that does not exist on this machine."""


class ForwardError(HookscopeError):
    """The model's own forward raised; the message carries the model's error."""


class Cancelled(HookscopeError):
    """A run stopped early because the caller no longer wants its result."""
