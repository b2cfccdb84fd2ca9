"""Secrets are cut out of a day's lines before they are sent to a model."""

from __future__ import annotations

import pytest

from daemon.llm.redact import REDACTED, redact_line, redact_lines


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("export OPENAI_API_KEY=sk-proj-Zx81kLmN0pQrStUvWxYz12345678", "Zx81kLmN0pQr"),
        ("anthropic sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGhIjKl"),
        ("pushed with ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6"),
        ("aws AKIAIOSFODNN7EXAMPLE in the old script", "AKIAIOSFODNN7EXAMPLE"),
        ("Authorization: Bearer abc123.def456-ghi789", "abc123.def456"),
        ("token 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a"),
        ("password=hunter2", "hunter2"),
        ("db password: correct-horse", "correct-horse"),
        ('{"api_key": "k-1234-abcd"}', "k-1234-abcd"),
        ("my password is Tr0ub4dor&3", "Tr0ub4dor"),
        ("client_secret = s3cr3t-value", "s3cr3t-value"),
        ("paid with 4111 1111 1111 1111 at the bakery", "4111 1111 1111 1111"),
        ("card 5500-0000-0000-0004", "5500-0000-0000-0004"),
        ("hash d41d8cd98f00b204e9800998ecf8427e of the file", "d41d8cd98f00b204e980"),
    ],
)
def test_a_secret_is_redacted(line: str, secret: str) -> None:
    redacted = redact_line(line)
    assert secret not in redacted
    assert REDACTED in redacted


def test_the_key_of_a_key_value_form_stays_so_the_model_knows_what_was_there() -> None:
    assert redact_line("wifi password: hunter2") == f"wifi password: {REDACTED}"


@pytest.mark.parametrize(
    "line",
    [
        "Lunch with Arnold, he's moving to Lisbon in May.",
        "went to bed at 23:00 on 2026-04-11",
        "call +49 30 1234567 about the flat",
        "order 1234 5678 9012 3456 arrives Monday",  # 16 digits, but no valid card (Luhn)
        "I changed my password yesterday",  # talks about a password, holds none
        "read https://example.org/articles/why-sleep-matters",
    ],
)
def test_ordinary_text_is_left_alone(line: str) -> None:
    assert redact_line(line) == line


def test_a_private_key_block_is_removed_line_by_line_keeping_the_line_count() -> None:
    lines = [
        "new deploy key:",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
        "QyNTUxOQAAACDkS2",
        "-----END OPENSSH PRIVATE KEY-----",
        "then lunch.",
    ]
    assert redact_lines(lines) == [
        "new deploy key:",
        REDACTED,
        REDACTED,
        REDACTED,
        REDACTED,
        "then lunch.",
    ]
