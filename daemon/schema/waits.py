"""How long a caller waits for a signal's deliveries: the daemon's own waits and the
ceiling of the one a caller chooses. Two different limits, kept apart on purpose."""

from __future__ import annotations

from typing import Final

# A person's command (a review, an undo, a correction, a retraction, a forget) and an MCP
# tool's write wait this long for their signal to be applied before answering, so that the
# answer can say what happened and a recall right after it sees the effect.
DELIVERY_WAIT_SECONDS: Final = 10.0

# The most a caller may ask for with ``?wait=`` (``wait=`` in the client): long enough for a
# slow receptor (a consolidation by a model), short enough not to hold a connection open.
MAX_WAIT_SECONDS: Final = 30.0
