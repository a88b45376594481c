"""Hookscope's reusable Qt views over core data (never imports the app).

- :class:`LayerTreeModel` / :class:`LayerTreeWidget`: the module tree, capture and clamp.
- :class:`ActivationPanel` / :class:`LayerPlot`: captured activations, one panel per layer call.
- :class:`OutputComparison`: the model's output without and with the interventions.
"""

from .layer_tree_model import (COL_CALLS, COL_CAPTURE, COL_HI, COL_LAYER, COL_LO, COL_PARAMS,
                               COL_SHAPE, COL_TYPE, PATH_ROLE, LayerTreeModel)
from .layer_tree_view import LayerTreeWidget

__all__ = [
    "COL_CALLS", "COL_CAPTURE", "COL_HI", "COL_LAYER", "COL_LO", "COL_PARAMS", "COL_SHAPE",
    "COL_TYPE", "PATH_ROLE", "LayerTreeModel", "LayerTreeWidget",
]
