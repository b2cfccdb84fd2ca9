"""The real daemon (``cambium run``) as a subprocess on a private home directory, talked to
over its real Unix socket: the one harness the tests and the benchmarks start a daemon with
(and one anyone testing against Cambium can use); and the few waits and rules that only
tests need, kept out of the product code. Imports the bus and the core, nothing else of
ours."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from daemon.bus import SignalBus
from daemon.core.subjects import normalize_subject

CAMBIUM = str(Path(sys.executable).with_name("cambium"))


@dataclass
class DaemonHome:
    """A directory holding everything one daemon uses: config, database, socket, memory."""

    root: Path
    extra_config: str = ""
    ingress_config: str = ""
    db_url: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    startup_seconds: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        for directory in ("memory/long-term", "memory/daily", "memory/compost"):
            (self.root / directory).mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(mode=0o700, exist_ok=True)
        self.write_config()

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def substrate(self) -> Path:
        return self.root / "memory" / "long-term"

    @property
    def socket(self) -> Path:
        return self.run_dir / "cambium.sock"

    @property
    def config(self) -> Path:
        return self.root / "cambium.toml"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    def write_config(self) -> None:
        url = self.db_url or f"sqlite:///{self.root / 'cambium.db'}"
        self.config.write_text(
            f"""
workspace = "default"
timezone = "Europe/Berlin"
[store]
url = "{url}"
[ingress]
socket = "run/cambium.sock"
{self.ingress_config}
[paths]
substrate = ["memory/long-term", "SOUL.md"]
daily = "memory/daily"
compost = "memory/compost"
[bus]
grace_period = 5
{self.extra_config}
"""
        )

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        env["CAMBIUM_CONFIG"] = str(self.config)
        return env

    def start(self, timeout: float = 30.0) -> None:
        assert self.process is None, "already running"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [CAMBIUM, "run", "--config", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
            )
        started = time.monotonic()
        while time.monotonic() < started + timeout:
            if self.process.poll() is not None:
                raise AssertionError(f"daemon exited {self.process.returncode}:\n{self.log_text()}")
            if self.socket.exists():
                try:
                    if self.get("/v1/health").status_code == 200:
                        self.startup_seconds = time.monotonic() - started
                        return
                except httpx.TransportError:
                    pass
            time.sleep(0.005)
        self.stop(signal.SIGKILL)
        raise AssertionError(f"daemon not ready in {timeout}s:\n{self.log_text()}")

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        assert self.process is not None
        self.process.send_signal(signum)
        code = self.process.wait(timeout)
        self.process = None
        return code

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop cleanly (SIGTERM); kill it if it does not stop within the timeout."""
        if self.process is None:
            return
        try:
            self.stop(signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            self.stop(signal.SIGKILL)

    def rss_mb(self) -> float:
        """The daemon's resident set size from /proc (Linux), in MiB."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text(encoding="ascii")
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kib) / 1024

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def client(self) -> httpx.Client:
        # No TLS on a Unix socket: verify=False spares loading the CA bundle (40 ms of CPU
        # per client, and tests make thousands).
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket), verify=False),
            base_url="http://cambium",
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        with self.client() as client:
            return client.get(path, params=params, timeout=10)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        with self.client() as client:
            return client.post(path, json=body, timeout=30, **kwargs)

    def cli(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the installed ``cambium`` command against this home."""
        return subprocess.run(
            [CAMBIUM, *args],
            capture_output=True,
            text=True,
            env=self.env(),
            input=input,
            timeout=60,
        )


def curl_available() -> bool:
    return shutil.which("curl") is not None


@contextmanager
def running(home: DaemonHome) -> Iterator[DaemonHome]:
    """Started, and killed (SIGKILL) afterwards if a test left it running."""
    home.start()
    try:
        yield home
    finally:
        if home.process is not None:
            home.stop(signal.SIGKILL)


async def drained(bus: SignalBus) -> None:
    """Wait until no delivery is pending anywhere (bound it with ``anyio.fail_after``)."""
    await bus.wait_until(lambda tx: True if tx.signals.open_counts().pending == 0 else None)


def subject_matches(prefix: str, candidate: str) -> bool:
    """Segment-prefix match, the rule the marks' subject query implements in SQL:
    ``user.sleep`` matches ``user.sleep`` and ``user.sleep.bedtime`` but not
    ``user.sleepover``; the empty prefix matches everything."""
    p = normalize_subject(prefix)
    c = normalize_subject(candidate)
    return p == "" or c == p or c.startswith(p + ".")


@contextmanager
def postgres_schema(server: str, prefix: str = "t_") -> Iterator[tuple[str, str]]:
    """A new, empty schema on the PostgreSQL ``server`` (a URL) and a URL whose connections
    use it, with the schema's name; the schema is dropped afterwards."""
    from sqlalchemy import create_engine, text

    schema = f"{prefix}{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in server else "?"
    try:
        yield f"{server}{separator}options=-csearch_path%3D{schema}", schema
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
