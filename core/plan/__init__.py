"""What a run should do: the Plan, the intervention base, kinds and registry, path
patterns, plan edits.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .directions import named_vectors
from .intervention_registry import parse_intervention, syntax_help
from .path_patterns import expand_plan, is_pattern, matches, rooted_suggestion

__all__ = ["expand_plan", "is_pattern", "matches", "named_vectors", "parse_intervention",
           "rooted_suggestion", "syntax_help"]
