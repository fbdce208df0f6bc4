"""Input fields of the API that are stricter than DRF's own."""

from __future__ import annotations

import sys
from typing import Any

from rest_framework import serializers

# The smallest magnitude a float holds at full precision; a non-zero number below it is subnormal.
SMALLEST_NORMAL = sys.float_info.min


def is_subnormal(value: float) -> bool:
    return value != 0 and abs(value) < SMALLEST_NORMAL


class StrictFloatField(serializers.FloatField):
    """A number, as DRF's FloatField reads one, except: JSON ``true``/``false`` (Python's
    ``float(True)`` is 1.0), digits of other scripts in a string (``"٣٦٠٠"``), and a subnormal
    number such as 1e-320, which keeps too few digits to mean what was written and which
    PostgreSQL's double precision refuses."""

    default_error_messages = {
        **serializers.FloatField.default_error_messages,
        "subnormal": f"Use 0, or a number of at least {SMALLEST_NORMAL:.3g} in size.",
    }

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or (isinstance(data, str) and not data.isascii()):
            self.fail("invalid")
        value: float = super().to_internal_value(data)
        if is_subnormal(value):
            self.fail("subnormal")
        return value
