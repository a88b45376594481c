"""What ``hookscope run`` prints about the model's output: by meaning, and compact.

``--json`` always carries ``output``: the output read by what it means
(:func:`hookscope.core.views.outputs.describe_outputs`: top-k classes, next tokens,
detections, named leaves). The flat ``output_without``/``output_with`` lists
are kept while the output is small (up to :data:`FULL_OUTPUT_LIMIT` values,
e.g. both seed exercises); beyond that they are left out unless
``--full-output`` asks for them, so a language model's JSON is kilobytes,
not megabytes. Never imports Qt.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from hookscope.core.base import OutputMeaning, escape_controls, json_dumps, tensor_leaves
from hookscope.core.views import describe_outputs, summary_lines

FULL_OUTPUT_LIMIT = 1000
FULL_OUTPUT_HELP = ("with --json: include every output value (output_without/output_with) even "
                    f"when the output has more than {FULL_OUTPUT_LIMIT} values")


def output_values(value: Any) -> int:
    return sum(t.numel() for _, t in tensor_leaves(value))


def json_dict(result: Any, meaning: OutputMeaning, inputs: Any, full: bool,
              data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``--json`` object (or ``data``, e.g. a session file's, which holds the run's own):
    with ``output`` by meaning; compact unless ``full``."""
    data = result.to_json_dict() if data is None else data
    data["output"] = describe_outputs(result.output_without, result.output_with, meaning, inputs)
    n = output_values(result.output_with)
    if n > FULL_OUTPUT_LIMIT and not full:
        data.pop("output_without", None)
        data.pop("output_with", None)
        data["output_values"] = n
        data["full_output"] = False  # --full-output to include every value
    return data


def print_json(result: Any, out: TextIO, meaning: OutputMeaning, inputs: Any, full: bool) -> None:
    out.write(json_dumps(json_dict(result, meaning, inputs, full)))  # NaN/Inf as null
    out.write("\n")


def print_meaning(result: Any, out: TextIO, meaning: OutputMeaning, inputs: Any) -> None:
    """The output by meaning, as a few lines after the table."""
    lines = summary_lines(describe_outputs(result.output_without, result.output_with, meaning,
                                           inputs))
    if lines:  # labels and token strings come from files: their control characters escaped
        out.write("\n" + "\n".join(escape_controls(line) for line in lines) + "\n")
