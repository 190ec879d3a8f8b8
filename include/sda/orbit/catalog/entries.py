"""A catalogue's records: :class:`CatalogEntry` (an element set with its ``sgp4`` ``Satrec``) and
:class:`Rejected` (a record that did not parse, with the reason)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sgp4 import exporter
from sgp4.api import Satrec

from sda.orbit.frames import perigee_apogee_km


@dataclasses.dataclass
class CatalogEntry:
    norad_id: int
    name: str
    line1: str
    line2: str
    satrec: Satrec

    @property
    def epoch(self) -> dt.datetime:
        return sat_epoch(self.satrec)

    @property
    def perigee_apogee_km(self) -> tuple[float, float]:
        return perigee_apogee_km(self.satrec)


@dataclasses.dataclass
class Rejected:
    where: str  # "line 12" (1-based), "record 3" (0-based) or "file"
    reason: str
    text: str


def sat_epoch(satrec: Satrec) -> dt.datetime:
    return exporter.sat_epoch_datetime(satrec).astimezone(dt.timezone.utc)
