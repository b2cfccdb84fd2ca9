"""Search: how a query finds documents, apart from where the documents are kept.

- ``text``: text into terms, and :class:`~daemon.search.text.Index`, BM25 over small
  documents by key.
- ``fusion``: reciprocal-rank fusion of a lexical and a dense ranking;
  :class:`~daemon.search.fusion.HybridIndex` keeps both current with the same calls.
- ``daily``: the daily layer's line ranking (:class:`~daemon.search.daily.DailyIndex`).
- ``marks``: the marks' observations (:class:`~daemon.search.marks.MarkIndex`).
- ``embedding`` and ``semantic``: the dense side (the ``semantic`` extra), the embedding
  model, and the embedding cache and dense index.

The owners of the documents feed them in: the file layers (:mod:`daemon.files`) when a
file changes, :class:`daemon.services.mark_text.MarkText` when the marks table does. An
index is kept current by key (``add(key, text)``, ``remove(key)``, ``erase(key)`` for text
that must not outlive its deletion) and asked for ``scores(query, where=...)`` or
``search(query, limit, where=...)``; the dense side implements
:class:`~daemon.search.fusion.DenseRanker`. A persistent index (FTS5, tsvector) plugs in
at that seam.

May import ``daemon.core``, the file layers' one way to the disk (``daemon.fs``, for
the embedding cache's and the converted model's private files) and, for the semantic
model's settings, ``daemon.config``: no SQL, no bus, no file layer.
"""
