"""``cambium memory``: recall, mark, note, consolidate, seeds, substrate (writing by hand in
:mod:`daemon.cli.writing`, seeds in :mod:`daemon.cli.seeds`).

Recall asks the running daemon, which holds the warm index (and the model, with semantic
ranking on); with the daemon down it reads the store's index as it is, read-only, and the
files (see :func:`recall`). Seeds and substrate are read from the store and the files
directly. Everything that changes memory is a signal sent through the daemon's ingress, so
the signal log stays the audit trail of the memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from daemon.cli.common import (
    BadInput,
    Number,
    config_option,
    files_only_store,
    json_option,
    load,
    missing_database,
    print_json,
    reading_store,
    warnings_to_stderr,
)
from daemon.cli.seeds import seeds
from daemon.cli.writing import consolidate, mark, note

if TYPE_CHECKING:
    from daemon.config import Config
    from daemon.schema.recall import RecallQuery
    from daemon.services.recall import Memory
    from daemon.services.recall_result import RecallResult
    from daemon.store import Store


@click.group()
def memory() -> None:
    """Recall and review what the memory knows; add to it by hand."""


def open_memory(config: Config, store: Store) -> Memory:
    """The four layers, read-only."""
    from daemon.config import ConfigError
    from daemon.services.recall import Memory

    warnings_to_stderr()
    try:
        return Memory.from_config(config, store)
    except ConfigError as exc:  # [recall] semantic without its model
        raise BadInput(f"bad config: {exc}") from None


# -- recall ------------------------------------------------------------------------------


@memory.command()
@click.argument("about", default="")
@click.option(
    "--layers", metavar="A,B", help="Comma list of substrate, marks, daily, compost (default: all)."
)
@click.option(
    "--horizon", metavar="7d", help="1d, 7d, 30d (any Nd), all, an ISO date or an ISO instant."
)
@click.option(
    "--min-strength",
    type=Number(0, 1),
    help="Weakest mark to show, 0..1 (default 0.1; 0 with --include-withered).",
)
@click.option("--limit", type=int, metavar="N", help="Most hits per layer (default 10).")
@click.option("--include-withered", is_flag=True, help="Also show marks that have faded.")
@click.option(
    "--include-history",
    is_flag=True,
    help="Also show superseded, retracted and forgotten marks, with their links.",
)
@click.option("--workspace", help="Whose marks (default: the configured workspace).")
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json", "context"]),
    default="text",
    help="text (default), json, or context: a bounded block to paste into a prompt.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(200, 100_000),
    default=4000,
    show_default=True,
    help="With --format context: the longest the block may be.",
)
@click.option(
    "--provenance",
    metavar="A,B",
    help="Only marks that were stated, observed or inferred (comma list).",
)
@click.option(
    "--summary", is_flag=True, help="A short answer citing the items (needs an [llm] model)."
)
@json_option
@config_option
def recall(
    output: str, max_chars: int, as_json: bool, config_path: Path | None, **query: Any
) -> None:
    """What the memory knows about ABOUT, from all four layers.

    ABOUT is a subject path (user.food) or free text (marks are found by their words
    too); left out, it means everything. Each mark shows its strength now and how it got
    there.

    \b
    Examples:
      cambium memory recall user.food
      cambium memory recall lentil
      cambium memory recall "sleep schedule" --layers marks,daily --horizon 30d
      cambium memory recall user --min-strength 0.2 --include-withered --json
      cambium memory recall user.health --include-history
      cambium memory recall user.food --format context --max-chars 2000
      cambium memory recall user.food --provenance stated,observed
      cambium memory recall "Arnold" --summary
    """
    from daemon.cli.client import daemon_socket

    # The query's fields, as given (an option left out, or a flag not set, is not sent).
    given = {k: v for k, v in query.items() if v is not None and v is not False}
    text = not as_json and output == "text"
    found = _asked(daemon_socket(config_path), given, output, max_chars, explain=text)
    if found is None:  # no daemon: read the store
        found = _read(load(config_path), given, output, max_chars, explain=text)
    if output == "context":
        click.echo(found["text"])
    elif not text:
        print_json(found)
    else:
        from daemon.cli.render import recall_view, show

        layers = query["layers"]
        show(recall_view(found, [part.strip() for part in layers.split(",")] if layers else None))


def _asked(
    socket: Path, given: dict[str, Any], output: str, max_chars: int, *, explain: bool
) -> Any | None:
    """The running daemon's answer (a recall, or a context block), ``None`` if none runs."""
    from daemon.cli.client import ask

    params = {name: ("true" if value is True else str(value)) for name, value in given.items()}
    if output == "context":
        return ask(socket, "/v1/context", params | {"max_chars": str(max_chars)})
    return ask(socket, "/v1/recall", params | ({"explain": "true"} if explain else {}))


def _read(
    config: Config, given: dict[str, Any], output: str, max_chars: int, *, explain: bool
) -> Any:
    """What the daemon would answer, read from the store and the files by this process."""
    query = _recall_query(given)
    result = _recalled(config, query)
    if output == "context":
        from daemon.services.context import render

        return render(result.to_json(), query.about, max_chars).to_json()
    return result.to_json(explain=explain)


def _recall_query(given: dict[str, Any]) -> RecallQuery:
    from pydantic import ValidationError

    from daemon.schema.recall import RecallQuery

    try:
        return RecallQuery.model_validate(given)
    except ValidationError as exc:
        raise BadInput("; ".join(_option_error(e) for e in exc.errors())) from None


def _recalled(config: Config, query: RecallQuery) -> RecallResult:
    """The answer, from the store's index and stored vectors (read-only: this process never
    builds or writes an index; with semantic recall it embeds the question alone) and the
    files; before the first start (no database yet, so no marks) from the files on their
    own. With a summary, if asked for."""
    import anyio

    from daemon.core.clock import utcnow
    from daemon.services.recall import recall

    if missing_database(config) is None:
        with reading_store(config) as store:
            result = recall(query, open_memory(config, store), utcnow())
    else:
        without_marks = tuple(layer for layer in query.layers if layer != "marks")
        with files_only_store() as store:
            files = query.model_copy(update={"layers": without_marks})
            result = recall(files, open_memory(config, store), utcnow())
    if query.summary:
        from daemon.services.summary import with_summary

        result = anyio.run(with_summary, result, query.about, config.llm)
    return result


def _option_error(error: Any) -> str:
    name = str(error["loc"][0])
    option = "ABOUT" if name == "about" else "--" + name.replace("_", "-")
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"bad {option} {error['input']!r}: {message}"


# -- substrate ---------------------------------------------------------------------------


@memory.command()
@json_option
@config_option
def substrate(as_json: bool, config_path: Path | None) -> None:
    """Your own long-term files, with their contents.

    The configured entries with absolute paths, then each file's contents. The daemon
    only reads them.

    \b
    Examples:
      cambium memory substrate
      cambium memory substrate --json
    """
    from daemon.files.substrate import Substrate

    config = load(config_path)
    warnings_to_stderr()
    contents = Substrate(config.paths.substrate).contents()
    entries = [
        {
            "path": str(entry),
            "kind": "directory" if entry.is_dir() else "file" if entry.is_file() else "missing",
            "files": [str(p) for p in contents if p == entry or p.parent == entry],
        }
        for entry in config.paths.substrate
    ]
    if as_json:
        files = [{"path": str(path), "content": text} for path, text in contents.items()]
        print_json({"entries": entries, "files": files})
        return
    from daemon.cli.render import show, substrate_view

    show(substrate_view(entries, contents))


memory.add_command(seeds)
for command in (mark, note, consolidate):
    memory.add_command(command)
