"""Where a model comes from and what it is: specs and sources (file/package factories,
.pt2, weights, hf, torchvision, timm, audio), accelerate dispatch, model kinds, the
module tree, labels, inputs.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .budget import set_max_input_bytes
from .class_labels import name_classes
from .code_trust import CodeToRun, CodeTrust, CodeTrustError, MODULE, names_code
from .dispatch import DEVICE_MAPS, DeviceMapOptions, device_map_options, load_dispatched, parse_size
from .hook_inventory import HookInfo, list_hooks
from .live_model import is_live
from .learned import ModelMemory, memory_for
from .loaded_model import LoadedModel
from .sae import DEMO_SAE
from .trust_store import TrustStore
from .user_code import user_code

__all__ = ["CodeToRun", "CodeTrust", "CodeTrustError", "DEMO_SAE", "DEVICE_MAPS", "DeviceMapOptions",
           "HookInfo", "LoadedModel", "MODULE", "ModelMemory", "TrustStore", "device_map_options", "is_live",
           "list_hooks", "load_dispatched", "memory_for", "name_classes", "parse_size", "set_max_input_bytes",
           "names_code", "user_code"]
