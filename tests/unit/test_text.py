"""Text matching: which words count, how they match, and how documents are ranked."""

from __future__ import annotations

import pytest

from daemon.core.text_rows import Candidate, Statistics
from daemon.search import index as text_index
from daemon.search.text import Index, query_terms, terms, words


def index_of(*texts: str) -> Index[int]:
    index: Index[int] = Index()
    for key, text in enumerate(texts):
        index.add(key, text)
    return index


def keys(index: Index[int], query: str, limit: int = 10) -> list[int]:
    return [match.key for match in index.search(query, limit)]


def test_words_are_normalized_casefolded_and_split_on_anything_but_letters_and_digits() -> None:
    assert words("User.Food.VEGETABLES") == ["user", "food", "vegetables"]
    fullwidth_coffee = "\uff23\uff2f\uff26\uff26\uff25\uff25"
    assert words(f"{fullwidth_coffee} at 7am—ﬁne, straße") == ["coffee", "7am", "fine", "strasse"]
    assert words("snake_case-and/slashes") == ["snake", "case", "slashes"]


def test_short_words_and_stopwords_do_not_count() -> None:
    assert words("I am at the gym with Al, and it was what we did") == ["gym"]
    assert terms("") == []
    assert query_terms("what is the") == {}


def test_plural_and_singular_match_through_stemming() -> None:
    index = index_of("I cooked a vegetable stew", "Deep work before lunch")
    assert keys(index, "vegetables") == [0]
    assert keys(index, "user.food.vegetables") == [0]


def test_words_match_whole_never_as_substrings() -> None:
    index = index_of("Sleepover at Anna's place", "Try to sleep by 23:00")
    assert keys(index, "sleep") == [1]
    assert keys(index, "over") == []


def test_matches_explain_themselves_with_the_query_words_in_query_order() -> None:
    index = index_of("Vegetables need twenty minutes; timing matters")
    (match,) = index.search("timing of vegetables", 10)
    assert match.words == ("timing", "vegetables")


def test_more_and_rarer_matching_words_rank_first() -> None:
    index = index_of(
        "coffee in the morning",
        "coffee and more coffee at noon",
        "coffee after the walk",
        "espresso is coffee too",
        "espresso before the meeting about coffee beans",
    )
    ranked = keys(index, "espresso coffee")
    # Both words beat one word; among the one-word matches the rare word beats the common one.
    assert set(ranked[:2]) == {3, 4}
    assert ranked[2] == 1  # "coffee" twice in a short line

    rare = index_of("coffee", "coffee", "coffee", "espresso")
    assert keys(rare, "coffee espresso")[0] == 3


def test_results_are_bounded_by_the_limit_and_ties_keep_index_order() -> None:
    index = index_of(*(f"note {n} about lunch" for n in range(5)))
    assert keys(index, "lunch", limit=2) == [0, 1]
    assert keys(index, "lunch", limit=0) == []


def test_removed_and_replaced_documents_are_searched_as_they_are_now() -> None:
    index = index_of("lunch at noon", "dinner at eight")
    index.remove(0)
    assert keys(index, "lunch") == []
    index.add(1, "lunch moved to one")
    assert keys(index, "lunch") == [1]
    assert keys(index, "dinner") == []
    index.remove(42)  # unknown keys are ignored


def test_scoring_some_documents_narrows_results_without_changing_scores() -> None:
    index = index_of("lunch with Anna", "lunch with Ben", "dinner with Anna", "tea")
    everything = index.scores("lunch anna")
    narrowed = index.scores("lunch anna", among=[1, 2, 3, 99])
    assert narrowed == {key: score for key, score in everything.items() if key != 0}
    assert set(everything) == {0, 1, 2}


def test_a_long_rows_kept_term_counts_score_as_counting_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BM25 over whole files keeps a long row's term counts for the next query; the scores
    are those of counting the row's terms every time."""
    long_row = " ".join(["lake", "tea", "lake", *(f"w{n}" for n in range(text_index.LONG_ROW))])
    rows = [
        Candidate("a.md", "", 0, long_row, len(long_row.split()), None),
        Candidate("b.md", "", 0, "lake swim", 2, None),
    ]
    stats = Statistics(10, 200, {"lake": 3, "tea": 1})
    wanted = ["lake", "tea", "absent"]
    kept = [text_index.bm25(rows, wanted, stats, 0.75) for _ in range(2)]  # counted, then kept
    monkeypatch.setattr(text_index, "LONG_ROW", 10_000)  # every row counted again
    assert kept[0] == kept[1] == text_index.bm25(rows, wanted, stats, 0.75)
    assert kept[0][0] > kept[0][1] > 0
