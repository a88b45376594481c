"""Taking results out: captures to files, the setup as a plain PyTorch script.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .export import CAPTURE_FORMATS, save_captures, session_dict, standalone_script
from .script_sae import sae_weights_file, write_sae_weights

__all__ = ["CAPTURE_FORMATS", "save_captures", "session_dict", "standalone_script",
           "sae_weights_file", "write_sae_weights"]
