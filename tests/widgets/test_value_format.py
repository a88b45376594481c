"""Numbers as the panels print them: a zero (a scale(0) output, -0.0) is never "-0"."""

import math

from hookscope.widgets.value_format import format_value


def test_negative_zero_prints_unsigned():
    assert format_value(-0.0) == "0"
    assert format_value(0.0) == "0"


def test_other_values_keep_their_sign_and_digits():
    assert format_value(-1e-30) == "-1e-30"
    assert format_value(-0.012345) == "-0.01235"
    assert format_value(math.inf) != format_value(-math.inf)
