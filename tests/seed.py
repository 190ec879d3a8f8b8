"""Seeding small Delta tables for a test: hand-made rows appended to a registered table as an upstream
stage would have left them, and catalogue rows built from element sets. The tables themselves are
created by ``sda.lake.tables.ensure_tables``; this only adds rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from sda.lake.tables import TABLES, TableSpec


def append_rows(spark, settings, table: str | TableSpec, rows: Iterable[tuple], *, one_file: bool = False) -> None:
    """Append ``rows`` (tuples in the table's column order) to ``table`` (a name in ``TABLES`` or its
    spec, e.g. ``BRONZE_BY_KIND[kind]``) in one Delta commit. ``one_file``: a single data file for the
    commit, for tests that count files."""
    spec = TABLES[table] if isinstance(table, str) else table
    df = spark.createDataFrame(list(rows), spec.schema)
    if one_file:
        df = df.coalesce(1)
    df.write.format("delta").mode("append").save(spec.path(settings))


def catalog_row(norad_id: int, epoch: dt.datetime, lines: Sequence[str], perigee_km: float, apogee_km: float, *,
                load_time: dt.datetime | None = None, name: str | None = None, run_id: str = "test") -> tuple:
    """A ``catalog`` row for the element set ``lines`` (line 1, line 2) of ``norad_id`` at ``epoch``,
    named ``OBJ <norad_id>`` and loaded at its epoch unless told otherwise."""
    l1, l2 = lines
    return (norad_id, name or f"OBJ {norad_id}", epoch, l1, l2, perigee_km, apogee_km, "test",
            load_time or epoch, run_id)
