"""Search: how a query finds documents, apart from where the documents are kept.

- ``text``: text into terms, and :class:`~daemon.search.text.Index`, BM25 over small
  documents by key.
- ``fusion``: reciprocal-rank fusion of a lexical and a dense ranking;
  :class:`~daemon.search.fusion.HybridIndex` keeps both current with the same calls.
- ``index``: the persistent text index's seam (:class:`~daemon.search.index.TextIndex`,
  implemented by the store: FTS5, tsvector), what a text is indexed as, and BM25 over the
  candidates it returns; ``memory_index`` is the same index in memory, for tests.
- ``daily``: the daily layer's line ranking over the index's candidates
  (:class:`~daemon.search.daily.DailyIndex`).
- ``marks``: what a mark is indexed as (subject and observation) and its dense side.
- ``embedding`` and ``semantic``: the dense side (the ``semantic`` extra), the embedding
  model, and the substrate's embedding cache and dense index in memory.
- ``vector_file``: the memory-mapped int8 copy of the stored vectors (daily lines, marks)
  that recall searches; the store's rows and the worker that fills them are in
  ``daemon.services``.

The owners of the documents feed them in: the daily layer (:mod:`daemon.files.daily_rows`)
writes its lines' rows as it writes and reads the files, and
:class:`daemon.services.mark_search.MarkSearch` indexes the marks the table queues. The
substrate and the compost still rank with an in-memory :class:`~daemon.search.text.Index`
kept current by key (``add(key, text)``, ``remove(key)``). The dense side has two seams
(:mod:`daemon.search.fusion`): :class:`~daemon.search.fusion.DenseRanker` (stored vectors,
filled in the background) and :class:`~daemon.search.fusion.DenseDocuments` (documents a
layer keeps in memory).

May import ``daemon.core``, the file layers' one way to the disk (``daemon.fs``, for
the embedding cache's, the vector file's and the converted model's private files) and,
for the semantic model's settings, ``daemon.config``: no SQL, no bus, no file layer.
"""
