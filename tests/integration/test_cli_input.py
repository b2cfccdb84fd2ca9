"""Out-of-range values on the command line are bad input (exit 2, the option named), never a
traceback; they are refused before anything is sent or read."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.testing import DaemonHome

pytestmark = pytest.mark.subprocess  # runs the real `cambium` command


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("signals", "--limit", "100000000000000000000"), "--limit"),
        (("signals", "--limit", "0"), "--limit"),
        (("emit", "a.b", "--payload", "{}", "--source-id", "x", "--wait", "nan"), "--wait"),
        (
            ("emit", "a.b", "--payload", "{}", "--source-id", "x", "--intensity", "inf"),
            "--intensity",
        ),
        (("memory", "mark", "user.a", "b", "--decay-days", "nan"), "--decay-days"),
        (("memory", "recall", "x", "--min-strength", "nan"), "--min-strength"),
        (("memory", "recall", "x", "--horizon", "100000000d"), "--horizon"),
        (("memory", "recall", "x", "--horizon", "0001-01-01T00:00:00+01:00"), "--horizon"),
    ],
)
def test_out_of_range_values_exit_2_naming_the_option(
    tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    result = DaemonHome(tmp_path).cli(*args)
    assert result.returncode == 2, result
    assert named in result.stderr and "Traceback" not in result.stderr, result.stderr
