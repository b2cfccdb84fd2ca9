"""A time zone as configured: an IANA name that zoneinfo knows, as a pydantic field type
(apart from :mod:`daemon.core.clock`, which the light clients use without pydantic)."""

from typing import Annotated

from pydantic import AfterValidator

from daemon.core.clock import known_zone


def _known_zone(name: str) -> str:
    known_zone(name)
    return name


TimeZoneName = Annotated[str, AfterValidator(_known_zone)]
