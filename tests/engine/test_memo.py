"""Every memo of the cycle declares what makes it stale, and the memo's own moves follow that."""

from __future__ import annotations

from dataclasses import fields

from scheduling.engine.cycle_state import Memo
from scheduling.engine.memo import Until, fields_until, rules


def test_every_memo_declares_what_invalidates_it() -> None:
    declared = rules(Memo)
    assert set(declared) == {item.name for item in fields(Memo)} - {"generation"}
    assert fields_until(Memo, Until.PASS) == ("victimless", "settled")
    assert fields_until(Memo, Until.CYCLE) == ("candidates",)
    assert declared["owed"] is Until.LEDGER and declared["admissions"] is Until.LEDGER_OR_FREE
    assert set(fields_until(Memo, Until.STATE)) == {
        "misses",
        "earliest",
        "fruitless",
        "walks",
        "cannot_preempt",
        "verdicts",
        "backfill_misses",
    }


def _filled() -> Memo:
    memo = Memo()
    for item in fields(Memo):
        kept = getattr(memo, item.name)
        if isinstance(kept, dict):
            kept[("key",)] = (0, None)
        elif isinstance(kept, set):
            kept.add("gpu-a")
    return memo


def test_a_new_pass_drops_exactly_the_memos_that_hold_for_a_pass() -> None:
    memo = _filled()
    memo.new_pass()
    emptied = {item.name for item in fields(Memo) if item.name != "generation" and not getattr(memo, item.name)}
    assert emptied == set(fields_until(Memo, Until.PASS))
    assert memo.generation == 0


def test_a_change_of_the_working_state_moves_the_generation_and_keeps_the_entries() -> None:
    memo = _filled()
    memo.invalidate()
    assert memo.generation == 1
    assert all(getattr(memo, name) for name in rules(Memo))  # stamped entries are read as stale, not dropped
