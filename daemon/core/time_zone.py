"""A time zone as configured: an IANA name that zoneinfo knows, as a pydantic field type
(apart from :mod:`daemon.core.clock`, which the light clients use without pydantic)."""

from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator


def _known_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Berlin"
        ) from None
    return name


TimeZoneName = Annotated[str, AfterValidator(_known_zone)]
