"""Mark ids: derived from the observation that made them, and laid out in time order."""

from __future__ import annotations

import re

from daemon.core.records import Mark, derived_id
from daemon.core.signal import new_signal_id

MARK_ID = re.compile(r"mk_[0-9a-f]{24}")  # what the CLI takes for a mark id


def test_marks_of_the_daemons_signal_ids_sort_in_the_order_the_signals_were_made() -> None:
    """Made in time order, a commit's new marks share a page of the marks' id index (the
    bench's WAL pages per signal with 8 emitters: 3.3 with digest ids, 2.0 with these)."""
    signal_ids = [new_signal_id()]
    while len(signal_ids) < 40:  # one id a millisecond, at least
        made = new_signal_id()
        if made[:12] != signal_ids[-1][:12]:
            signal_ids.append(made)
    mark_ids = [Mark.id_for_signal(signal_id) for signal_id in signal_ids]
    assert all(MARK_ID.fullmatch(mark_id) for mark_id in mark_ids)
    assert sorted(mark_ids) == mark_ids
    assert len(set(mark_ids)) == len(mark_ids)
    assert Mark.id_for_signal(signal_ids[0]) == mark_ids[0], "the same id for the same signal"


def test_a_mark_made_before_the_time_ordered_ids_is_still_one_of_its_signals() -> None:
    signal_id = new_signal_id()
    assert Mark.ids_for_signal(signal_id) == (
        Mark.id_for_signal(signal_id),
        derived_id("mk", signal_id),
    )


def test_an_emitters_own_signal_id_gives_the_digest_id_as_before() -> None:
    assert Mark.id_for_signal("sig-plant-late") == derived_id("mk", "sig-plant-late")
    assert Mark.ids_for_signal("sig-plant-late") == (derived_id("mk", "sig-plant-late"),)
    upper = new_signal_id().upper()  # not the daemon's layout (lower-case hex)
    assert Mark.id_for_signal(upper) == derived_id("mk", upper)
