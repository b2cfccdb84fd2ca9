"""The ``openai`` extractor (:mod:`receptors.llm.extractor`): a day's lines become facts by
asking a language model behind an OpenAI-compatible endpoint (:mod:`daemon.llm`)."""
