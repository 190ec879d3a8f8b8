"""``sda export``: the catalogue the pipeline screens with, as CCSDS OMM and OEM files (:mod:`sda.orbit.ndm`).

    sda export omm --out DIR [--format kvn|xml]
    sda export oem --objects 25544,43013 --start ISO --stop ISO [--step-s 60] --out DIR [--format kvn|xml]

One file per object: ``<norad>.omm.<fmt>`` / ``<norad>.oem.<fmt>``. The orbits come from an
:class:`sda.orbit.ndm.OrbitSource`; today :func:`catalog_source` (gold.catalog's newest element set per
object) -- a fused-orbit source would be chosen here.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from sda.orbit import ndm
from sda.orbit.times import parse_utc

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings


def catalog_source(spark: "SparkSession", settings: "Settings") -> ndm.TleSource:
    """gold.catalog's newest element set per object."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    newest = Window.partitionBy("norad_id").orderBy(F.col("epoch").desc(), F.col("load_time").desc())
    rows = (TABLES["catalog"].read(spark, settings).withColumn("k", F.row_number().over(newest)).where("k = 1")
            .select("norad_id", "name", "line1", "line2", "perigee_km", "apogee_km").collect())
    return ndm.TleSource([ndm.CatalogRow(**r.asDict()) for r in rows])


def _time(text: str) -> dt.datetime:
    return parse_utc(text)


def add_parser(sub) -> None:
    exp = sub.add_parser("export", help="the screened catalogue as CCSDS OMM, or chosen objects as OEM ephemerides")
    kinds = exp.add_subparsers(dest="kind", required=True)
    omm = kinds.add_parser("omm", help="every object's newest element set as an OMM")
    oem = kinds.add_parser("oem", help="chosen objects' ephemerides (TEME) with covariance (RTN) as OEMs")
    oem.add_argument("--objects", required=True, help="comma-separated NORAD numbers")
    oem.add_argument("--start", required=True, type=_time, help="ISO-8601 (UTC if no offset)")
    oem.add_argument("--stop", required=True, type=_time, help="ISO-8601 (UTC if no offset)")
    oem.add_argument("--step-s", type=float, default=60.0, help="seconds between states (default 60)")
    for p in (omm, oem):
        p.add_argument("--out", required=True, type=Path, help="directory to write the files into")
        p.add_argument("--format", choices=("kvn", "xml"), default="kvn")


def write(source: ndm.OrbitSource, args: argparse.Namespace, created: dt.datetime | None = None) -> list[Path]:
    """Write the files ``args`` asks for from ``source``; returns their paths."""
    created = created or dt.datetime.now(dt.timezone.utc)
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    if args.kind == "omm":
        for es in source.element_sets():
            path = args.out / f"{es.norad_id}.omm.{args.format}"
            path.write_text(ndm.write_omm(es, args.format, created))
            written.append(path)
        return written
    times = ndm.times_between(args.start, args.stop, args.step_s)
    for norad in (int(n) for n in args.objects.split(",") if n.strip()):
        path = args.out / f"{norad}.oem.{args.format}"
        path.write_text(ndm.write_oem(source.ephemeris(norad, times), args.format, created))
        written.append(path)
    return written


def main(args: argparse.Namespace) -> int:
    import sys

    from sda.config.settings import load_settings
    from sda.lake.spark import build_session

    settings = load_settings()
    spark = build_session("sda-export", settings)
    try:
        source = catalog_source(spark, settings)
    finally:
        spark.stop()
    try:
        paths = write(source, args)
    except (KeyError, ValueError) as exc:
        print(f"sda export: {exc!r} (an object not in gold.catalog, or a propagation or validation error)",
              file=sys.stderr)
        return 1
    print(f"sda export: wrote {len(paths)} {args.kind.upper()} files to {args.out}")
    return 0
