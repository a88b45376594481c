"""Shared leaves every floor may use: errors, safe file writing, echoing user text, nested
values, devices, optional packages, and the vocabulary of output meaning and text
codecs. Imports nothing else of Hookscope.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .atomic_write import atomic_write, write_bytes, write_text
from .devices import DeviceInfo, available_devices
from .errors import DeviceError, ForwardError
from .json_safe import dumps as json_dumps
from .meaning import CLASSES, DETECTIONS, GENERIC, OutputMeaning, TOKENS
from .nested import tensor_leaves
from .own_inputs import files_read, refuse_overwrite
from .read_files import ReadFiles
from .user_text import escape_controls, is_digits, is_dir, one_line, typed_text

__all__ = ["CLASSES", "DETECTIONS", "DeviceError", "DeviceInfo", "ForwardError", "GENERIC",
           "OutputMeaning", "ReadFiles", "TOKENS", "atomic_write", "available_devices",
           "escape_controls", "files_read", "is_digits", "is_dir", "json_dumps", "one_line",
           "refuse_overwrite", "tensor_leaves", "typed_text", "write_bytes", "write_text"]
