"""Loom in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by selenium) against the real daemon, reached the way a user reaches it, through
``cambium loom``'s one-time link: every page read, and every act (search, correct, forget,
review and undo, discard) clicked through with JavaScript on and off. Screenshots of each
page are the test's artefacts, in its tmp_path (or $LOOM_SCREENSHOTS, where the README's
docs/loom-*.png are refreshed from)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.core.records import derived_id
from daemon.core.strength import current_strength
from daemon.testing import CAMBIUM, DaemonHome, running

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL = "apt-get install chromium chromium-driver (.ci/run installs them)"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(f"browser tests need Chromium and its driver: {INSTALL}", allow_module_level=True)

from selenium.common.exceptions import (  # noqa: E402
    NoAlertPresentException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as arrived  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

HALF_LIFE_DAYS = 10.0
INTENSITY = 0.7
DELTA = 0.25
SCRIPT = "<script>alert(1)</script>"
SCREENSHOTS = os.environ.get("LOOM_SCREENSHOTS")
TOKEN = "loom-test-token-0123456789"


@pytest.fixture
def home(tmp_path: Path, unused_tcp_port: int) -> Iterator[DaemonHome]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    home = DaemonHome(tmp_path / "home")
    home.extra_config = f"max_attempts = 1\n[observation]\nreinforce_delta = {DELTA}\n"
    home.ingress_config = f'tcp = "127.0.0.1:{unused_tcp_port}"\ntoken_file = "{token}"\n'
    home.write_config()
    (home.substrate / "drinks.md").write_text("# Drinks\ncoffee, black\n")
    with running(home):
        yield home


@pytest.fixture
def unused_tcp_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def chromium(javascript: bool = True) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,820"):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def door(home: DaemonHome) -> Iterator[str]:
    """``cambium loom --print-url`` running; its one-time link."""
    process = subprocess.Popen(
        [CAMBIUM, "loom", "--print-url", "--config", str(home.config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=home.env(),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("Loom: http://127.0.0.1:"), first + process.stderr.read()
        yield first.removeprefix("Loom: ").strip()
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 0


def emit(home: DaemonHome, signal_body: dict[str, Any]) -> str:
    answer = home.post("/v1/signals?wait=10", signal_body)
    assert answer.status_code == 201, answer.text
    signal_id: str = answer.json()["id"]
    return signal_id


def observe(home: DaemonHome, text: str, at: datetime, evidence: dict[str, Any]) -> str:
    return emit(
        home,
        {
            "type": "memory.observation",
            "source_id": "agent-chat",
            "emitted_at": at.isoformat(),
            "intensity": INTENSITY,
            "decay_rate": HALF_LIFE_DAYS * 86_400,
            "payload": {"subject": "user.food.lunch", "observation": text, "evidence": evidence},
        },
    )


def plant(home: DaemonHome, signal_id: str, based_on: list[str]) -> str:
    emit(
        home,
        {
            "id": signal_id,
            "type": "memory.seed_planted",
            "source_id": "gardener",
            "payload": {
                "subject": "user.food",
                "proposed_change": "Likes lentil soup for lunch.",
                "target_file": "long-term/food.md",
                "based_on_marks": based_on,
            },
        },
    )
    return derived_id("sd", signal_id)


def cli_json(home: DaemonHome, *args: str) -> Any:
    result = home.cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def search(driver: Any, text: str) -> None:
    """The marks page's own filter, by text."""
    box = driver.find_element(By.ID, "marks-text")
    box.send_keys(text)
    box.submit()
    WebDriverWait(driver, 10).until(arrived.url_contains(f"q={text}"))


def arriving(browser: Any, element_id: str) -> Any:
    """The element of the page a form's answer leads to, once that page has loaded (the
    click returns before the POST is answered when the machine is busy)."""
    return WebDriverWait(browser, 30).until(
        arrived.presence_of_element_located((By.ID, element_id))
    )


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this test's screenshots go: its own tmp_path, or $LOOM_SCREENSHOTS."""
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(driver: Any, folder: Path, name: str, *, whole: bool = False) -> None:
    """The window, or (``whole``) the whole page: the window stretched to its height."""
    if not whole:
        assert driver.save_screenshot(str(folder / f"{name}.png"))
        return
    size = driver.get_window_size()
    height = driver.find_element(By.TAG_NAME, "body").rect["height"]
    driver.set_window_size(size["width"], min(int(height) + 200, 4000))
    try:
        assert driver.save_screenshot(str(folder / f"{name}.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])


def plotted(driver: Any) -> list[tuple[datetime, float]]:
    """The strength curve as drawn, read back through the scale the SVG declares."""
    svg = driver.find_element(By.ID, "strength-plot")
    start = datetime.fromisoformat(svg.get_attribute("data-start"))
    end = datetime.fromisoformat(svg.get_attribute("data-end"))
    x0, x1, y0, y1 = (float(svg.get_attribute(f"data-{k}")) for k in ("x0", "x1", "y0", "y1"))
    curve = []
    points = svg.find_element(By.CSS_SELECTOR, "polyline.curve").get_attribute("points")
    for pair in points.split():
        x, y = (float(v) for v in pair.split(","))
        curve.append((start + (end - start) * ((x - x0) / (x1 - x0)), (y - y0) / (y1 - y0)))
    return curve


def test_loom_in_chromium(home: DaemonHome, door: str, browser: Any, shots: Path) -> None:
    now = datetime.now(UTC)
    first_seen, reinforced = now - timedelta(days=20), now - timedelta(days=6)
    day = first_seen.date().isoformat()
    note = home.cli("memory", "note", "had lentil soup for lunch", "--date", day)
    assert note.returncode == 0, note.stderr
    evidence = {"daily_file": f"{day}.md", "line_range": [1, 1]}
    observe(home, "likes lentil soup", first_seen, evidence)
    observe(home, "likes lentil soup", reinforced, {"note": "said so again"})
    observe(home, SCRIPT, first_seen, {"note": "markup"})
    [mark] = cli_json(home, "memory", "recall", "user.food.lunch", "--limit", "1")["marks"]
    seed_id = plant(home, "sig-plant-1", [mark["id"]])
    late_seed = derived_id("sd", "sig-plant-late")
    dead = home.post(
        "/v1/signals?wait=10",
        {
            "type": "memory.seed_reviewed",
            "source_id": "impatient",
            "payload": {"seed_id": late_seed, "decision": "rejected", "reviewer": "ada"},
        },
    ).json()["id"]

    # The one-time link signs this browser in, then is spent.
    browser.get(door)
    assert browser.current_url.endswith("/loom/")
    assert httpx.get(door).status_code == 403
    assert httpx.get(door.split("?")[0]).status_code == 401  # no cookie, no entry

    # Search finds the mark.
    search(browser, "lentil")
    links = browser.find_elements(By.CSS_SELECTOR, "table.marks a")
    assert [a.text for a in links] == ["likes lentil soup"]
    shoot(browser, shots, "marks")

    # Its page plots strength by the formula, past and future, with the reinforcement.
    links[0].click()
    curve = plotted(browser)
    assert curve[0][0] == pytest.approx(first_seen, abs=timedelta(minutes=5))
    assert curve[-1][0] == pytest.approx(now + timedelta(days=60), abs=timedelta(minutes=5))
    instants = [
        next(p for p in curve if p[0] > first_seen + timedelta(days=3)),
        next(p for p in curve if p[0] > reinforced + timedelta(days=2)),
        next(p for p in curve if p[0] > now + timedelta(days=40)),
    ]
    for at, value in instants:
        boosts = [(reinforced, DELTA)] if at >= reinforced else []
        expected = current_strength(INTENSITY, HALF_LIFE_DAYS, first_seen, boosts, at)
        assert value == pytest.approx(expected, abs=0.005), at
    assert len(browser.find_elements(By.CSS_SELECTOR, "circle.reinforcement")) == 1
    quoted = browser.find_element(By.CSS_SELECTOR, "section.evidence blockquote").text
    assert "had lentil soup for lunch" in quoted
    shoot(browser, shots, "mark")

    browser.find_element(By.LINK_TEXT, "open the day").click()
    assert browser.current_url.endswith(f"/loom/days/{day}#L1")
    cited = browser.find_element(By.CSS_SELECTOR, "tr.cited")
    assert "had lentil soup for lunch" in cited.text and "likes lentil soup" in cited.text
    shoot(browser, shots, "day")

    # Accepting the seed in the page: the signal id and the outcome, and the CLI agrees.
    browser.find_element(By.LINK_TEXT, "Seeds").click()
    shoot(browser, shots, "seeds")
    reviewer = browser.find_element(By.NAME, "reviewer")
    reviewer.clear()
    reviewer.send_keys("ada")
    browser.find_element(By.CSS_SELECTOR, "button.accept").click()
    outcome = arriving(browser, "review-outcome").text
    review_id = browser.find_element(By.ID, "review-signal").text
    assert "seeds delivered" in outcome and "now accepted" in outcome
    shoot(browser, shots, "seed")
    [seed] = [s for s in cli_json(home, "memory", "seeds") if s["id"] == seed_id]
    assert seed["state"] == "accepted" and seed["reviewed_by"] == "ada"
    assert cli_json(home, "signals", "show", review_id)["type"] == "memory.seed_reviewed"

    # Retrying a dead signal in the page delivers it once its cause is fixed.
    browser.find_element(By.LINK_TEXT, "Signals").click()
    browser.find_element(By.CSS_SELECTOR, "select[name=status] option[value=dead]").click()
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(browser, 10).until(arrived.url_contains("status=dead"))
    shoot(browser, shots, "signals")
    browser.find_element(By.LINK_TEXT, dead).click()
    assert f"no seed {late_seed}" in browser.find_element(By.CSS_SELECTOR, "td.error").text
    plant(home, "sig-plant-late", [])
    browser.find_element(By.ID, "retry").click()
    assert "seeds delivered" in arriving(browser, "retry-outcome").text
    shoot(browser, shots, "signal")
    assert cli_json(home, "signals", "--status", "dead") == []

    # Markup in a mark is text: no dialog opens.
    browser.find_element(By.LINK_TEXT, "Marks").click()
    search(browser, "alert")
    browser.find_element(By.LINK_TEXT, SCRIPT).click()
    assert browser.find_element(By.CSS_SELECTOR, "h1.observation").text == SCRIPT
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 (reading it is the check)

    # A POST without the form's token is refused, from the page's own origin too.
    browser.find_element(By.LINK_TEXT, "Health").click()
    shoot(browser, shots, "health")
    assert "0 dead" in browser.find_element(By.TAG_NAME, "main").text
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'post';"
        f"f.action = '/loom/signals/{dead}/retry'; document.body.append(f); f.submit();"
    )
    assert browser.find_element(By.TAG_NAME, "h1").text == "Refused"
    assert "token is missing" in browser.find_element(By.CSS_SELECTOR, "p.problem").text


def fill(driver: Any, form: str, **fields: str) -> None:
    for name, value in fields.items():
        field = driver.find_element(By.CSS_SELECTOR, f"{form} [name={name}]")
        field.clear()
        field.send_keys(value)


def labels_apart(driver: Any) -> bool:
    """The time axis's labels as the browser laid them out: none touches another."""
    boxes = [e.rect for e in driver.find_elements(By.CSS_SELECTOR, "text.time-label")]
    assert len(boxes) == 3
    return not any(
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )


@pytest.mark.parametrize("javascript", [True, False], ids=["javascript", "no-javascript"])
def test_loom_acts_in_chromium(home: DaemonHome, door: str, shots: Path, javascript: bool) -> None:
    now = datetime.now(UTC)
    day = now.date().isoformat()
    assert home.cli("memory", "note", "had lentil soup for lunch", "--date", day).returncode == 0
    observe(home, "likes lentil soup", now, {"daily_file": f"{day}.md", "line_range": [1, 1]})
    seed_id = derived_id("sd", "sig-plant-drink")
    emit(
        home,
        {
            "id": "sig-plant-drink",
            "type": "memory.seed_planted",
            "source_id": "gardener",
            "payload": {
                "subject": "user.drink",
                "proposed_change": "Green tea in the morning.",
                "target_file": "long-term/drinks.md",
            },
        },
    )
    dead = emit(
        home,
        {
            "type": "memory.seed_reviewed",
            "source_id": "impatient",
            "payload": {"seed_id": "sd_never", "decision": "rejected", "reviewer": "ada"},
        },
    )
    with chromium(javascript) as browser:
        browser.get(door)
        name = "js" if javascript else "nojs"

        # One box on every page searches every layer; the context block is shown.
        browser.find_element(By.ID, "search-box").send_keys("lentil")
        browser.find_element(By.ID, "search-button").click()
        block = arriving(browser, "context-block").text
        assert "user.food.lunch: likes lentil soup" in block
        shoot(browser, shots, f"search-{name}", whole=True)

        # Open the mark, correct it (confirmed first), and its history shows the correction.
        browser.find_element(By.CSS_SELECTOR, "#search-marks a").click()
        assert browser.find_element(By.ID, "strength-plot").is_displayed()
        assert labels_apart(browser)  # seen a moment ago: "now" is off the start date
        fill(browser, "#correct-form", text="likes lentil stew", reason="misheard")
        browser.find_element(By.ID, "correct").click()
        assert "likes lentil stew" in arriving(browser, "new-text").text
        shoot(browser, shots, f"confirm-{name}", whole=True)
        browser.find_element(By.ID, "confirm").click()
        assert "Corrected" in arriving(browser, "act-outcome").text
        assert browser.find_element(By.CSS_SELECTOR, "h1.observation").text == "likes lentil stew"
        history = browser.find_element(By.ID, "history").text
        assert "corrected by" in history and "“likes lentil soup” became" in history
        shoot(browser, shots, f"corrected-{name}", whole=True)
        corrected = cli_json(home, "memory", "recall", "user.food.lunch")["marks"]
        assert [m["observation"] for m in corrected] == ["likes lentil stew"]

        # Forget it from its page: a tombstone, no strength.
        fill(browser, "#forget-form", reason="private")
        browser.find_element(By.ID, "forget").click()
        arriving(browser, "confirm").click()
        arriving(browser, "tombstone")
        assert not browser.find_elements(By.ID, "strength-plot")
        assert not browser.find_elements(By.TAG_NAME, "meter")
        assert "likes lentil" not in browser.find_element(By.ID, "history").text
        shoot(browser, shots, f"forgotten-{name}", whole=True)
        [tombstone] = cli_json(home, "memory", "tombstones")
        assert tombstone["reason"] == "private"

        # Review the seed with its diff in view, then undo the review.
        browser.find_element(By.LINK_TEXT, "Seeds").click()
        browser.find_element(By.LINK_TEXT, "user.drink").click()
        assert "+Green tea in the morning." in browser.find_element(By.ID, "seed-diff").text
        assert "coffee, black" in browser.find_element(By.ID, "target-text").text
        fill(browser, "form.review", reviewer="ada")
        browser.find_element(By.CSS_SELECTOR, "button.accept").click()
        assert "now accepted" in arriving(browser, "review-outcome").text
        shoot(browser, shots, f"seed-{name}", whole=True)
        browser.find_element(By.ID, "undo").click()
        # The old page's outcome can be found just before the new page replaces it.
        WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda b: "Undo sent" in b.find_element(By.ID, "review-outcome").text
        )
        assert "now pending" in browser.find_element(By.ID, "review-outcome").text
        [seed] = [s for s in cli_json(home, "memory", "seeds") if s["id"] == seed_id]
        assert seed["state"] == "pending"
        assert (home.substrate / "drinks.md").read_text() == "# Drinks\ncoffee, black\n"

        # A dead delivery shows its error in the list, and is discarded from there.
        browser.find_element(By.LINK_TEXT, "Signals").click()
        browser.find_element(By.CSS_SELECTOR, "select[name=status] option[value=dead]").click()
        browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
        WebDriverWait(browser, 10).until(arrived.url_contains("status=dead"))
        assert "no seed sd_never" in browser.find_element(By.CSS_SELECTOR, "td .error").text
        shoot(browser, shots, f"signals-{name}", whole=True)
        browser.find_element(By.CSS_SELECTOR, "form.discard.inline button").click()
        assert "Discarded" in arriving(browser, "discard-outcome").text
        assert cli_json(home, "signals", "show", dead)["deliveries"][0]["status"] == "discarded"

        browser.find_element(By.LINK_TEXT, "This week").click()
        assert "Marks made (2)" in browser.find_element(By.ID, "week-made").text
        shoot(browser, shots, f"week-{name}", whole=True)
