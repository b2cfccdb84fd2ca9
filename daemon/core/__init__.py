"""The pure rules of the memory: signals and their validation, records, subjects, strength,
days and the clock. No I/O, and no imports from the rest of ``daemon`` (or from
``receptors``/``rhythms``): everything else builds on this package."""
