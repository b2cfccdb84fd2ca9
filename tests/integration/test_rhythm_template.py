"""Rhythm templates: loading and validation, slot arithmetic across DST, payload rendering."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from rhythms.template import (
    RhythmTemplate,
    RhythmTemplateError,
    bundled_templates,
    latest_slot,
    load_template,
    next_slot,
)

BERLIN = ZoneInfo("Europe/Berlin")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def berlin(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=BERLIN)


def template(**overrides: Any) -> RhythmTemplate:
    data = {
        "name": "test",
        "period": "daily",
        "phase": "03:00",
        "timezone": "Europe/Berlin",
        "signal": {
            "type": "test.tick",
            "payload": {"today": "{{today}}", "yesterday": "{{yesterday}}"},
        },
        **overrides,
    }
    return RhythmTemplate.model_validate(data)


def slots(rhythm: RhythmTemplate, after: datetime, count: int) -> list[datetime]:
    found = []
    for _ in range(count):
        after = next_slot(rhythm, after)
        found.append(after)
    return found


@pytest.fixture
def consolidation() -> RhythmTemplate:
    [bundled] = [t for t in bundled_templates("Europe/Berlin") if t.name == "consolidation"]
    return bundled


def test_bundled_consolidation(consolidation: RhythmTemplate) -> None:
    assert consolidation.name == "consolidation"
    assert (consolidation.period, consolidation.phase) == ("daily", "03:00")
    assert consolidation.timezone == "Europe/Berlin"  # the config's, given to it
    assert consolidation.catchup == "fire_once"
    signal = consolidation.signal
    assert (signal.type, signal.signal_class) == ("memory.consolidate", "lifecycle")
    assert (signal.intensity, signal.decay_rate) == (1.0, 0)
    assert signal.payload == {"through": "{{yesterday}}"}


def test_bundled_consolidation_fires_at_three_in_the_configured_zone() -> None:
    """Issue 11, finding 7: it was fixed to Berlin, 18:00 in Los Angeles, archiving the
    current day there before the evening's notes."""
    [los_angeles] = [
        t for t in bundled_templates("America/Los_Angeles") if t.name == "consolidation"
    ]
    assert los_angeles.timezone == "America/Los_Angeles"
    # 03:00 PST on 1 December is 11:00 UTC; it consolidates through 30 November.
    slot = next_slot(los_angeles, utc(2026, 12, 1, 3))
    assert slot == utc(2026, 12, 1, 11)
    assert los_angeles.render_payload(slot) == {"through": "2026-11-30"}


# -- slots ----------------------------------------------------------------------------------


def test_consolidation_stays_at_three_in_berlin_when_summer_time_starts(
    consolidation: RhythmTemplate,
) -> None:
    # CEST starts at 02:00 on 2026-03-29: 03:00 Berlin is 02:00 UTC before, 01:00 UTC after.
    assert next_slot(consolidation, berlin(2026, 3, 27, 12)) == utc(2026, 3, 28, 2)
    assert next_slot(consolidation, berlin(2026, 3, 28, 12)) == utc(2026, 3, 29, 1)
    assert next_slot(consolidation, berlin(2026, 3, 29, 12)) == utc(2026, 3, 30, 1)


def test_consolidation_stays_at_three_in_berlin_when_summer_time_ends(
    consolidation: RhythmTemplate,
) -> None:
    # CET returns at 03:00 CEST on 2026-10-25: the 03:00 slot that day is 02:00 UTC.
    assert next_slot(consolidation, berlin(2026, 10, 24, 12)) == utc(2026, 10, 25, 2)
    assert slots(consolidation, berlin(2026, 10, 24, 12), 2)[1] == utc(2026, 10, 26, 2)
    assert next_slot(consolidation, berlin(2026, 10, 23, 12)) == utc(2026, 10, 24, 1)


def test_next_slot_is_strictly_after(consolidation: RhythmTemplate) -> None:
    assert next_slot(consolidation, utc(2026, 3, 29, 1)) == utc(2026, 3, 30, 1)
    assert next_slot(consolidation, utc(2026, 3, 29, 0, 59, 59)) == utc(2026, 3, 29, 1)


def test_a_wall_time_skipped_in_spring_fires_once_shifted_by_the_gap() -> None:
    rhythm = template(phase="02:30")
    assert slots(rhythm, berlin(2026, 3, 28, 12), 2) == [
        utc(2026, 3, 29, 1, 30),  # 03:30 CEST: 02:30 does not exist that night
        utc(2026, 3, 30, 0, 30),
    ]


def test_a_wall_time_repeated_in_autumn_fires_once() -> None:
    rhythm = template(phase="02:30")
    assert slots(rhythm, berlin(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST; the 02:30 CET an hour later is skipped
        utc(2026, 10, 26, 1, 30),
    ]


def test_weekly_slots() -> None:
    rhythm = template(period="weekly", phase="sun 18:00")
    assert slots(rhythm, berlin(2026, 3, 25, 12), 3) == [
        utc(2026, 3, 29, 16),  # 18:00 CEST
        utc(2026, 4, 5, 16),
        utc(2026, 4, 12, 16),
    ]
    assert next_slot(rhythm, berlin(2026, 10, 20)) == utc(2026, 10, 25, 17)  # 18:00 CET


def test_cron_slots_in_their_zone() -> None:
    # Weekdays at 09:30 New York, across the US change to daylight time on 2026-03-08.
    rhythm = template(period="cron", phase="30 9 * * mon-fri", timezone="America/New_York")
    assert slots(rhythm, utc(2026, 3, 5), 4) == [
        utc(2026, 3, 5, 14, 30),  # Thursday, EST
        utc(2026, 3, 6, 14, 30),  # Friday
        utc(2026, 3, 9, 13, 30),  # Monday, EDT
        utc(2026, 3, 10, 13, 30),
    ]


def test_cron_with_wildcard_hours_fires_through_the_repeated_hour() -> None:
    rhythm = template(period="cron", phase="*/30 * * * *")
    assert slots(rhythm, utc(2026, 10, 24, 23, 45), 5) == [
        utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST
        utc(2026, 10, 25, 1, 0),  # 02:00 CET, the repeat: real time goes on
        utc(2026, 10, 25, 1, 30),
        utc(2026, 10, 25, 2, 0),
    ]


def test_seconds_in_a_daily_phase() -> None:
    rhythm = template(phase="12:00:30", timezone="UTC")
    assert next_slot(rhythm, utc(2026, 1, 1)) == utc(2026, 1, 1, 12, 0, 30)


def test_latest_slot(consolidation: RhythmTemplate) -> None:
    first = utc(2026, 10, 23, 10)
    assert latest_slot(consolidation, first, utc(2026, 10, 25, 9)) == utc(2026, 10, 25, 2)
    assert latest_slot(consolidation, first, utc(2026, 10, 25, 2)) == utc(2026, 10, 25, 2)
    assert latest_slot(consolidation, first, utc(2026, 10, 24, 0, 59)) is None
    assert latest_slot(consolidation, utc(2026, 10, 25, 2), utc(2026, 10, 25, 9)) is None
    # Down for weeks: still the latest slot only, found without walking every day.
    assert latest_slot(consolidation, utc(2025, 1, 1), utc(2026, 3, 29, 9)) == utc(2026, 3, 29, 1)


def test_latest_slot_of_a_fast_rhythm_after_a_long_absence() -> None:
    rhythm = template(period="cron", phase="* * * * *")
    now = utc(2026, 6, 1, 12, 0, 30)
    assert latest_slot(rhythm, utc(2020, 1, 1), now) == utc(2026, 6, 1, 12)


# -- payload --------------------------------------------------------------------------------


def test_payload_is_rendered_for_the_slot_in_the_rhythms_zone(
    consolidation: RhythmTemplate,
) -> None:
    assert consolidation.render_payload(utc(2026, 3, 29, 1)) == {"through": "2026-03-28"}
    assert consolidation.render_payload(utc(2026, 10, 25, 2)) == {"through": "2026-10-24"}


def test_a_slot_just_after_local_midnight_is_that_local_day() -> None:
    rhythm = template(phase="00:30")
    slot = next_slot(rhythm, berlin(2026, 6, 14, 12))
    assert slot == utc(2026, 6, 14, 22, 30)  # still the 14th in UTC
    assert rhythm.render_payload(slot) == {"today": "2026-06-15", "yesterday": "2026-06-14"}


def test_placeholders_at_any_depth_and_inside_text() -> None:
    rhythm = template(
        signal={
            "type": "test.tick",
            "payload": {
                "note": "review of {{ yesterday }} on {{today}}",
                "days": ["{{yesterday}}", {"day": "{{today}}"}],
                "count": 3,
                "{{today}}": "keys are not rendered",
            },
        }
    )
    assert rhythm.render_payload(utc(2026, 1, 1, 12)) == {
        "note": "review of 2025-12-31 on 2026-01-01",
        "days": ["2025-12-31", {"day": "2026-01-01"}],
        "count": 3,
        "{{today}}": "keys are not rendered",
    }


def test_signal_for_a_slot(consolidation: RhythmTemplate) -> None:
    fired_at = utc(2026, 10, 25, 9, 0, 0)
    signal = consolidation.signal_for(utc(2026, 10, 25, 2), fired_at)
    assert signal.type == "memory.consolidate"
    assert signal.signal_class == "lifecycle"
    assert (signal.intensity, signal.decay_rate) == (1.0, 0.0)
    assert (signal.source_id, signal.source_layer) == ("rhythm:consolidation", "rhythm")
    assert signal.emitted_at == fired_at
    assert signal.idempotency_key == "rhythm:consolidation:2026-10-25T02:00:00Z"
    assert signal.payload == {"through": "2026-10-24"}


def test_signal_defaults_are_the_signals_own() -> None:
    signal = template(signal={"type": "test.tick"}).signal_for(utc(2026, 1, 1), utc(2026, 1, 1))
    assert signal.signal_class == "knowledge"
    assert signal.intensity == 0.7
    assert signal.decay_rate == 14 * 86400


# -- loading --------------------------------------------------------------------------------

VALID = {
    "name": "weekly-review",
    "period": "weekly",
    "phase": "sun 18:00",
    "signal": {"type": "memory.review", "payload": {"week_ending": "{{today}}"}},
}


def write(tmp_path: Path, data: Any, name: str = "rhythm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def test_load_template_takes_the_default_time_zone(tmp_path: Path) -> None:
    loaded = load_template(write(tmp_path, VALID), "America/New_York")
    assert loaded.timezone == "America/New_York"
    assert loaded.catchup == "fire_once"
    assert loaded.signal.signal_class is None  # the Signal's default applies when emitted


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"name": None}, "name", "Field required"),
        ({"name": "Weekly Review"}, "name", "should match pattern"),
        ({"period": "monthly"}, "period", "'daily', 'weekly' or 'cron'"),
        ({"period": "daily", "phase": "25:00"}, "phase", "HH:MM"),
        ({"period": "daily", "phase": "3pm"}, "phase", "HH:MM"),
        ({"phase": "someday 18:00"}, "phase", "a day (mon, tue"),
        ({"period": "cron", "phase": "0 18 * *"}, "phase", "5 fields"),
        ({"period": "cron", "phase": "0 18 * * 0"}, "phase", "name the days of the week"),
        ({"period": "cron", "phase": "0 99 * * *"}, "phase", "cron phase"),
        ({"period": "cron", "phase": "0 0 30 feb *"}, "phase", "never fires"),
        ({"timezone": "Mars/Base"}, "timezone", "unknown time zone 'Mars/Base'"),
        ({"catchup": "always"}, "catchup", "'fire_once' or 'skip'"),
        ({"colour": "blue"}, "colour", "unknown field"),
        ({"signal": {"type": "Memory.Review"}}, "signal.type", "String should match"),
        ({"signal": {"type": "memory"}}, "signal.type", "String should match"),
        ({"signal": {}}, "signal.type", "Field required"),
        ({"signal": {"type": "a.b", "intensity": 1.5}}, "signal", "intensity: Input should be"),
        ({"signal": {"type": "a.b", "intensity": "high"}}, "signal.intensity", "valid number"),
        ({"signal": {"type": "a.b", "decay_rate": -1}}, "signal", "decay_rate: Input should"),
        ({"signal": {"type": "a.b", "extra": 1}}, "signal.extra", "unknown field"),
        (
            {"signal": {"type": "a.b", "payload": {"d": "{{tomorrow}}"}}},
            "signal.payload",
            "unknown placeholder {{tomorrow}}",
        ),
        (
            {"signal": {"type": "a.b", "payload": {"d": ["ok", {"e": "{{ now }}"}]}}},
            "signal.payload",
            "unknown placeholder {{ now }}",
        ),
    ],
)
def test_bad_fields_name_the_file_field_and_rule(
    tmp_path: Path, change: dict[str, Any], field: str, rule: str
) -> None:
    data = {key: value for key, value in {**VALID, **change}.items() if value is not None}
    path = write(tmp_path, data, name="bad-rhythm.yaml")
    with pytest.raises(RhythmTemplateError) as caught:
        load_template(path, "Europe/Berlin")
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert f"{field}: " in message
    assert rule in message


def test_a_yaml_date_in_the_payload_is_refused(tmp_path: Path) -> None:
    # Unquoted, YAML reads 2026-01-01 as a date, which no signal payload can carry.
    text = "name: x\nperiod: daily\nphase: '03:00'\nsignal: {type: a.b, payload: {d: 2026-01-01}}\n"
    with pytest.raises(RhythmTemplateError, match="signal: payload: date is not a JSON value"):
        load_template(write(tmp_path, text), "UTC")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("name: x\n  period: daily\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        ("", "must be a mapping"),
    ],
)
def test_bad_yaml(tmp_path: Path, text: str, rule: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RhythmTemplateError, match=rule) as caught:
        load_template(path, "UTC")
    assert str(caught.value).startswith(str(path))


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RhythmTemplateError, match="cannot read"):
        load_template(tmp_path / "absent.yaml", "UTC")


def test_a_bad_default_time_zone_is_named(tmp_path: Path) -> None:
    with pytest.raises(RhythmTemplateError, match="timezone: unknown time zone"):
        load_template(write(tmp_path, VALID), "Nowhere/Special")
