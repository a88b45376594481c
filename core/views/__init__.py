"""Numeric view preparation (no Qt): views by shape, wide views, map windows, binning,
detections, an output read by its meaning, a panel's shape view ready to draw.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .display import (OUTPUT_BARS, RecordDisplay, ResultDisplay, common_bins, flat_array,
                      prepare_display)
from .detections import image_boxes, image_size
from .map_window import Window, pool_window, visible_window
from .shape_views import (MIN_IMAGE_PIXELS, SIZE_TOLERANCE, Picture, ShapeDisplay, ShapeViews,
                          ShapeWanted, bar_extent, colour_scale, effective_view, grid_picture,
                          heat_map, image_pixels, map_sources, prepare_shape, shape_display,
                          whole_picture, window_picture)
from .outputs import (describe_outputs, input_image, input_token_strings, inputs_for_display,
                      summary_lines)
from .views_by_shape import (MAX_BARS, MAX_CHANNELS, MAX_PIXELS, VIEW_KINDS, as_float_array,
                             bars_values, feature_grid, fold_vector, full_size, reduce_2d,
                             side_by_side, symmetric_level, view_image, view_kind)
from .wide_views import (TOP_K, ValueSpread, count_ticks, largest_finite, log_counts, log_histogram,
                         log_ticks, picture, row_norms, signed_exp, signed_log, top_k_picture,
                         top_units, unit_norms, view_names, wants_log, wide_views)

__all__ = ["MAX_BARS", "MAX_CHANNELS", "MAX_PIXELS", "OUTPUT_BARS", "TOP_K", "VIEW_KINDS",
           "MIN_IMAGE_PIXELS", "SIZE_TOLERANCE", "Picture", "ShapeDisplay", "ShapeViews",
           "ShapeWanted", "bar_extent", "colour_scale", "effective_view", "grid_picture",
           "heat_map", "image_pixels", "map_sources", "prepare_shape", "shape_display",
           "whole_picture", "window_picture",
           "RecordDisplay", "ResultDisplay", "ValueSpread", "Window",
           "as_float_array", "bars_values", "common_bins", "count_ticks", "describe_outputs",
           "feature_grid", "flat_array", "fold_vector", "full_size", "image_boxes", "image_size", "input_image",
           "input_token_strings", "inputs_for_display", "largest_finite", "log_counts",
           "log_histogram", "log_ticks", "picture", "pool_window", "prepare_display", "reduce_2d", "row_norms",
           "side_by_side", "signed_exp", "signed_log", "summary_lines", "symmetric_level",
           "top_k_picture", "top_units", "unit_norms", "view_image", "view_kind", "view_names",
           "visible_window", "wants_log", "wide_views"]
