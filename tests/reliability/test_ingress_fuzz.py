"""The ingress fuzzed from its own OpenAPI schema (schemathesis), against the real daemon
over its Unix socket: valid and invalid requests to every operation.

Whatever arrives, the daemon answers without a 5xx and keeps serving, and a refused (4xx)
request stores nothing: the number of stored signals is compared before and after each
call. Requests are encoded as schemathesis means them (through ``requests``) and sent
over the socket with httpx, which speaks HTTP over a Unix socket.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import BaseSchema, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

BASE_URL = "http://cambium"


def stored_signals(database: Path) -> int:
    with sqlite3.connect(database) as connection:
        count: int = connection.execute("SELECT count(*) FROM signals").fetchone()[0]
    return count


def send(client: httpx.Client, case: Case[Any]) -> httpx.Response:
    prepared = requests.Request(**case.as_transport_kwargs(base_url=BASE_URL)).prepare()
    assert prepared.method is not None and prepared.url is not None
    headers = cast(dict[str, str], dict(prepared.headers))
    body = cast(bytes | str | None, prepared.body)
    return client.request(prepared.method, prepared.url, headers=headers, content=body)


def cases(schema: BaseSchema) -> st.SearchStrategy[Case[Any]]:
    """Valid and invalid requests for every operation in the schema."""
    strategies = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        strategies += [result.ok().as_strategy(generation_mode=mode) for mode in GenerationMode]
    return st.one_of(strategies)


def fuzz(home: DaemonHome, examples: int) -> None:
    database = home.root / "cambium.db"
    with home.client() as client:
        schema = schemathesis.openapi.from_dict(client.get("/openapi.json").json())

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases(schema))
        def call(case: Case[Any]) -> None:
            before = stored_signals(database)
            response = send(client, case)
            case.validate_response(response, checks=[not_a_server_error])
            if 400 <= response.status_code < 500:
                assert stored_signals(database) == before, f"refused, yet stored: {response.text}"

        call()
    assert home.process is not None and home.process.poll() is None, "the daemon is still up"
    assert home.get("/v1/health").status_code == 200, "and still serving"


def test_fuzzed_requests_get_no_5xx_and_refusals_store_nothing(tmp_path: Path) -> None:
    with running(DaemonHome(tmp_path)) as home:
        fuzz(home, examples=300)


@pytest.mark.slow
def test_fuzzed_requests_long_run(tmp_path: Path) -> None:
    with running(DaemonHome(tmp_path)) as home:
        fuzz(home, examples=2_000)
