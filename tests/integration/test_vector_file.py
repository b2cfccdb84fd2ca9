"""The memory-mapped int8 copy of the stored vectors that recall searches: what it ranks,
what it filters, how it grows, and that a removed vector leaves no byte in its files."""

from __future__ import annotations

import stat
from pathlib import Path
from types import ModuleType

import pytest

np = pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
pytest.importorskip("onnxruntime", reason="needs pip install 'cambium-memory[semantic]'")


@pytest.fixture
def vf() -> ModuleType:
    from daemon.search import vector_file

    return vector_file


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def unit_rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random rows of unit length."""
    rows = rng.normal(size=shape).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def entry(
    vf: ModuleType, id_: int, vector: np.ndarray, kind: int = 1, key: int = 10, part: int = 1
) -> object:
    values, scale = vf.quantize(vector)
    return vf.Entry(id_, kind, key, part, values.tobytes(), scale)


def test_quantized_vectors_keep_their_cosine_similarity(vf: ModuleType) -> None:
    rng = np.random.default_rng(7)
    a, b = (row / np.linalg.norm(row) for row in rng.normal(size=(2, 384)).astype(np.float32))
    (qa, sa), (qb, sb) = vf.quantize(a), vf.quantize(b)
    approximate = float(qa.astype(np.int32) @ qb.astype(np.int32)) * sa * sb
    assert approximate == pytest.approx(float(a @ b), abs=0.01)
    assert vf.quantize(np.zeros(4, dtype=np.float32))[1] == 0.0


def test_the_nearest_vectors_come_first_filtered_by_kind_key_and_day(
    vf: ModuleType, tmp_path: Path
) -> None:
    file = vf.VectorFile(tmp_path / "vectors", "model", 3)
    file.put(
        [
            entry(vf, 1, unit(1, 0, 0), key=100, part=1),
            entry(vf, 2, unit(1, 1, 0), key=101, part=2),
            entry(vf, 3, unit(0, 0, 1), key=102, part=3),
            entry(vf, 4, unit(1, 0, 0), kind=vf.MARK, key=7),
        ]
    )
    lines = (vf.LIVE_LINE, vf.ARCHIVED_LINE)
    found = file.nearest(unit(1, 0.1, 0), 3, kinds=lines, floor=0.3)
    assert [f.id for f in found] == [1, 2]  # the third is below the floor
    assert found[0].similarity == pytest.approx(float(unit(1, 0.1, 0) @ unit(1, 0, 0)), abs=0.02)
    assert [f.id for f in file.nearest(unit(1, 0, 0), 3, kinds=lines, floor=0.3, since=101)] == [2]
    marks = file.nearest(unit(1, 0, 0), 3, kinds=(vf.MARK,), floor=0.3, key=7)
    assert [(f.id, f.key) for f in marks] == [(4, 7)]
    assert file.nearest(unit(1, 0, 0), 3, kinds=(vf.MARK,), floor=0.3, key=8) == []
    assert file.nearest(unit(1, 0, 0), 0, kinds=lines, floor=0.3) == []


def test_a_removed_vector_is_zeroed_in_the_file_and_its_slot_reused(
    vf: ModuleType, tmp_path: Path
) -> None:
    file = vf.VectorFile(tmp_path / "vectors", "model", 4)
    kept, gone = unit(1, 2, 3, 4), unit(-4, 3, -2, 1)
    file.put([entry(vf, 1, kept), entry(vf, 2, gone)])
    file.commit(5)
    matrix = tmp_path / "vectors.i8"
    gone_bytes = vf.offset(vf.quantize(gone)[0].tobytes()).tobytes()
    assert gone_bytes in matrix.read_bytes()
    assert file.remove([2, 99]) == 1
    file.commit(6)
    assert gone_bytes not in matrix.read_bytes()
    assert vf.offset(vf.quantize(kept)[0].tobytes()).tobytes() in matrix.read_bytes()
    assert file.live == 1
    file.put([entry(vf, 3, gone)])
    assert sorted(file.ids().tolist()) == [1, 3]
    assert matrix.stat().st_size == vf.GROWTH * 4  # the freed slot was used again


def test_the_file_grows_and_is_found_again_with_its_generation(
    vf: ModuleType, tmp_path: Path
) -> None:
    base = tmp_path / "data" / "vectors"
    file = vf.VectorFile(base, "model", 2)
    count = vf.GROWTH + 5
    file.put([entry(vf, n + 1, unit(1, n % 7), part=n) for n in range(count)])
    file.commit(42)
    file.close()
    for part in ("i8", "slots", "json"):
        assert stat.S_IMODE(base.with_name(f"vectors.{part}").stat().st_mode) == 0o600
    reopened = vf.VectorFile(base, "model", 2, writable=False)
    assert (reopened.generation, reopened.live) == (42, count)
    found = reopened.nearest(unit(1, 0), 1, kinds=(vf.LIVE_LINE,), floor=0.0)
    assert found[0].part % 7 == 0
    # Another model's file is not this one's: it starts empty.
    assert vf.VectorFile(base, "other", 2).live == 0


def test_a_file_of_the_layout_before_is_not_current_and_starts_again(
    vf: ModuleType, tmp_path: Path
) -> None:
    base = tmp_path / "vectors"
    file = vf.VectorFile(base, "model", 2)
    file.put([entry(vf, 1, unit(1, 0))])
    file.commit(3)
    header = tmp_path / "vectors.json"
    # Before the layout was named, the matrix held the int8 values themselves.
    header.write_text('{"model": "model", "dimension": 2, "generation": 3}')
    read_only = vf.VectorFile(base, "model", 2, writable=False)
    assert read_only.generation == -1  # not the store's: the CLI does not search it
    reopened = vf.VectorFile(base, "model", 2)
    assert (reopened.generation, reopened.live) == (-1, 0)  # the daemon rebuilds it from rows


def test_rows_filling_a_window_are_scored_in_place_and_the_rest_gathered_alike(
    vf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "WINDOW", 16)
    monkeypatch.setattr(vf, "CHUNK", 40)
    file = vf.VectorFile(tmp_path / "vectors", "model", 8)
    rng = np.random.default_rng(3)
    rows = unit_rows(rng, 300, 8)
    # Marks: rows 0-39 (their windows full: in place, in calls of 40 rows); every 6th row
    # of 40-159 (too few: gathered); 160-239 but for every 4th row, a line (in place, the
    # lines' scores thrown away); lines elsewhere, with the day n.
    marks = {*range(40), *range(40, 160, 6), *(n for n in range(160, 240) if n % 4)}
    file.put(
        [
            entry(vf, n + 1, rows[n], kind=vf.MARK if n in marks else vf.LIVE_LINE, key=n)
            if n not in marks
            else entry(vf, n + 1, rows[n], kind=vf.MARK, key=1)
            for n in range(300)
        ]
    )
    query = unit_rows(rng, 8)
    exact = rows @ query
    for kinds, key, since, chosen in (
        ((vf.MARK,), 1, None, sorted(marks)),
        ((vf.LIVE_LINE,), None, None, [n for n in range(300) if n not in marks]),
        ((vf.LIVE_LINE,), None, 200, [n for n in range(200, 300) if n not in marks]),
    ):
        found = file.nearest(query, 300, kinds=kinds, floor=-1.0, key=key, since=since)
        assert sorted(f.id - 1 for f in found) == chosen
        similarity = {f.id - 1: f.similarity for f in found}
        assert all(similarity[n] == pytest.approx(exact[n], abs=0.05) for n in chosen)
        assert [f.id - 1 for f in found][:5] == sorted(chosen, key=lambda n: -exact[n])[:5]


def test_a_search_after_a_change_sees_it(vf: ModuleType, tmp_path: Path) -> None:
    file = vf.VectorFile(tmp_path / "vectors", "model", 3)
    file.put([entry(vf, 1, unit(1, 0, 0), kind=vf.MARK, key=7)])
    ask = {"kinds": (vf.MARK,), "floor": 0.0, "key": 7}
    assert [f.id for f in file.nearest(unit(0, 1, 0.1), 5, **ask)] == [1]
    file.put([entry(vf, 2, unit(0, 1, 0), kind=vf.MARK, key=7)])
    assert [f.id for f in file.nearest(unit(0, 1, 0.1), 5, **ask)] == [2, 1]
    file.remove([2])
    assert [f.id for f in file.nearest(unit(0, 1, 0.1), 5, **ask)] == [1]
    assert file.nearest(unit(0, 1, 0.1), 5, **{**ask, "key": 8}) == []


def test_lines_and_marks_are_kept_and_searched_apart(vf: ModuleType, tmp_path: Path) -> None:
    files = vf.VectorFiles(tmp_path / "vectors", "model", 2)
    files.put([entry(vf, 1, unit(1, 0), key=100), entry(vf, 2, unit(1, 0.1), kind=vf.MARK)])
    files.commit(4)
    assert (files.lines.live, files.marks.live, files.live) == (1, 1, 2)
    assert sorted(files.ids().tolist()) == [1, 2]
    lines = (vf.LIVE_LINE, vf.ARCHIVED_LINE)
    assert files.of(lines) is files.lines and files.of((vf.MARK,)) is files.marks
    assert [f.id for f in files.lines.nearest(unit(1, 0), 5, kinds=lines, floor=0.0)] == [1]
    assert [f.id for f in files.marks.nearest(unit(1, 0), 5, kinds=(vf.MARK,), floor=0.0)] == [2]
    with pytest.raises(ValueError, match="apart"):
        files.of((vf.LIVE_LINE, vf.MARK))
    assert {p.name for p in tmp_path.iterdir()} >= {"vectors.i8", "vectors.marks.i8"}
    assert vf.VectorFiles(tmp_path / "vectors", "model", 2, writable=False).generation == 4
    # A marks file lost (or never written: the layout before kept both in one) is not of
    # the lines' generation: the pair is not current, and is repaired from the store.
    for part in ("i8", "slots", "json"):
        (tmp_path / f"vectors.marks.{part}").unlink()
    assert vf.VectorFiles(tmp_path / "vectors", "model", 2, writable=False).generation == -1
    assert files.remove([1, 2, 3]) == 2


def test_a_large_search_scores_only_the_rows_whose_signs_are_nearest(
    vf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vf, "SIGNS_ABOVE", 100)
    monkeypatch.setattr(vf, "FIRST_PASS", 60)
    rng = np.random.default_rng(11)
    query = unit_rows(rng, 64)
    # 500 marks: most unrelated, ten close to the query (their signs mostly the query's).
    rows = unit_rows(rng, 500, 64)
    rows[::50] = unit_rows(rng, 10, 64) * 0.8 + query
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    file = vf.VectorFile(tmp_path / "vectors", "model", 64)
    file.put([entry(vf, n + 1, rows[n], kind=vf.MARK, key=1) for n in range(500)])
    scored: list[int] = []
    dots = file._scorer.dots
    monkeypatch.setattr(file._scorer, "dots", lambda r, q: scored.append(len(r)) or dots(r, q))
    ask = {"kinds": (vf.MARK,), "floor": -1.0, "key": 1}
    found = file.nearest(query, 3, **ask)
    assert sum(scored) == 60  # (a small search: 20 times 3 is the first pass)
    exact = rows @ query
    assert [f.id - 1 for f in found] == list(np.argsort(-exact)[:3])
    assert [f.similarity for f in found] == pytest.approx(np.sort(exact)[::-1][:3], abs=0.03)
    assert {f.id - 1 for f in file.nearest(query, 10, **ask)} == set(range(0, 500, 50))
    # The signs follow what is written and removed.
    file.put([entry(vf, 501, query, kind=vf.MARK, key=1)])
    assert file.nearest(query, 1, **ask)[0].id == 501
    file.remove([501])
    assert file.nearest(query, 1, **ask)[0].id != 501
    scored.clear()
    assert len(file.nearest(query, 3, **{**ask, "floor": 2.0})) == 0
    assert sum(scored) == 60
