"""Search: how a query finds documents, apart from where the documents are kept.

``text`` turns text into terms and ranks documents with BM25 (:class:`~daemon.search.text.
Index`); ``fusion`` fuses a lexical and a dense ranking by reciprocal rank
(:class:`~daemon.search.fusion.HybridIndex` keeps both current with the same calls);
``semantic`` is the dense side (the ``semantic`` extra). The layers own their documents
and feed them in: the substrate, daily and compost layers (:mod:`daemon.files`) and the
marks (:mod:`daemon.services.mark_text`).

An index is kept current by key (``add(key, text)``, ``remove(key)``) and asked for
``scores(query, where=...)`` or ``search(query, limit, where=...)``; a dense ranker
implements :class:`~daemon.search.fusion.DenseRanker`. That is the seam a persistent index
(FTS5, tsvector) plugs into.

May import ``daemon.core``, the file layers' one way to the disk (``daemon.files.fs``, for
the embedding cache's private files) and, for the semantic model's settings,
``daemon.config``: no SQL, no bus, no file layer.
"""
