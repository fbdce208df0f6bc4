"""`LeanInput` gives a submission body's validated data exactly as DRF's serializer does, or
hands the body to the serializer; well-formed bodies take the lean path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from api.lean_input import LeanInput
from api.views.jobs import SUBMIT_INPUT, JobSubmitInput

FIELDS = list(JobSubmitInput().fields)

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=60),
    st.text(alphabet="ab-_ \t\x00\ud800", max_size=8),
    st.sampled_from(["training", "serving", "batch", "", "rack", "pod", "node", " training", "H100", "x" * 201]),
    st.lists(st.integers(), max_size=2),
)
bodies = st.dictionaries(st.sampled_from([*FIELDS, "unknown"]), values)


def _drf(body: Any) -> dict[str, Any] | None:
    serializer = JobSubmitInput(data=body)
    return dict(serializer.validated_data) if serializer.is_valid() else None


def _same(lean: dict[str, Any], drf: dict[str, Any] | None) -> None:
    assert drf is not None
    assert lean == drf
    assert {k: type(v) for k, v in lean.items()} == {k: type(v) for k, v in drf.items()}


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_a_lean_answer_is_the_serializers_answer(body: dict[str, Any]) -> None:
    lean = SUBMIT_INPUT.validated(body)
    if lean is not None:
        _same(lean, _drf(body))


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "team": st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True),
            "name": st.text(min_size=1, max_size=200).filter(lambda s: s.strip() == s and "\x00" not in s),
            "priority_class": st.sampled_from(["training", "serving"]),
            "accelerator": st.sampled_from(["H100", "A100"]),
            "gpus": st.integers(min_value=-5, max_value=10**6),
            "duration_s": st.one_of(st.integers(0, 10**9), st.floats(0, 1e9, allow_subnormal=False)),
        },
        optional={
            "kind": st.sampled_from(["training", "serving", "batch"]),
            "time_limit_s": st.one_of(st.none(), st.floats(1, 1e7)),
            "min_gpus": st.one_of(st.none(), st.integers(1, 64)),
            "checkpoint_on_preempt": st.booleans(),
            "required_level": st.sampled_from(["", "node", "rack", "pod"]),
        },
    )
)
def test_well_formed_bodies_take_the_lean_path(body: dict[str, Any]) -> None:
    try:
        body["name"].encode()
    except UnicodeEncodeError:
        return
    lean = SUBMIT_INPUT.validated(body)
    assert lean is not None
    _same(lean, _drf(body))


def test_anything_else_goes_to_the_serializer() -> None:
    good = {"team": "t", "name": "n", "priority_class": "p", "accelerator": "a", "gpus": 1, "duration_s": 1}
    assert SUBMIT_INPUT.validated(good) is not None
    for bad in ({**good, "gpus": "1"}, {**good, "name": " n"}, {**good, "kind": "nope"}, {**good, "team": None}):
        assert SUBMIT_INPUT.validated(bad) is None
    assert SUBMIT_INPUT.validated({k: v for k, v in good.items() if k != "name"}) is None
    assert SUBMIT_INPUT.validated([good]) is None


def test_serializers_it_cannot_follow_are_refused() -> None:
    class Bounded(serializers.Serializer):
        gpus = serializers.IntegerField(min_value=1)

    class OwnCheck(serializers.Serializer):
        name = serializers.CharField()

        def validate_name(self, value: str) -> str:
            return value

    class Dated(serializers.Serializer):
        at = serializers.DateTimeField()

    for refused in (Bounded, OwnCheck, Dated):
        with pytest.raises(TypeError):
            LeanInput(refused)
