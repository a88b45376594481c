"""Input sets: many inputs opened from a folder, a .txt, .jsonl, .pt or .safetensors file
and read in batches. Scans over them live a floor above, in :mod:`hookscope.core.analyses`.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .input_sets import (IMAGE_PATTERNS, SET_PATTERNS, ImageFolder, InputSet, JsonLines,
                         TensorBatch, TextLines, image_set_root, open_inputs, read_items)

__all__ = ["IMAGE_PATTERNS", "ImageFolder", "InputSet", "JsonLines", "SET_PATTERNS", "TensorBatch",
           "TextLines", "image_set_root", "open_inputs", "read_items"]
