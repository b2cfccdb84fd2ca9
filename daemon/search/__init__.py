"""Search: how a query finds documents, apart from where the documents are kept.

- ``text``: text into terms, and :class:`~daemon.search.text.Index`, BM25 over small
  documents by key (in memory: the lines of a few substrate files, for their excerpts).
- ``fusion``: reciprocal-rank fusion of a lexical and a dense ranking, and the dense
  side's seams.
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
writes its lines' rows as it writes and reads the files, the substrate and the compost
(:mod:`daemon.files.substrate`, :mod:`daemon.files.compost`) a row per file and per
learning as they read theirs (all three through :mod:`daemon.files.file_rows`: a file is
read only when its size or mtime changed), and
:class:`daemon.services.mark_search.MarkSearch` indexes the marks the table queues. Each
layer ranks the index's candidates with :func:`~daemon.search.index.bm25`. The dense side
has two seams (:mod:`daemon.search.fusion`): :class:`~daemon.search.fusion.DenseRanker`
(stored vectors, filled in the background) and
:class:`~daemon.search.fusion.DenseDocuments` (documents a layer keeps in memory).

May import ``daemon.core``, the file layers' one way to the disk (``daemon.fs``, for
the embedding cache's, the vector file's and the converted model's private files) and,
for the semantic model's settings, ``daemon.config``: no SQL, no bus, no file layer.
"""
