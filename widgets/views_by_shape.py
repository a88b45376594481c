"""How a captured tensor is drawn, chosen by its shape: the numeric part lives in
core (:mod:`hookscope.core.views.views_by_shape`, block-mean pooling included); the
widgets import it from here by their old name."""

from hookscope.core.views import (MAX_BARS, MAX_CHANNELS, MAX_PIXELS, VIEW_KINDS, as_float_array,
                                  bars_values, feature_grid, fold_vector, full_size, reduce_2d,
                                  side_by_side, symmetric_level, view_image, view_kind)

__all__ = ["MAX_BARS", "MAX_CHANNELS", "MAX_PIXELS", "VIEW_KINDS", "as_float_array", "bars_values",
           "feature_grid", "fold_vector", "full_size", "reduce_2d", "side_by_side",
           "symmetric_level", "view_image", "view_kind"]
