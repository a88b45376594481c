"""What a run should do: the Plan, the intervention base, kinds and registry, path
patterns, plan edits.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .at import resolve, selector_text
from .bare_sources import with_bare_sources
from .bound_edits import bound_params, dragged, plan_bounds
from .directions import named_vectors
from .heads import head_site
from .intervention_registry import parse_intervention, syntax_help
from .path_patterns import expand_plan, is_pattern, matches, rooted_suggestion
from .plan_edits import in_model_order

__all__ = ["with_bare_sources", "bound_params", "dragged", "expand_plan", "head_site", "in_model_order", "is_pattern", "matches",
           "named_vectors", "parse_intervention", "plan_bounds", "resolve", "rooted_suggestion",
           "selector_text", "syntax_help"]
