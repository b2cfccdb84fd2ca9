"""Why the memory refuses a person's command, in domain terms: the thing is not there, its
state does not allow it, or the input breaks a rule. The edge says it in its own words
(the API as HTTP statuses, Loom as pages, a receptor as a dead delivery naming the field)."""

from __future__ import annotations


class Refused(ValueError):
    """The command cannot be applied; ``field`` names the input at fault (empty when no one
    field is)."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class NotFound(Refused):
    """What the command names does not exist (in this workspace)."""


class Conflict(Refused):
    """What the command names exists, but its state does not allow the command now."""


class Invalid(Refused):
    """The command's input breaks a rule."""
