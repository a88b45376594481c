"""Hookscope's reusable Qt views over core data (never imports the app).

- :class:`LayerTreeModel` / :class:`LayerTreeWidget`: the module tree, capture and clamp.
- :class:`ActivationPanel` / :class:`LayerPlot`: captured activations, one panel per layer call.
- :class:`OutputComparison`: the model's output without and with the interventions.
- :class:`DivergenceView`: a model diff, layers by relative change, the first divergent marked.
"""

from .activation_panel import ActivationPanel
from .divergence_view import DivergenceView
from .layer_plot import LayerPlot
from .layer_tree_model import (COL_CALLS, COL_CAPTURE, COL_HI, COL_LAYER, COL_LO, COL_PARAMS,
                               COL_SHAPE, COL_TYPE, PATH_ROLE, LayerTreeModel)
from .layer_tree_view import LayerTreeWidget
from .output_comparison import OutputComparison
from hookscope.core.views import VIEW_KINDS, view_kind

__all__ = [
    "ActivationPanel", "DivergenceView", "LayerPlot", "OutputComparison", "VIEW_KINDS", "view_kind",
    "COL_CALLS", "COL_CAPTURE", "COL_HI", "COL_LAYER", "COL_LO", "COL_PARAMS", "COL_SHAPE",
    "COL_TYPE", "PATH_ROLE", "LayerTreeModel", "LayerTreeWidget",
]
