"""The stored embeddings: :class:`DenseRows` names every operation on the ``dense_*``
tables once (inside a transaction, as ``tx.dense``). See migration 0010.

Every change bumps ``dense_state.generation``, in the same transaction: the memory-mapped
copy of the vectors that recall searches (:mod:`daemon.search.vector_file`) records the
generation it holds, and is repaired from these rows when they differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, delete, exists, func, select, update
from sqlalchemy.engine import Connection

from daemon.core.vectors import DAILY, MARKS, MarkToEmbed, NewVector, Place, StoredVector, Vector
from daemon.store.fast_path import Raw
from daemon.store.mark_strength import marks
from daemon.store.sql import in_chunks, insert_ignoring_duplicates, upsert
from daemon.store.tables import (
    DenseGroupTable,
    DenseStateTable,
    DenseVectorTable,
    TextRowTable,
    TextTotalsTable,
)

vectors = DenseVectorTable.__table__  # type: ignore[attr-defined]
groups = DenseGroupTable.__table__  # type: ignore[attr-defined]
state = DenseStateTable.__table__  # type: ignore[attr-defined]
text_rows = TextRowTable.__table__  # type: ignore[attr-defined]
totals = TextTotalsTable.__table__  # type: ignore[attr-defined]

_COLUMNS = (
    vectors.c.id,
    vectors.c.layer,
    vectors.c.source,
    vectors.c.state,
    vectors.c.part,
    vectors.c.scope,
    vectors.c.vector,
    vectors.c.scale,
)
# On the driver: a semantic recall without the daemon (which keeps them in memory, see
# daemon.services.dense_store) asks it for the 200 marks its search found, and
# SQLAlchemy's building and expanding of the IN list was most of that search's Python
# (which holds the interpreter while recall's lexical work waits). The lists come in a
# dozen lengths (:func:`~daemon.store.sql.in_chunks`), so the driver prepares a dozen.
# Only the mark's id and workspace come back: a Place built per row was most of what
# remained (measured with py-spy --gil, 1M lines). The ids alone choose the rows: with
# ``layer = 'marks'`` in the WHERE clause too, SQLite 3.40 searched the layer's unique
# index instead of the ids (200 ids among 70,000 vectors: 12 ms against 0.3).
_MARK_SOURCES = "SELECT id, source, scope FROM dense_vectors WHERE id IN ({ids})"
_MARK_PLACES = "SELECT id, source, scope FROM dense_vectors WHERE layer = ?"
# The worker's batch is written on the driver: through SQLAlchemy Core, a DELETE and an
# INSERT built per vector took 9.8-9.9 ms of CPU a batch of 32 (now 0.7), holding the
# interpreter beside the recalls the worker had made way for (seen with py-spy --gil).
_DELETE_AT = (
    "DELETE FROM dense_vectors WHERE layer = ? AND source = ? AND state = ? AND part = ?"
    " RETURNING id"
)
_INSERT = (
    "INSERT INTO dense_vectors (layer, scope, source, state, part, digest, hash, vector, scale)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
# A mark's vector is current while its text row (same mark, same digest) exists.
_MARK_CURRENT = exists().where(
    text_rows.c.layer == MARKS,
    text_rows.c.source == vectors.c.source,
    text_rows.c.digest == vectors.c.digest,
)


def _place(row: Sequence[object]) -> Place:
    layer, source, state_, part, scope = row
    return Place(str(layer), str(source), str(state_), int(part), str(scope))  # type: ignore[call-overload]


def _stored(row: Sequence[object]) -> StoredVector:
    id_, *place, values, scale = row
    return StoredVector(int(id_), _place(place), Vector(bytes(values), float(scale)))  # type: ignore[call-overload, arg-type]


# A mark's text row with no current vector (none of the mark's text as it is now).
_TO_EMBED = (
    select(
        text_rows.c.source,
        text_rows.c.scope,
        text_rows.c.digest,
        marks.c.observation,
        text_rows.c.id,
    )
    .join(marks, marks.c.id == text_rows.c.source)
    .where(
        ~exists().where(
            vectors.c.layer == MARKS,
            vectors.c.source == text_rows.c.source,
            vectors.c.digest == text_rows.c.digest,
        )
    )
)


def _marks_to_embed(rows: Iterable[Any]) -> list[MarkToEmbed]:
    return [
        MarkToEmbed(str(mark_id), str(scope), int(digest), str(observation), int(row))
        for mark_id, scope, digest, observation, row in rows
    ]


class DenseRows:
    """Every operation on the stored embeddings, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # -- the model and the generation ----------------------------------------------------

    def model_and_generation(self) -> tuple[str, int]:
        model, generation = self.connection.execute(
            select(state.c.model, state.c.generation).where(state.c.id == 1)
        ).one()
        return str(model), int(generation)

    def changed(self) -> int:
        """Count a change of the vectors (call once in each transaction that changes them);
        the generation it makes."""
        self.connection.execute(
            update(state).where(state.c.id == 1).values(generation=state.c.generation + 1)
        )
        return self.model_and_generation()[1]

    def use_model(self, model: str) -> bool:
        """Make ``model`` the vectors' model; if another model's vectors are stored, they
        are all deleted (vectors of two models are never compared). Whether any were."""
        stored, _ = self.model_and_generation()
        if stored == model:
            return False
        self.connection.execute(delete(vectors))
        self.connection.execute(delete(groups))
        self.connection.execute(update(state).where(state.c.id == 1).values(model=model))
        self.changed()
        return stored != ""

    # -- reading -------------------------------------------------------------------------

    def at(self, layer: str, source: str, state_: str) -> dict[int, tuple[int, bytes]]:
        """part -> (id, hash) of the vectors of one daily file's lines."""
        query = select(vectors.c.part, vectors.c.id, vectors.c.hash).where(
            vectors.c.layer == layer, vectors.c.source == source, vectors.c.state == state_
        )
        return {part: (id_, bytes(digest)) for part, id_, digest in self.connection.execute(query)}

    def by_hash(self, hashes: Iterable[bytes]) -> dict[bytes, Vector]:
        """A stored vector for each of ``hashes`` that has one."""
        found: dict[bytes, Vector] = {}
        for chunk in in_chunks(list(set(hashes))):
            query = select(vectors.c.hash, vectors.c.vector, vectors.c.scale).where(
                vectors.c.hash.in_(chunk)
            )
            for digest, values, scale in self.connection.execute(query):
                found[bytes(digest)] = Vector(bytes(values), float(scale))
        return found

    def get(self, ids: Sequence[int]) -> list[StoredVector]:
        """The vectors of these ids that exist, by id."""
        found: list[StoredVector] = []
        for chunk in in_chunks(sorted(ids)):
            query = select(*_COLUMNS).where(vectors.c.id.in_(chunk)).order_by(vectors.c.id)
            found += [_stored(tuple(row)) for row in self.connection.execute(query)]
        return found

    def mark_sources(self, ids: Sequence[int], scope: str | None) -> dict[int, str]:
        """The mark id of each of these marks' vectors (those that exist, and are of
        workspace ``scope`` when it is given)."""
        found: dict[int, str] = {}
        raw = Raw(self.connection)
        for chunk in in_chunks(sorted(ids)):
            cursor = raw.execute(_MARK_SOURCES.format(ids=", ".join("?" * len(chunk))), chunk)
            found.update(
                (id_, source)
                for id_, source, of in cursor.fetchall()
                if scope is None or of == scope
            )
            cursor.close()
        return found

    def mark_places(self) -> dict[int, tuple[str, str]]:
        """Every mark's vector: its mark's id and workspace, by the vector's id."""
        cursor = Raw(self.connection).execute(_MARK_PLACES, (MARKS,))
        workspaces: dict[str, str] = {}  # (one string per workspace, not per mark)
        places = {
            id_: (source, workspaces.setdefault(scope, scope)) for id_, source, scope in cursor
        }
        cursor.close()
        return places

    def after(self, last_id: int, limit: int) -> list[StoredVector]:
        """Up to ``limit`` vectors with an id above ``last_id``, by id."""
        query = select(*_COLUMNS).where(vectors.c.id > last_id).order_by(vectors.c.id).limit(limit)
        return [_stored(tuple(row)) for row in self.connection.execute(query)]

    def ids(self) -> list[int]:
        return list(self.connection.execute(select(vectors.c.id)).scalars())

    def count(self) -> int:
        return int(self.connection.execute(select(func.count()).select_from(vectors)).scalar_one())

    def documents(self) -> int:
        """How many daily lines and marks the text index holds: what could be embedded
        (from the layers' totals, which the triggers on its rows keep)."""
        held = func.coalesce(func.sum(totals.c.row_count), 0)
        query = select(held).where(totals.c.layer.in_([DAILY, MARKS]))
        return int(self.connection.execute(query).scalar_one())

    def fingerprints(self, layer: str) -> dict[tuple[str, str], str]:
        query = select(groups.c.source, groups.c.state, groups.c.fingerprint).where(
            groups.c.layer == layer
        )
        return {(source, st): fp for source, st, fp in self.connection.execute(query)}

    def marks_to_embed(self, limit: int, after: str = "") -> list[MarkToEmbed]:
        """Marks whose text row has no current vector, up to ``limit``, by id from the one
        after ``after`` (the last of the page before: each page starts where that one ended,
        rather than passing every mark embedded since the pass began)."""
        query = (
            _TO_EMBED.where(text_rows.c.layer == MARKS, text_rows.c.source > after)
            .order_by(text_rows.c.source)
            .limit(limit)
        )
        return _marks_to_embed(self.connection.execute(query))

    def marks_written_since(self, limit: int, since: int) -> list[MarkToEmbed]:
        """:meth:`marks_to_embed`, from the text row numbered ``since`` on, in the order the
        rows were written: what a pass reads after one that saw every row up to ``since``."""
        query = (
            # (``layer || ''``: not by the index on the layer, which would find every mark's
            # row and sort them, but along the rows' ids from ``since``)
            _TO_EMBED.where(text_rows.c.id >= since, text_rows.c.layer.concat("") == MARKS)
            .order_by(text_rows.c.id)
            .limit(limit)
        )
        return _marks_to_embed(self.connection.execute(query))

    def last_text_row(self) -> int:
        """The highest id of a text row (0 with none). A row written later gets a higher
        one, or on SQLite this one again if its row was deleted first."""
        return int(self.connection.execute(select(func.max(text_rows.c.id))).scalar() or 0)

    # -- writing (each caller ends with changed()) ----------------------------------------

    def put(self, rows: Sequence[NewVector]) -> tuple[list[StoredVector], list[int]]:
        """Store ``rows``, replacing the vectors at the same places: the rows as stored, and
        the ids of the vectors they replaced."""
        raw = Raw(self.connection)
        replaced: list[int] = []
        for row in rows:
            place = row.place
            cursor = raw.execute(_DELETE_AT, (place.layer, place.source, place.state, place.part))
            replaced += [int(id_) for (id_,) in cursor.fetchall()]
            cursor.close()
        stored = []
        for row in rows:
            place = row.place
            values = (place.layer, place.scope, place.source, place.state, place.part)
            vector = (row.digest, row.hash, row.vector.values, row.vector.scale)
            cursor = raw.execute(_INSERT, (*values, *vector))
            (id_,) = cursor.fetchone()
            cursor.close()
            stored.append(StoredVector(int(id_), place, row.vector))
        return stored, replaced

    def delete_ids(self, ids: Sequence[int]) -> list[int]:
        deleted: list[int] = []
        for chunk in in_chunks(list(ids)):
            deleted += self._delete(vectors.c.id.in_(chunk))
        return deleted

    def delete_hashes(self, hashes: Iterable[bytes]) -> list[int]:
        """Delete every vector of these texts, wherever it is; the ids deleted."""
        deleted: list[int] = []
        for chunk in in_chunks(list(set(hashes))):
            deleted += self._delete(vectors.c.hash.in_(chunk))
        return deleted

    def delete_day(self, layer: str, source: str, keep: Iterable[bytes]) -> list[int]:
        """Delete the vectors of a day's files but those of the texts ``keep``."""
        kept = list(set(keep))
        deleted = [
            id_
            for id_, digest in self.connection.execute(
                select(vectors.c.id, vectors.c.hash).where(
                    vectors.c.layer == layer, vectors.c.source == source
                )
            )
            if bytes(digest) not in kept
        ]
        self.connection.execute(
            delete(groups).where(groups.c.layer == layer, groups.c.source == source)
        )
        return self.delete_ids(deleted)

    def outdated_marks(self) -> list[int]:
        """Delete the vectors of marks whose text changed or is gone (forgotten, deleted);
        the ids deleted."""
        return self._delete(and_(vectors.c.layer == MARKS, ~_MARK_CURRENT))

    def drop_group(self, layer: str, source: str, state_: str, *, from_part: int = 1) -> list[int]:
        """Delete the vectors of a file's lines from ``from_part`` on (all of them by
        default), and its fingerprint; the ids deleted."""
        self.connection.execute(
            delete(groups).where(
                groups.c.layer == layer, groups.c.source == source, groups.c.state == state_
            )
        )
        return self._delete(
            and_(
                vectors.c.layer == layer,
                vectors.c.source == source,
                vectors.c.state == state_,
                vectors.c.part >= from_part,
            )
        )

    def begun(self, layer: str, source: str, state_: str) -> None:
        """Record a file's lines as being embedded (an empty fingerprint), unless it is
        recorded already: a file with stored vectors always has a record."""
        statement = insert_ignoring_duplicates(groups, self.connection.dialect.name)
        self.connection.execute(
            statement, {"layer": layer, "source": source, "state": state_, "fingerprint": ""}
        )

    def done(self, layer: str, source: str, state_: str, fingerprint: str) -> None:
        """Record a file's lines as wholly embedded, as of ``fingerprint``."""
        statement = upsert(
            groups, self.connection.dialect.name, ["layer", "source", "state"], ["fingerprint"]
        )
        self.connection.execute(
            statement,
            {"layer": layer, "source": source, "state": state_, "fingerprint": fingerprint},
        )

    def _delete(self, where: object) -> list[int]:
        statement = delete(vectors).where(where).returning(vectors.c.id)  # type: ignore[arg-type]
        return [int(id_) for id_ in self.connection.execute(statement).scalars()]
