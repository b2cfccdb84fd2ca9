"""``bench.extraction`` scores consolidation against gold facts: run as a user runs it
(``python -m bench.extraction`` from the repository root) with the scripted chat server as
the model, a fake that answers exactly the gold facts with their evidence scores
1.0, one that finds nothing 0.0, and one citing the wrong lines loses evidence precision."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, Reply, chat_server

pytestmark = pytest.mark.subprocess  # runs python -m bench.extraction

REPOSITORY = Path(__file__).resolve().parents[2]

DAYS = {
    "2023-05-08": [
        "## Session 1 - 1:56 pm on 8 May, 2023",
        "Caroline: I went to a support group yesterday and it was so powerful.",
        "Melanie: I'm swamped with the kids and work.",
        "Caroline: I want to study counseling next year.",
    ],
    "2023-05-25": [
        "## Session 2 - 1:14 pm on 25 May, 2023",
        "Melanie: I ran a charity race for mental health last Saturday.",
        "Caroline: That's great!",
    ],
}
GOLD = [
    ("Caroline attended a support group and found it powerful.", "2023-05-08", 2),
    ("Melanie is swamped with kids and work.", "2023-05-08", 3),
    ("Caroline plans to study counseling next year.", "2023-05-08", 4),
    ("Melanie ran a charity race for mental health.", "2023-05-25", 2),
]
ASKED = re.compile(r"Log for (\S+), lines (\d+) to (\d+):")


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    root = tmp_path / "bench" / "locomo-dev" / "conv-x"
    (root / "daily").mkdir(parents=True)
    for day, lines in DAYS.items():
        (root / "daily" / f"{day}.md").write_text("\n".join(lines) + "\n")
    observations = [
        {
            "session": 1,
            "speaker": "x",
            "text": text,
            "evidence": [{"file": f"daily/{day}.md", "line": n}],
        }
        for text, day, n in GOLD
    ]
    (root / "observations.json").write_text(json.dumps(observations))
    return root


def fake_model(shift: int = 0) -> Callable[[dict[str, Any]], Reply]:
    """A model that knows the gold facts: for the lines it is shown it answers each fact
    they hold, citing its line moved by ``shift``."""

    def answer(body: dict[str, Any]) -> Reply:
        asked = ASKED.search(body["messages"][-1]["content"])
        assert asked is not None
        day, first, last = asked[1], int(asked[2]), int(asked[3])
        facts = [
            {
                "subject": "people.someone",
                "observation": text,
                "line_range": [min(n + shift, last)] * 2,
                "affinity": [],
            }
            for text, fact_day, n in GOLD
            if fact_day == day and first <= n <= last
        ]
        return Reply(json.dumps({"facts": facts}), tokens=100)

    return answer


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The results ``python -m bench.extraction ARGS`` wrote, and what it printed."""
    output = tmp_path / "extraction.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.extraction", *args, "--output", str(output)],
        cwd=REPOSITORY,
        env=os.environ | {"CAMBIUM_BENCH_DATA": str(tmp_path / "bench")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(output.read_text()), done.stdout


def measure(tmp_path: Path, server: ChatServer, match: str) -> dict[str, Any]:
    config = tmp_path / "cambium.toml"
    config.write_text(
        f'[consolidation]\nextractor = "openai"\n[llm]\nbase_url = "{server.url}"\nmodel = "fake"\n'
    )
    return bench(tmp_path, "--config", str(config), "--match", match)[0]


NO_SEMANTIC = importlib.util.find_spec("onnxruntime") is None
MATCHES = [
    "tokens",
    pytest.param(
        "semantic",
        marks=pytest.mark.skipif(
            NO_SEMANTIC, reason="needs pip install 'cambium-memory[semantic]'"
        ),
    ),
]


@pytest.mark.parametrize("match", MATCHES)
def test_a_perfect_fake_scores_one(
    tmp_path: Path, conversation: Path, server: ChatServer, match: str
) -> None:
    server.responder = fake_model()
    results = measure(tmp_path, server, match)
    assert results["match"] == match
    assert results["coverage"] == 1.0 and results["evidence_precision"] == 1.0
    assert (results["days"], results["gold_facts"], results["marks"]) == (2, 4, 4)
    assert results["marks_per_day"] == 2.0 and results["tokens_per_day"] == 100.0
    assert results["dead_days"] == []


@pytest.mark.parametrize("match", MATCHES)
def test_a_fake_that_finds_nothing_scores_zero(
    tmp_path: Path, conversation: Path, server: ChatServer, match: str
) -> None:
    server.responder = lambda body: Reply('{"facts": []}')
    results = measure(tmp_path, server, match)
    assert results["coverage"] == 0.0 and results["marks"] == 0


def test_marks_citing_the_wrong_lines_lose_evidence_precision_not_coverage(
    tmp_path: Path, conversation: Path, server: ChatServer
) -> None:
    server.responder = fake_model(shift=-1)  # line 2's fact cited at line 1, and so on
    results = measure(tmp_path, server, "tokens")
    assert results["coverage"] == 1.0 and results["evidence_precision"] == 0.0


def test_a_dead_day_is_counted_with_its_error(
    tmp_path: Path, conversation: Path, server: ChatServer
) -> None:
    server.responder = lambda body: Reply(status=500, body='{"error": "model not loaded"}')
    results = measure(tmp_path, server, "tokens")
    assert [d["day"] for d in results["dead_days"]] == ["2023-05-08", "2023-05-25"]
    assert "model not loaded" in results["dead_days"][0]["error"]


def test_the_mock_reads_only_obs_lines(tmp_path: Path, conversation: Path) -> None:
    _, printed = bench(tmp_path, "--match", "tokens")
    assert re.search(r"^extractor +mock$", printed, re.M)
    assert re.search(r"^coverage +0\.0$", printed, re.M)
