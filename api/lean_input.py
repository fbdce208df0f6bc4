"""`LeanInput`: a DRF input serializer's answer for the usual well-formed JSON body, without
making the serializer.

A DRF serializer copies each of its declared fields for each instance (a deep copy of sixteen
field objects for a job submission) and walks them with their generic machinery: about a tenth of
a submission's CPU. Most bodies are well formed: each value already of the JSON type its field
wants. For those, `LeanInput.validated` gives what ``serializer.validated_data`` would be; for
anything else (a missing required field, a value to coerce, to trim or to refuse, a form-encoded
body) it gives None and the caller asks the serializer, whose answer, and error messages, are
then DRF's own. ``tests/api/test_lean_input.py`` holds the two to one answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.validators import (
    MaxLengthValidator,
    MinLengthValidator,
    ProhibitNullCharactersValidator,
    RegexValidator,
)
from rest_framework import fields as drf
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from api.fields import StrictFloatField, is_subnormal

_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
_INT_BOUND = 10**18  # far inside what DRF turns back into the same int


def _lean_text(field: drf.CharField) -> Callable[[Any], Any]:
    """A string that DRF would keep as it is: no surrounding whitespace to trim, not blank, within
    the lengths, no NUL, no lone surrogate (and a slug for a SlugField)."""
    longest, shortest, slug = None, None, False
    for validator in field.validators:
        if isinstance(validator, MaxLengthValidator):
            longest = validator.limit_value
        elif isinstance(validator, MinLengthValidator):
            shortest = validator.limit_value
        elif isinstance(validator, RegexValidator) and type(field) is drf.SlugField:
            slug = True
        elif not isinstance(validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator):
            raise TypeError(f"LeanInput cannot apply {validator!r} of {field.field_name}.")
    if not all(isinstance(limit, int | None) for limit in (longest, shortest)):
        raise TypeError(f"LeanInput needs fixed lengths for {field.field_name}.")

    def check(value: Any) -> Any:
        if (
            type(value) is not str
            or not value
            or value.strip() != value
            or (longest is not None and len(value) > longest)
            or (shortest is not None and len(value) < shortest)
            or "\x00" in value
            or not (value.isascii() or _no_surrogates(value))
            or (slug and not _SLUG.fullmatch(value))
        ):
            return empty
        return value

    return check


def _no_surrogates(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lean_choice(field: drf.ChoiceField) -> Callable[[Any], Any]:
    choices = dict(field.choice_strings_to_values)

    def check(value: Any) -> Any:
        return choices[value] if type(value) is str and value in choices else empty

    return check


def _lean_int(value: Any) -> Any:
    return value if type(value) is int and -_INT_BOUND < value < _INT_BOUND else empty


def _lean_float(value: Any) -> Any:
    if type(value) is float and math.isfinite(value) and not is_subnormal(value):
        return value
    if type(value) is int and -_INT_BOUND < value < _INT_BOUND:
        return float(value)
    return empty


def _lean_bool(value: Any) -> Any:
    return value if type(value) is bool else empty


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    check: Callable[[Any], Any]  # the validated value, or ``empty``: ask DRF
    required: bool
    allow_null: bool
    default: Any  # ``empty``: none (the field is left out when missing)


def _rule(name: str, field: drf.Field) -> _Rule:
    kind = type(field)
    if kind in (drf.CharField, drf.SlugField):
        check = _lean_text(field)  # type: ignore[arg-type]
    elif kind is drf.ChoiceField and not field.validators:
        check = _lean_choice(field)  # type: ignore[arg-type]
    elif kind in (drf.IntegerField, drf.FloatField, StrictFloatField, drf.BooleanField):
        if field.validators:
            raise TypeError(f"LeanInput cannot apply the bounds of {name}.")
        check = {
            drf.IntegerField: _lean_int,
            drf.FloatField: _lean_float,
            StrictFloatField: _lean_float,
            drf.BooleanField: _lean_bool,
        }[kind]
    else:
        raise TypeError(f"LeanInput does not know {kind.__name__} ({name}).")
    if field.read_only or field.source != name or (field.default is not empty and callable(field.default)):
        raise TypeError(f"LeanInput cannot read {name} as DRF does.")
    return _Rule(name, check, field.required, field.allow_null, field.default)


class LeanInput:
    """`validated(data)`: ``serializer_class(data=data)``'s validated data when ``data`` is a
    JSON object every value of which is already what its field keeps, else None."""

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        serializer = serializer_class()
        own = ("validate", "to_internal_value", "run_validation", "run_validators")
        if any(getattr(serializer_class, name) is not getattr(serializers.Serializer, name) for name in own) or any(
            hasattr(serializer_class, f"validate_{name}") for name in serializer.fields
        ):
            raise TypeError(f"LeanInput cannot follow {serializer_class.__name__}'s own validation.")
        if serializer.validators:
            raise TypeError(f"LeanInput cannot apply {serializer_class.__name__}'s validators.")
        self.rules = tuple(_rule(name, field) for name, field in serializer.fields.items())

    def validated(self, data: Any) -> dict[str, Any] | None:
        if type(data) is not dict:
            return None  # a form-encoded body, or not an object at all
        values: dict[str, Any] = {}
        for rule in self.rules:
            value = data.get(rule.name, empty)
            if value is empty:
                if rule.required:
                    return None
                if rule.default is not empty:
                    values[rule.name] = rule.default
                continue
            if value is None:
                if not rule.allow_null:
                    return None
                values[rule.name] = None
                continue
            checked = rule.check(value)
            if checked is empty:
                return None
            values[rule.name] = checked
        return values
