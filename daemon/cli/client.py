"""The daemon's ingress, as the write commands (and ``status``) use it: HTTP/JSON over the
Unix socket. Every way a call can go wrong becomes a :class:`Failure` with the right exit
code: 3 when nobody answers, 2 for input the daemon refuses (422, 413), 1 otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from daemon.cli.common import BadInput, Failure, Unreachable

# The API's own ceiling for ``?wait=``; commands wait up to this long for their deliveries
# (they return as soon as every delivery is settled).
MAX_WAIT_SECONDS = 30.0
# Time on top of a requested wait for the daemon to store the signal and answer.
ANSWER_SECONDS = 10.0


class Ingress:
    """One daemon, reached through ``socket``."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/v1/health")

    def emit(self, signal: dict[str, Any], wait: float) -> dict[str, Any]:
        """Store ``signal``; with ``wait``, also wait that long for its deliveries. The signal
        is checked here first, so bad input fails the same with the daemon up or down."""
        from daemon.core.signal import Signal, SignalRejected

        try:
            Signal.parse(signal)
        except SignalRejected as exc:
            raise BadInput(f"bad input: {exc}") from None
        return self._call("POST", "/v1/signals", json=signal, params={"wait": wait}, wait=wait)

    def signal(self, signal_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/signals/{_segment(signal_id)}")

    def retry(self, signal_id: str, wait: float) -> dict[str, Any]:
        return self._call(
            "POST", f"/v1/signals/{_segment(signal_id)}/retry", params={"wait": wait}, wait=wait
        )

    def review(self, seed_id: str, decision: str, reviewer: str) -> dict[str, Any]:
        body = {"decision": decision, "reviewer": reviewer}
        # The daemon waits up to 10 s itself for the review to be applied.
        return self._call("POST", f"/v1/seeds/{_segment(seed_id)}/review", json=body, wait=10.0)

    def undo_review(self, seed_id: str, reviewer: str) -> dict[str, Any]:
        body = {"reviewer": reviewer}
        return self._call("POST", f"/v1/seeds/{_segment(seed_id)}/undo", json=body, wait=10.0)

    def correct(self, mark_id: str, text: str, reason: str, by: str) -> dict[str, Any]:
        body = {"text": text, "reason": reason, "by": by}
        return self._call("POST", f"/v1/marks/{_segment(mark_id)}/correct", json=body, wait=10.0)

    def retract(self, mark_id: str, reason: str, by: str) -> dict[str, Any]:
        body = {"reason": reason, "by": by}
        return self._call("POST", f"/v1/marks/{_segment(mark_id)}/retract", json=body, wait=10.0)

    def forget(self, target: dict[str, str], reason: str, by: str) -> dict[str, Any]:
        body = target | {"reason": reason, "by": by}
        return self._call("POST", "/v1/forget", json=body, wait=10.0)

    def check_deliveries(self, answer: dict[str, Any]) -> None:
        """Fail, naming each receptor's last error, if a delivery in ``answer`` is dead."""
        deliveries: dict[str, str] = answer.get("deliveries") or {}
        dead = [receptor for receptor, status in deliveries.items() if status == "dead"]
        if not dead:
            return
        signal_id = answer["id"]
        errors = {d["receptor"]: d["last_error"] for d in self.signal(signal_id)["deliveries"]}
        lines = [f"delivery to {receptor} is dead: {errors.get(receptor)}" for receptor in dead]
        lines.append(f"fix the cause, then run `cambium signals retry {signal_id}`")
        raise Failure("\n".join(lines))

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        wait: float = 0.0,
    ) -> dict[str, Any]:
        unreachable = f"daemon not reachable at {self.socket} — start it with `cambium run`"
        if not self.socket.exists():
            raise Unreachable(unreachable)
        timeout = wait + ANSWER_SECONDS
        transport = httpx.HTTPTransport(uds=str(self.socket))
        try:
            with httpx.Client(transport=transport, base_url="http://cambium") as client:
                response = client.request(method, path, json=json, params=params, timeout=timeout)
        except httpx.TimeoutException:
            raise Unreachable(
                f"the daemon at {self.socket} did not answer within {timeout:g} s"
            ) from None
        except httpx.TransportError:
            raise Unreachable(unreachable) from None
        return _answer(response)


def _segment(value: str) -> str:
    """``value`` as one path segment: an id typed by hand cannot reach another route."""
    return quote(value, safe="")


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text.strip() or response.reason_phrase}
    if response.is_success:
        return dict(body)
    detail = str(body.get("detail", body)) if isinstance(body, dict) else str(body)
    if response.status_code in (413, 422):
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise BadInput(f"refused: {detail}")
    if response.status_code in (404, 409):
        raise Failure(detail)
    raise Failure(f"the daemon answered {response.status_code}: {detail}")
