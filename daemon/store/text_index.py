"""The text index in the store: :class:`TextRows` names every operation on its tables once
(inside a transaction, as ``tx.text_index``), and :class:`StoreTextIndex` is the
:class:`~daemon.search.index.TextIndex` the file layers use, one transaction per call.

Candidates come from the engine's own full-text index over the pre-stemmed terms: FTS5's
``bm25`` on SQLite, ``ts_rank`` over the generated ``tsv`` column on PostgreSQL (see
migration 0008). Term frequencies come from fts5vocab, or from counting ``tsv`` matches.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, insert, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from daemon.core.text_rows import LAYERS, MARKS, Candidate, Group, Row, Signature, Statistics
from daemon.store.mark_strength import marks
from daemon.store.sql import in_chunks
from daemon.store.tables import TextFileTable, TextPendingTable, TextRowTable, TextTotalsTable

rows = TextRowTable.__table__  # type: ignore[attr-defined]
files = TextFileTable.__table__  # type: ignore[attr-defined]
totals = TextTotalsTable.__table__  # type: ignore[attr-defined]
pending = TextPendingTable.__table__  # type: ignore[attr-defined]

# What a candidate is read as: whole (a layer ranks it), or by its source alone (the
# marks: a mark's id, ranked by strength afterwards).
_FIELDS = "r.source, r.state, r.part, r.terms, r.length, r.speaker"
_SOURCE = "r.source"
_FILTERS = (
    " AND (CAST(:scope AS TEXT) IS NULL OR r.scope = :scope)"
    " AND (CAST(:since AS TEXT) IS NULL OR r.source >= :since)"
)
# FTS5 ranks every row that matches before the join can filter by ``since``: in three
# years of notes a 7-day recall ranked the matches of all 1,100 days. The rows of the days
# from ``since`` on lie in a narrow window of ids (lines are indexed as they are written,
# and an index is built oldest day first), and FTS5 itself skips rows outside a rowid range,
# so only the window is ranked; the join's filter still decides exactly. The window is read
# first and given as numbers: as subqueries in the same statement its bounds cost twice as
# much (in three years of notes 2.7 against 1.4 ms for a week, 9.7 against 4.5 for a
# month), and an empty window (no line since) did not bound FTS5 at all (10 ms, every
# match ranked, none kept, against 0.03).
_SQLITE_WINDOW = text(
    "SELECT min(id), max(id) FROM text_rows WHERE layer = :layer AND source >= :since"
)
_SINCE_WINDOW = " AND text_fts_{layer}.rowid BETWEEN :low AND :high"
# The FTS5 table and vocabulary of each layer (fixed names, never from input); candidates
# read whole or by source, without and with a ``since``.
_SQLITE_CANDIDATES = {
    (fields, layer, windowed): text(
        f"SELECT {fields} FROM text_fts_{layer} JOIN text_rows AS r"
        f" ON r.id = text_fts_{layer}.rowid WHERE text_fts_{layer} MATCH :query"
        + (_SINCE_WINDOW.format(layer=layer) if windowed else "")
        + f"{_FILTERS} ORDER BY text_fts_{layer}.rank LIMIT :limit"
    )
    for fields in (_FIELDS, _SOURCE)
    for layer in LAYERS
    for windowed in (False, True)
}
_SQLITE_FREQUENCIES = {
    layer: text(f"SELECT term, doc FROM text_vocab_{layer} WHERE term IN :terms").bindparams(
        bindparam("terms", expanding=True)
    )
    for layer in LAYERS
}
_SQLITE_VOCABULARY = {layer: text(f"SELECT term, doc FROM text_vocab_{layer}") for layer in LAYERS}
_POSTGRES_CANDIDATES = {
    fields: text(
        f"SELECT {fields} FROM text_rows AS r, to_tsquery('simple', :query) AS q"
        f" WHERE r.layer = :layer AND r.tsv @@ q{_FILTERS}"
        " ORDER BY ts_rank(r.tsv, q) DESC, r.id LIMIT :limit"
    )
    for fields in (_FIELDS, _SOURCE)
}
_POSTGRES_FREQUENCIES = text(
    "SELECT t.term, (SELECT count(*) FROM text_rows AS r WHERE r.layer = :layer"
    " AND r.tsv @@ to_tsquery('simple', quote_literal(t.term)))"
    " FROM unnest(CAST(:terms AS text[])) AS t(term)"
)
# FTS5 merges its segments into one: what 'delete' marked is gone from the file's pages.
_SQLITE_OPTIMIZE = text("INSERT INTO text_fts_marks (text_fts_marks) VALUES ('optimize')")


@dataclass(slots=True)
class _Frequencies:
    """How many rows of a layer held each term, as counted when the layer held
    ``documents`` rows."""

    documents: int
    terms: dict[str, int]


# Counting a term's rows walks its whole posting list (FTS5's vocabulary, a GIN scan): 10 ms
# a query in three years of notes. The counts of common terms (held by _KEPT_FROM rows or
# more) are kept per database and layer while the layer's size stays within 1% of what it
# was when they were counted: a line more moves such a count by under 0.1%, and BM25's
# weights with it. Rarer terms cost little to count, and a line more changes their weight:
# they are counted every time. At most _MOST_TERMS are kept.
_FREQUENCIES: weakref.WeakKeyDictionary[Engine, dict[str, _Frequencies]] = (
    weakref.WeakKeyDictionary()
)
_KEPT_FROM = 1_000
_MOST_TERMS = 50_000


def _known_frequencies(connection: Connection, layer: str, documents: int) -> dict[str, int]:
    """The term counts still good for ``layer`` at ``documents`` rows (to be added to)."""
    layers = _FREQUENCIES.setdefault(connection.engine, {})
    kept = layers.get(layer)
    if (
        kept is None
        or abs(documents - kept.documents) > kept.documents // 100
        or len(kept.terms) > _MOST_TERMS
    ):
        kept = layers[layer] = _Frequencies(documents, {})
    return kept.terms


# Built once, as every statement a recall runs: building one costs more than SQLite takes
# to answer the smaller ones.
_TOTALS = select(totals.c.documents, totals.c.total_length).where(
    totals.c.layer == bindparam("layer")
)
_QUEUED = select(pending.c.mark_id).order_by(pending.c.mark_id).limit(bindparam("limit"))


def _pending_marks(*, claimed: bool) -> Any:
    # Claimed (PostgreSQL: FOR UPDATE SKIP LOCKED): a fleet's daemons index disjoint chunks
    # of the queue at once instead of colliding on the same marks' rows. SQLite has one
    # writer and renders no lock.
    queued = (_QUEUED.with_for_update(skip_locked=True) if claimed else _QUEUED).subquery()
    return select(
        queued.c.mark_id,
        marks.c.workspace_id,
        marks.c.subject,
        marks.c.observation,
        marks.c.state == "forgotten",
    ).outerjoin(marks, marks.c.id == queued.c.mark_id)


_PENDING = {claimed: _pending_marks(claimed=claimed) for claimed in (False, True)}

_UNINDEXED = select(marks.c.id).where(
    marks.c.state != "forgotten",
    ~select(rows.c.id).where(rows.c.layer == MARKS, rows.c.source == marks.c.id).exists(),
    ~select(pending.c.mark_id).where(pending.c.mark_id == marks.c.id).exists(),
)


@dataclass(frozen=True, slots=True)
class MarkToIndex:
    id: str
    workspace_id: str
    subject: str
    observation: str
    forgotten: bool


def _group(group: Group) -> ColumnElement[bool]:
    return and_(
        rows.c.layer == group.layer, rows.c.source == group.source, rows.c.state == group.state
    )


class TextRows:
    """Every operation on the text index's tables, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def digests(self, group: Group) -> dict[int, int]:
        query = select(rows.c.part, rows.c.digest).where(_group(group))
        return {part: digest for part, digest in self.connection.execute(query)}

    def signatures(self, layer: str) -> dict[tuple[str, str], Signature]:
        query = select(
            files.c.source, files.c.state, files.c.size, files.c.mtime_ns, files.c.sha256
        )
        return {
            (source, state): Signature(size, mtime_ns, sha256)
            for source, state, size, mtime_ns, sha256 in self.connection.execute(
                query.where(files.c.layer == layer)
            )
        }

    def write(
        self,
        group: Group,
        written: Sequence[Row],
        removed: Sequence[int],
        signature: Signature | None,
    ) -> None:
        """Rows are deleted and inserted, never updated: the FTS5 triggers see both."""
        for chunk in in_chunks([*removed, *(row.part for row in written)]):
            self.connection.execute(delete(rows).where(_group(group), rows.c.part.in_(chunk)))
        self._insert([(group, row) for row in written])
        self._forget_file(group)
        if signature is not None:
            self.connection.execute(
                insert(files).values(
                    layer=group.layer,
                    source=group.source,
                    state=group.state,
                    size=signature.size,
                    mtime_ns=signature.mtime_ns,
                    sha256=signature.sha256,
                )
            )

    def _insert(self, written: Sequence[tuple[Group, Row]]) -> None:
        """Insert rows in one statement (a statement per row costs more than the row)."""
        if written:
            self.connection.execute(
                insert(rows),
                [
                    {
                        "layer": group.layer,
                        "scope": group.scope,
                        "source": group.source,
                        "state": group.state,
                        "part": row.part,
                        "terms": row.terms,
                        "length": row.length,
                        "digest": row.digest,
                        "speaker": row.speaker,
                    }
                    for group, row in written
                ],
            )

    def move(self, source: Group, target: Group, shift: int) -> None:
        moved = list(self.connection.execute(select(rows.c.part).where(_group(source))).scalars())
        for chunk in in_chunks([part + shift for part in moved]):
            self.connection.execute(delete(rows).where(_group(target), rows.c.part.in_(chunk)))
        self.connection.execute(
            update(rows)
            .where(_group(source))
            .values(source=target.source, state=target.state, part=rows.c.part + shift)
        )
        self._forget_file(source)

    def drop(self, group: Group) -> None:
        self.connection.execute(delete(rows).where(_group(group)))
        self._forget_file(group)

    def _forget_file(self, group: Group) -> None:
        self.connection.execute(
            delete(files).where(
                files.c.layer == group.layer,
                files.c.source == group.source,
                files.c.state == group.state,
            )
        )

    def candidates(
        self,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        *,
        scope: str | None = None,
        since: str | None = None,
    ) -> list[Candidate]:
        found = self._candidates(_FIELDS, layer, wanted, limit, scope, since)
        return [Candidate(*row) for row in found]

    def candidate_sources(
        self, layer: str, wanted: Sequence[str], limit: int, *, scope: str | None = None
    ) -> list[str]:
        """The sources of :meth:`candidates`, best first (a mark's id, whose other columns
        its ranking by strength does not read)."""
        return [source for (source,) in self._candidates(_SOURCE, layer, wanted, limit, scope)]

    def _candidates(
        self,
        fields: str,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        scope: str | None,
        since: str | None = None,
    ) -> Sequence[Any]:
        if not wanted:
            return []
        filters: dict[str, Any] = {"scope": scope, "since": since, "limit": limit}
        if self.connection.dialect.name == "sqlite":
            if since is not None:
                window = {"layer": layer, "since": since}
                filters["low"], filters["high"] = self.connection.execute(
                    _SQLITE_WINDOW, window
                ).one()
                if filters["low"] is None:  # no row from ``since`` on
                    return []
            query = " OR ".join(f'"{term}"' for term in wanted)  # terms are letters and digits
            statement = _SQLITE_CANDIDATES[(fields, layer, since is not None)]
            return self.connection.execute(statement, {"query": query, **filters}).all()
        query = " | ".join(f"'{term}'" for term in wanted)
        statement = _POSTGRES_CANDIDATES[fields]
        return self.connection.execute(statement, {"query": query, "layer": layer, **filters}).all()

    def statistics(self, layer: str, wanted: Sequence[str]) -> Statistics:
        documents, total_length = self.connection.execute(_TOTALS, {"layer": layer}).one()
        known = _known_frequencies(self.connection, layer, int(documents))
        missing = [term for term in dict.fromkeys(wanted) if term not in known]
        counted = self._count(layer, missing) if missing else {}
        known.update({term: n for term, n in counted.items() if n >= _KEPT_FROM})
        frequencies = {term: n for term in wanted if (n := known.get(term) or counted.get(term))}
        return Statistics(int(documents), int(total_length), frequencies)

    def keep_common_counts(self, layer: str) -> int:
        """Count every term of ``layer`` in one pass and keep the common ones' counts (see
        ``_KEPT_FROM``), so that no recall is the first to count a common term: one pass
        over a layer's vocabulary took 0.6 s in three years of notes, where a recall that
        counted a common term first took 25-45 ms more. Done where none are kept (a first
        preparation, or once the layer grew by 1%); SQLite only (PostgreSQL counts a term
        with its GIN index when asked). How many counts are kept."""
        if self.connection.dialect.name != "sqlite":
            return 0
        documents = self.connection.execute(_TOTALS, {"layer": layer}).one()[0]
        known = _known_frequencies(self.connection, layer, int(documents))
        if known:
            return len(known)
        for term, count in self.connection.execute(_SQLITE_VOCABULARY[layer]):
            if count >= _KEPT_FROM and len(known) < _MOST_TERMS:
                known[term] = int(count)
        return len(known)

    def _count(self, layer: str, terms: list[str]) -> dict[str, int]:
        """How many rows of ``layer`` hold each of ``terms`` (those held by none left out)."""
        if self.connection.dialect.name == "sqlite":
            found = self.connection.execute(_SQLITE_FREQUENCIES[layer], {"terms": terms})
        else:
            found = self.connection.execute(_POSTGRES_FREQUENCIES, {"layer": layer, "terms": terms})
        return {term: int(count) for term, count in found if count}

    def parts(self, layer: str, sources: Sequence[str]) -> list[tuple[str, str, int]]:
        query = select(rows.c.source, rows.c.state, rows.c.part).where(
            rows.c.layer == layer, rows.c.source.in_(list(sources))
        )
        return [(source, state, part) for source, state, part in self.connection.execute(query)]

    def coverage(self) -> dict[str, int]:
        """Rows per layer."""
        query = select(rows.c.layer, func.count()).group_by(rows.c.layer)
        return {layer: int(count) for layer, count in self.connection.execute(query)}

    # -- the marks' queue (filled by triggers on memory_marks) --------------------------

    def pending_marks(self, limit: int, *, claim: bool = False) -> list[MarkToIndex]:
        """Up to ``limit`` queued marks with what is indexed of them; with ``claim``, only
        those no other transaction is indexing, held until this one ends."""
        return [
            MarkToIndex(mark_id, workspace or "", subject or "", observation or "", bool(gone))
            for mark_id, workspace, subject, observation, gone in self.connection.execute(
                _PENDING[claim], {"limit": limit}
            )
        ]

    def count_pending(self) -> int:
        return int(self.connection.execute(select(func.count()).select_from(pending)).scalar_one())

    def count_unindexed_marks(self) -> int:
        """Marks with text that have no row and are not queued (an index that lost them)."""
        return int(
            self.connection.execute(
                select(func.count()).select_from(_UNINDEXED.subquery())
            ).scalar_one()
        )

    def queue_unindexed_marks(self) -> int:
        """Queue every mark :meth:`count_unindexed_marks` counts; how many."""
        result = self.connection.execute(insert(pending).from_select(["mark_id"], _UNINDEXED))
        return int(result.rowcount)

    def indexed_marks(self, done: Sequence[MarkToIndex], written: Sequence[Row]) -> None:
        """Write the rows of ``done`` (one per mark not forgotten, in order) and take them
        off the queue."""
        ids = [mark.id for mark in done]
        for chunk in in_chunks(ids):
            self.connection.execute(
                delete(rows).where(rows.c.layer == MARKS, rows.c.source.in_(chunk))
            )
            self.connection.execute(delete(pending).where(pending.c.mark_id.in_(chunk)))
        kept = [mark for mark in done if not mark.forgotten and mark.workspace_id]
        self._insert(
            [
                (Group(MARKS, mark.id, scope=mark.workspace_id), row)
                for mark, row in zip(kept, written, strict=True)
            ]
        )

    def optimize(self) -> None:
        """After a forget (SQLite): rewrite the marks' FTS5 index without what was deleted."""
        if self.connection.dialect.name == "sqlite":
            self.connection.execute(_SQLITE_OPTIMIZE)
