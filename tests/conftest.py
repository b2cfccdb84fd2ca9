"""Shared fixtures. Every store test runs on SQLite, and on PostgreSQL when
CAMBIUM_TEST_POSTGRES_URL is set (CI sets it); without it those cases are skipped, saying why."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from daemon.store import Store
from daemon.store.migrate import upgrade

POSTGRES_URL = os.environ.get("CAMBIUM_TEST_POSTGRES_URL")
SQLITE_PREFIX = "sqlite:///"
POSTGRES_SKIP = (
    "PostgreSQL tests skipped: CAMBIUM_TEST_POSTGRES_URL is not set "
    "(.ci/run points it at postgresql+psycopg://postgres@127.0.0.1:5432/test)"
)


def pytest_report_header() -> str:
    if POSTGRES_URL:
        return f"cambium: PostgreSQL tests run against {POSTGRES_URL}"
    return f"cambium: {POSTGRES_SKIP}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", help="run the long reliability runs too")


TESTS = Path(__file__).parent
SCOPES = ("unit", "integration", "acceptance", "reliability")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The folder says the scope; everything in acceptance/ starts `cambium` as a subprocess,
    # so `make test-fast` (-m "not subprocess") leaves it out. Elsewhere a test that starts a
    # child process says so itself with @pytest.mark.subprocess.
    for item in items:
        folders = item.path.relative_to(TESTS).parts[:-1]
        scope = folders[0] if folders and folders[0] in SCOPES else None
        if scope is not None:
            item.add_marker(scope)
        if scope == "acceptance":
            item.add_marker(pytest.mark.subprocess)
    if config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="long run: pass --long to include it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL for a fresh, empty schema on the test server, dropped afterwards."""
    if not POSTGRES_URL:
        pytest.skip(POSTGRES_SKIP)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"{SQLITE_PREFIX}{tmp_path_factory.mktemp('db')}/cambium.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to head once per session (per xdist worker): a SQLite store
    test starts from a byte copy of it instead of running every migration again (~0.5 s)."""
    path = tmp_path_factory.mktemp("template") / "cambium.db"
    upgrade(f"sqlite:///{path}")
    assert not path.with_name("cambium.db-wal").exists(), "the template is checkpointed"
    return path


@pytest.fixture
def store(db_url: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    if db_url.startswith(SQLITE_PREFIX):
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), db_url[len(SQLITE_PREFIX) :])
    else:
        upgrade(db_url)
    store = Store(db_url)
    store.start()
    try:
        yield store
    finally:
        store.close()
