"""Readable output for people: rich text and tables. (Scripts use ``--json``.)

Everything is rendered through :func:`show`, which strips the trailing blanks rich pads
table cells with, so the output pastes cleanly into files and diffs. Markup and emoji codes
are off: memory text such as ``[x]`` or ``:smile:`` is printed as written. Piped (stdout no
terminal), nothing is wrapped: each line stays whole for ``grep`` and friends.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from daemon.cli.common import plural, time_zone
from daemon.core.clock import SECONDS_PER_DAY
from daemon.core.lines import line_span

if TYPE_CHECKING:
    from daemon.core.records import Seed


# The width of piped output: no line is wrapped short of it.
PIPED_WIDTH = 100_000


def show(*renderables: RenderableType) -> None:
    piped = not sys.stdout.isatty()
    console = Console(
        markup=False,
        emoji=False,
        highlight=False,
        width=PIPED_WIDTH if piped else None,
        soft_wrap=piped,
    )
    with console.capture() as captured:
        for renderable in renderables:
            console.print(renderable)
    lines = captured.get().splitlines()
    sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))


def when(value: datetime | str | None) -> str:
    """An instant for people: in the configured time zone, to the second, labelled with
    the zone (``2026-05-20 14:00:05 CEST``), as Loom shows it. (``--json`` stays UTC.)"""
    if value is None:
        return "—"
    if isinstance(value, str):
        value = _instant(value)
    return value.astimezone(time_zone()).strftime("%Y-%m-%d %H:%M:%S %Z")


def fields(rows: Iterable[tuple[str, RenderableType]]) -> Table:
    """Labelled rows: a label column, then the values."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def indent(renderable: RenderableType, by: int = 2) -> Padding:
    return Padding(renderable, (0, 0, 0, by), expand=False)


def section(title: str, items: Sequence[RenderableType]) -> Group:
    return Group(Text(f"{title} ({len(items)})", style="bold"), *(indent(i) for i in items))


def table(*columns: str) -> Table:
    """A table whose columns keep to one line (ids stay whole, ready to copy), except the
    last, which wraps when the terminal is narrow."""
    grid = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in columns:
        grid.add_column(column, overflow="fold", no_wrap=column != columns[-1])
    return grid


# -- signals and deliveries --------------------------------------------------------------


def stored(answer: dict[str, Any], signal_type: str) -> RenderableType:
    """What ``POST /v1/signals`` answered, for a person."""
    if answer["duplicate"]:
        head = Text(f"already stored as signal {answer['id']} (same idempotency key or id)")
    else:
        head = Text(f"stored signal {answer['id']}")
    deliveries = answer.get("deliveries")
    if deliveries is None:  # it did not wait for them
        return head
    if not deliveries:
        return Group(head, indent(Text(f"unrouted: no receptor binds {signal_type}")))
    return Group(head, delivery_statuses(deliveries))


def delivery_statuses(deliveries: dict[str, str]) -> RenderableType:
    return indent(fields(deliveries.items()))


def signals_view(rows: list[dict[str, Any]]) -> RenderableType:
    """Two lines a signal, so that a whole id fits on an 80-column terminal."""
    if not rows:
        return Text("no signals", style="dim")
    views = []
    for row in rows:
        deliveries = [
            f"{d['receptor']} {d['status']}"
            + (f" after {plural(d['attempts'], 'attempt')}" if d["status"] == "dead" else "")
            for d in row["deliveries"]
        ]
        views.append(
            Group(
                Text.assemble((row["id"], "bold"), f"  {row['type']}  from {row['source_id']}"),
                indent(
                    Text(f"stored {when(row['stored_at'])}   {', '.join(deliveries) or 'unrouted'}")
                ),
            )
        )
    return Group(*views)


def signal_detail(signal: dict[str, Any]) -> RenderableType:
    optional = ("idempotency_key", "correlation_id", "causation_id")
    summary = fields(
        [
            ("signal", signal["id"]),
            ("type", f"{signal['type']} ({signal['class']})"),
            ("source", f"{signal['source_id']} ({signal['source_layer']})"),
            ("workspace", signal["workspace_id"]),
            ("intensity", f"{signal['intensity']:g}"),
            ("decay", days(signal["decay_rate"] / SECONDS_PER_DAY)),
            ("affinity", ", ".join(signal["affinity"]) or "—"),
            ("emitted", when(signal["emitted_at"])),
            ("stored", when(signal["stored_at"])),
            *((name.replace("_", " "), signal[name]) for name in optional if signal[name]),
        ]
    )
    payload = Group(
        Text("payload", style="bold"),
        indent(json.dumps(signal["payload"], indent=2, ensure_ascii=False)),
    )
    if not signal["deliveries"]:
        deliveries: RenderableType = Text("unrouted: no receptor binds this type", style="dim")
    else:
        deliveries = table("receptor", "status", "attempts", "at", "last error")
        for d in signal["deliveries"]:
            discarded = d.get("discarded")
            status = f"discarded by {discarded['by']}" if discarded else d["status"]
            at = discarded["at"] if discarded else d["delivered_at"] or d["next_attempt_at"]
            deliveries.add_row(
                d["receptor"], status, str(d["attempts"]), when(at), d["last_error"] or "—"
            )
    return Group(summary, Text(""), payload, Text(""), deliveries)


def days(value: float) -> str:
    return "no decay" if value <= 0 else f"half-life {value:g} days"


# -- memory ------------------------------------------------------------------------------


def recall_view(result: dict[str, Any], layers: Sequence[str] | None) -> RenderableType:
    """A recall's JSON, explained (``/v1/recall?explain=true``), for people: the ``layers``
    asked for (``None``: all four)."""
    views = {
        "marks": lambda: section("marks", [mark_view(mark) for mark in result["marks"]]),
        "substrate": lambda: section(
            "substrate",
            [
                excerpt(f"{hit['file']}  ({hit['reason']})", hit["excerpt"])
                for hit in result["substrate"]
            ],
        ),
        "daily": lambda: section(
            "daily",
            [
                excerpt(f"{hit['date']}, {line_span(hit['line_range'])}", hit["excerpt"])
                for hit in result["daily"]
            ],
        ),
        "compost": lambda: section(
            "compost",
            [
                Text(
                    f"{hit['template_id']}: {hit['learning']} "
                    f"({plural(hit['source_agent_count'], 'agent')})"
                )
                for hit in result["compost"]
            ],
        ),
    }
    # The layers in their canonical order, after the summary when there is one, and with
    # semantic recall on how much was ranked by meaning.
    summary = (
        [Group(Text("summary", style="bold"), indent(Text(result["summary"])))]
        if result.get("summary")
        else []
    )
    coverage = []
    if result.get("semantic") is not None:
        shown = covered(result["semantic"])
        coverage = [Text(f"semantic: {shown}; the rest ranked by words", style="dim")]
    layers_shown = [name for name in views if layers is None or name in layers]
    return apart([*summary, *(views[name]() for name in layers_shown), *coverage])


def apart(renderables: Iterable[RenderableType]) -> Group:
    """One after the other, with a blank line between them."""
    parts: list[RenderableType] = []
    for renderable in renderables:
        parts += [Text(""), renderable] if parts else [renderable]
    return Group(*parts)


def excerpt(head: str, body: str) -> Group:
    return Group(Text(head), indent(Text(body, style="dim")))


def mark_view(mark: dict[str, Any]) -> RenderableType:
    """A mark as explained (:meth:`daemon.services.recall.MarkHit.to_json`, ``explain``)."""
    said = mark["observation"] if mark["state"] != "forgotten" else "(forgotten)"
    title = Text.assemble((mark["subject"], "bold"), " — ", said)
    reinforced = plural(mark["reinforcement_count"], "reinforcement")
    # A daemon older than this CLI answers without the explanation: what it said is shown.
    ended = f"{when(mark['ended_at'])}: {mark['ended_reason']}" if mark.get("ended_at") else None
    history = [
        (name, value)
        for name, value in (
            ("corrects", mark.get("supersedes")),
            ("corrected by", mark.get("superseded_by")),
            ("ended", ended),
        )
        if value
    ]
    strength = strength_view(mark) if "strength" in mark else f"{mark['current_strength']:.2f}  now"
    return Group(
        title,
        indent(
            fields(
                [
                    ("state", mark["state"]),
                    *history,
                    ("strength", strength),
                    # stated / observed / inferred by whoever emitted it
                    ("mark", f"{mark['id']}, {mark['provenance']} by {mark['observed_by']}"),
                    (
                        "seen",
                        f"first {when(mark['first_observed_at'])}, "
                        f"last {when(mark['last_reinforced_at'])}, {reinforced}",
                    ),
                    ("evidence", evidence_view(mark["evidence"])),
                ]
            )
        ),
    )


def strength_view(mark: dict[str, Any]) -> Table:
    """Current strength, and how it got there: the initial strength decayed over the mark's
    age, plus each reinforcement decayed over its own age."""
    s = mark["strength"]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(justify="right")
    grid.add_column()
    raw = s["base"] + sum(part["now"] for part in s["reinforcements"])
    value = s["value"]
    grid.add_row(f"{value:.2f}", "now" + (f" (clamped from {raw:.2f})" if raw != value else ""))
    grid.add_row(
        f"{s['base']:.2f}",
        f"from {s['initial']:.2f} initial, {s['age_days']:.2f} days old, "
        f"{days(s['half_life_days'])}",
    )
    first = _instant(mark["first_observed_at"])
    for part in s["reinforcements"]:
        since_first = (_instant(part["at"]) - first) / timedelta(days=1)
        age = max(0.0, s["age_days"] - since_first)
        grid.add_row(
            f"{part['now']:.2f}",
            f"from +{part['delta']:.2f} reinforced {when(part['at'])}, {age:.2f} days old",
        )
    return grid


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def evidence_view(evidence: dict[str, Any]) -> str:
    parts = []
    if evidence.get("note"):
        parts.append(f"note: {evidence['note']}")
    if evidence.get("daily_file"):
        where = f" {line_span(evidence['line_range'])}" if evidence.get("line_range") else ""
        parts.append(f"daily {evidence['daily_file']}{where}")
    for key, label in (("signal_ids", "signals"), ("compost_ids", "compost")):
        if evidence.get(key):
            parts.append(f"{label} {', '.join(evidence[key])}")
    return "\n".join(parts) or "—"


def seeds_view(seeds: Sequence[Seed]) -> RenderableType:
    if not seeds:
        return Text("no seeds", style="dim")
    views: list[RenderableType] = []
    for seed in seeds:
        reviewed = f"by {seed.reviewed_by} at {when(seed.reviewed_at)}" if seed.reviewed_by else "—"
        based_on = f", based on {', '.join(seed.based_on_marks)}" if seed.based_on_marks else ""
        views.append(
            Group(
                Text.assemble((seed.id, "bold"), "  ", seed.state),
                indent(
                    fields(
                        [
                            ("subject", seed.subject),
                            ("change", seed.proposed_change),
                            ("target", seed.target_file),
                            (
                                "planted",
                                f"by {seed.planted_by} at {when(seed.planted_at)}{based_on}",
                            ),
                            ("reviewed", reviewed),
                        ]
                    )
                ),
            )
        )
    return apart(views)


def substrate_view(entries: list[dict[str, Any]], contents: dict[Path, str]) -> RenderableType:
    listing = table("kind", "files", "entry")
    for entry in entries:
        listing.add_row(entry["kind"], str(len(entry["files"])), entry["path"])
    files: list[RenderableType] = []
    for path, text in contents.items():
        files += [Text(""), Text(f"==> {path} <==", style="bold"), Text(text.rstrip("\n"))]
    return Group(listing, *files)


# -- the daemon --------------------------------------------------------------------------


# Substrate files status names: a vault of notes is hundreds (`memory substrate` lists them).
STATUS_FILES = 5


def _watched(files: list[str]) -> list[str]:
    shown = [plural(len(files), "watched file"), *files[:STATUS_FILES]]
    if len(files) > STATUS_FILES:
        shown.append(f"… and {len(files) - STATUS_FILES} more (cambium memory substrate)")
    return shown


def status_view(health: dict[str, Any], socket: Path) -> RenderableType:
    uptime = timedelta(seconds=int(health["uptime_seconds"]))
    receptors = fields((r["key"], ", ".join(r["binds"])) for r in health["receptors"])
    rhythms = fields((name, f"next {when(at)}") for name, at in health["rhythms"].items())
    watched = health["substrate"]["watched_files"]
    deliveries = health["deliveries"]
    shown: list[tuple[str, RenderableType]] = [
        ("cambium", f"{health['version']}, {health['status']}, up {uptime}"),
        ("socket", str(socket)),
        ("workspace", health["workspace"]),
        ("receptors", receptors),
        ("deliveries", f"{deliveries['pending']} pending, {deliveries['dead']} dead"),
        ("rhythms", rhythms),
        ("substrate", Text("\n".join(_watched(watched)))),
    ]
    if health.get("index") == "preparing":  # an older daemon says nothing: it is ready
        shown.append(
            (
                "index",
                f"{_preparing(health.get('preparation'))}; recall answers from what is "
                "indexed so far",
            )
        )
    embedding = health.get("embedding")
    if embedding:  # semantic recall on
        shown.append(
            (
                "embedding",
                f"{covered(embedding)}, {embedding['lines_per_second']:g} lines/s",
            )
        )
    return fields(shown)


# How the status names what the preparation counts, by layer.
_COUNTED = {"daily": ("daily files", "looked at"), "marks": ("marks", "indexed")}


def _preparing(at: dict[str, Any] | None) -> str:
    """ "preparing, daily files 412 of 1,098 looked at" (a layer without a count by name)."""
    if not at:
        return "preparing"
    if at["total"] and at["layer"] in _COUNTED:
        what, done = _COUNTED[at["layer"]]
        return f"preparing, {what} {at['done']:,} of {at['total']:,} {done}"
    return f"preparing, {at['layer']}"


def covered(semantic: dict[str, Any]) -> str:
    """How much of what recall ranks by meaning is embedded: "1,200 of 1,500 (80%)"."""
    embedded, total = semantic["embedded"], semantic["total"]
    share = f" ({100 * embedded // total}%)" if total else ""
    return f"{embedded:,} of {total:,} embedded{share}"
