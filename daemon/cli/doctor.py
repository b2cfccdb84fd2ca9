"""``cambium doctor``: is everything this config needs in place? Each check says ok or
FAIL and, when it fails, one line naming what to do; exit 1 if any fails.

The checks, in the order a person would fix them: the config loads; the store is reachable
and at the head revision; the socket is there and the daemon answers its health; the model
endpoint answers (when ``[llm]`` names a model); the semantic model loads (when
``[recall] semantic = true``); the service unit is installed and runs this config.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from daemon.cli.common import Failure, config_option, json_option, print_json

if TYPE_CHECKING:
    from daemon.config import Config

MODEL_TIMEOUT = 3.0  # seconds: a model server that is up lists its models at once
HEALTH_SECONDS = 5.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None  # what to do, when it failed


class CheckFailed(Exception):
    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail, self.fix = detail, fix


def _run(name: str, check: Callable[[], str]) -> Check:
    try:
        return Check(name, True, check())
    except CheckFailed as failed:
        return Check(name, False, failed.detail, failed.fix)


def check_store(config: Config) -> str:
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from daemon.cli.common import missing_database
    from daemon.store import describe_failure
    from daemon.store.migrate import current_revision, head_revision

    upgrade = "run `cambium db upgrade` (or start the daemon, which migrates)"
    missing = missing_database(config)
    if missing is not None:
        raise CheckFailed(f"no database at {missing}", upgrade)
    try:
        revision = current_revision(config.store.url)
    except (SQLAlchemyError, CommandError) as exc:
        raise CheckFailed(
            f"cannot reach {describe_failure(config.store.url, exc)}",
            "start the database server, or fix [store] url",
        ) from None
    if revision != head_revision():
        raise CheckFailed(f"at revision {revision}, not {head_revision()}", upgrade)
    return f"at head revision {revision}"


def check_daemon(config: Config) -> str:
    from daemon.cli.common import login_name
    from daemon.client import CambiumError, Client

    socket = config.ingress.socket
    start = "start it: `cambium run` (or `cambium service install --now`)"
    if not socket.is_socket():
        raise CheckFailed(f"no socket at {socket}: the daemon is not running", start)
    client = Client(socket, source_id=login_name(), answer_seconds=HEALTH_SECONDS)
    try:
        health = client.health()
    except CambiumError as exc:  # not reachable, no answer, or an error answer
        raise CheckFailed(f"the daemon does not answer at {socket}: {exc}", start) from None
    finally:
        client.close()
    if health.status != "ok":
        raise CheckFailed(
            f"the daemon is {health.status}: {health.problem or 'no reason given'}",
            "see `cambium status` and the daemon's log",
        )
    return f"answering at {socket} (version {health.version})"


def check_model_endpoint(config: Config) -> str:
    import httpx

    url = config.llm.base_url.rstrip("/") + "/models"
    fix = f"start the model server at {config.llm.base_url}, or fix [llm] base_url"
    try:
        response = httpx.get(url, timeout=MODEL_TIMEOUT, trust_env=False)
    except httpx.HTTPError as exc:
        raise CheckFailed(f"{url}: {exc or type(exc).__name__}", fix) from None
    if response.status_code >= 500 or response.status_code == 404:
        raise CheckFailed(f"{url} answered HTTP {response.status_code}", fix)
    return f"{config.llm.base_url} answers (model {config.llm.model})"


def check_semantic_model(config: Config) -> str:
    try:
        from daemon.search.semantic import load_semantic
    except ImportError as exc:
        raise CheckFailed(
            f"the semantic extra is not installed ({exc.name})",
            "pip install 'cambium-memory[semantic]', or set [recall] semantic = false",
        ) from None
    from daemon.search.embedding import SemanticUnavailable

    try:
        semantic = load_semantic(config.recall)
    except SemanticUnavailable as exc:
        raise CheckFailed(
            str(exc), "pip install 'cambium-memory[semantic]', or fix [recall] model"
        ) from None
    if semantic.cache is not None:
        semantic.cache.close()
    return f"model {semantic.embedder.model_id} loads"


def check_service(config: Config) -> str:
    from daemon.cli.setup import sandbox_for
    from daemon.service_files import Platform, Sandbox, service_file

    if config.source is None:
        raise CheckFailed("no config file", "run `cambium init DIR`, then pass --config")
    platform: Platform = "launchd" if sys.platform == "darwin" else "systemd"
    unit = service_file(platform, Path(), Path(), Path.home(), Sandbox((), False, False)).path
    install = f"run `cambium service install --config {config.source}`"
    if not unit.is_file():
        raise CheckFailed(f"no service file at {unit}", install)
    text = unit.read_text(encoding="utf-8")
    needed = [str(config.source), *sandbox_for(config).writable]
    missing = [item for item in needed if item not in text]
    if missing:
        raise CheckFailed(f"{unit} does not match this config (lacks {missing[0]})", install)
    return f"{unit} runs this config"


def run_checks(config_path: Path | None) -> list[Check]:
    from daemon.cli.common import load

    try:
        config = load(config_path)
    except Failure as exc:
        fix = "fix the file and key it names (`cambium init DIR` writes a new one)"
        return [Check("config", False, exc.format_message(), fix)]
    where = str(config.source) if config.source else "no file: the defaults"
    checks = [
        Check("config", True, where),
        _run("store", lambda: check_store(config)),
        _run("daemon", lambda: check_daemon(config)),
    ]
    if config.llm_configured:
        checks.append(_run("model endpoint", lambda: check_model_endpoint(config)))
    if config.recall.semantic:
        checks.append(_run("semantic model", lambda: check_semantic_model(config)))
    checks.append(_run("service", lambda: check_service(config)))
    return checks


@click.command()
@json_option
@config_option
def doctor(as_json: bool, config_path: Path | None) -> None:
    """Check that everything this config needs is in place; exit 1 if anything is not.

    The config, the store (reachable, migrated), the daemon (socket, health), the model
    endpoint (when [llm] names a model), the semantic model (when [recall] semantic =
    true), the service unit (installed, running this config). A failed check names what
    to do.

    \b
    Examples:
      cambium doctor
      cambium doctor --json
    """
    checks = run_checks(config_path)
    if as_json:
        print_json({"ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]})
    else:
        for check in checks:
            click.echo(f"{'ok' if check.ok else 'FAIL':<4}  {check.name}: {check.detail}")
            if check.fix:
                click.echo(f"      fix: {check.fix}")
    if not all(c.ok for c in checks):
        sys.exit(1)
