"""Hookscope's benchmark suite: ``python -m bench`` (or ``make bench``).

Measures what capture, clamping and statistics cost against the plain forward
of the same model (paired A/B timing), peak memory, and the fixed costs that
Live mode pays per update. See ``bench/README.md``. Not part of the installed
package; run it from the repository root.
"""
