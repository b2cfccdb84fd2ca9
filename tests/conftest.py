"""Shared fixtures. Every store test runs on SQLite, and on PostgreSQL when
CAMBIUM_TEST_POSTGRES_URL is set (CI sets it); without it those cases are skipped, saying why."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import structlog
from migrated import (
    PostgresSchemas,
    Statements,
    copy_sqlite,
    migrate_sqlite_template,
    record_postgres_upgrade,
    replay,
    shape,
)

from daemon.store import Store
from daemon.testing import postgres_schema

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


@contextmanager
def empty_schema() -> Iterator[tuple[str, str]]:
    """A fresh, empty schema on the test server and a URL that works in it; dropped after."""
    assert POSTGRES_URL is not None
    with postgres_schema(POSTGRES_URL) as found:
        yield found


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A command run in process (click's CliRunner) configures structlog for a terminal
    (warnings only, to stderr); the next test must see every log line again."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL for a fresh, empty schema on the test server, dropped afterwards."""
    if not POSTGRES_URL:
        pytest.skip(POSTGRES_SKIP)
    with empty_schema() as (url, _):
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """An empty database; for a test that uses ``store`` too, on PostgreSQL, a schema already
    at head (``store`` opens it)."""
    if request.param == "sqlite":
        yield f"{SQLITE_PREFIX}{tmp_path_factory.mktemp('db')}/cambium.db"
    elif "store" in request.fixturenames:
        if not POSTGRES_URL:
            pytest.skip(POSTGRES_SKIP)
        schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
        url = schemas.take(request.getfixturevalue("postgres_upgrade"))
        yield url
        schemas.give_back(url)
    else:
        yield str(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrate_sqlite_template(tmp_path_factory.mktemp("template") / "cambium.db")


@pytest.fixture(scope="session")
def postgres_upgrade() -> Statements:
    """The statements of one real upgrade to head, checked once per session: replayed into
    a second schema, they make the same tables, columns, indexes and revision."""
    with empty_schema() as (upgraded, schema), empty_schema() as (replayed, other):
        statements = record_postgres_upgrade(upgraded, schema)
        replay(replayed, statements)
        assert shape(replayed, other) == shape(upgraded, schema)
    return statements


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[PostgresSchemas]:
    schemas = PostgresSchemas(empty_schema)
    yield schemas
    schemas.drop_all()


@pytest.fixture
def store(db_url: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store at head: a copy of the session's migrated SQLite file, or on PostgreSQL a
    schema of the session's at head (``db_url`` hands it over), holding nothing yet."""
    if db_url.startswith(SQLITE_PREFIX):
        copy_sqlite(request.getfixturevalue("migrated_sqlite"), db_url)
    store = Store(db_url)
    store.start()
    try:
        yield store
    finally:
        store.close()
