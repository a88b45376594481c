"""Real mouse and wheel events for plot tests: the one copy lives in
``bench/mouse_events.py``, which the window benchmarks drive too."""

from bench.mouse_events import drag, drag_line, hover, line_point, view_to_viewport, wheel

__all__ = ["drag", "drag_line", "hover", "line_point", "view_to_viewport", "wheel"]
