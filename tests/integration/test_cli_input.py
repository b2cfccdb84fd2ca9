"""Out-of-range values on the command line are bad input (exit 2, the option named), never a
traceback; they are refused before anything is sent or read. Through click's CliRunner:
what is checked is the command's answer and exit code, not the process."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from daemon.cli.main import cli
from daemon.config import CONFIG_ENV
from daemon.testing import DaemonHome


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
        (("memory", "consolidate", "--through", "2026-02-30"), "--through"),
        (("memory", "consolidate", "--date", "2026-01-01", "--through", "2026-01-02"), "--through"),
    ],
)
def test_out_of_range_values_exit_2_naming_the_option(
    tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    home = DaemonHome(tmp_path)
    result = CliRunner().invoke(cli, args, env={CONFIG_ENV: str(home.config)})
    assert result.exit_code == 2 and result.exception is not None, result.output
    assert isinstance(result.exception, SystemExit), result.exc_info  # no traceback
    assert named in result.stderr, result.stderr
    assert not (tmp_path / "cambium.db").exists(), "refused before anything is read"
