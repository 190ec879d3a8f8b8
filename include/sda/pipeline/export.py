"""``sda export``: the orbits the pipeline screens with, as CCSDS OMM and OEM files (:mod:`sda.orbit.ndm`).

    sda export omm --out DIR [--format kvn|xml] [--orbits fused|catalogue]
    sda export oem --objects 25544,43013 --start ISO --stop ISO [--step-s 60] --out DIR [--format kvn|xml]
                   [--orbits fused|catalogue]

One file per object: ``<norad>.omm.<fmt>`` / ``<norad>.oem.<fmt>``. The orbits come from an
:class:`sda.orbit.ndm.OrbitSource`: with ``--orbits fused`` (the default) :func:`fused_source` -- each object's
newest usable fused orbit (:class:`sda.orbit.fusion.source.FusedSource`: the numerical propagation and its
covariance for an OEM, the element set fitted to it for an OMM), the catalogue's newest element set
(:func:`catalog_source`) for an object without one; with ``--orbits catalogue`` the catalogue alone. Each file
says in a COMMENT which orbit it holds.
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
    from sda.orbit.fusion.source import FusedSource


def catalog_source(spark: "SparkSession", settings: "Settings") -> ndm.TleSource:
    """gold.catalog's newest element set per object."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    newest = Window.partitionBy("norad_id").orderBy(F.col("epoch").desc(), F.col("load_time").desc())
    rows = (TABLES["catalog"].read(spark, settings).withColumn("k", F.row_number().over(newest)).where("k = 1")
            .select("norad_id", "name", "line1", "line2", "perigee_km", "apogee_km").collect())
    return ndm.TleSource([ndm.CatalogRow(**r.asDict()) for r in rows])


def fused_source(spark: "SparkSession", settings: "Settings", at: dt.datetime, ids: list[int] | None = None
                 ) -> "FusedSource":
    """Each object's newest usable fused orbit at ``at`` (as the screening picks it: :func:`sda.lake.orbits.
    usable_fused`) in front of :func:`catalog_source`; ``ids``: only these objects' fused orbits (None: all)."""
    from sda.lake.orbits import usable_fused
    from sda.orbit.fusion.source import COLUMNS, FusedSource

    return FusedSource(usable_fused(spark, settings, at, ids, *COLUMNS), catalog_source(spark, settings))


def _time(text: str) -> dt.datetime:
    return parse_utc(text)


def add_parser(sub) -> None:
    exp = sub.add_parser("export", help="the screened orbits as CCSDS OMM, or chosen objects as OEM ephemerides")
    kinds = exp.add_subparsers(dest="kind", required=True)
    omm_help = ("every object's element set as an OMM (SGP4 mean elements, TEME): the one fitted to its fused orbit "
                "where it has one, else the catalogue's newest (a COMMENT says which)")
    oem_help = ("chosen objects' ephemerides (TEME) with covariance (RTN) as OEMs: the fused orbit's numerical "
                "propagation where the object has one usable at --start, else SGP4 on the catalogue's element set "
                "(a COMMENT says which)")
    omm = kinds.add_parser("omm", help=omm_help, description=omm_help)
    oem = kinds.add_parser("oem", help=oem_help, description=oem_help)
    oem.add_argument("--objects", required=True, help="comma-separated NORAD numbers")
    oem.add_argument("--start", required=True, type=_time, help="ISO-8601 (UTC if no offset)")
    oem.add_argument("--stop", required=True, type=_time, help="ISO-8601 (UTC if no offset)")
    oem.add_argument("--step-s", type=float, default=60.0,
                     help=f"seconds between states (default 60); the file declares {ndm.INTERPOLATION} interpolation "
                          f"of degree {ndm.INTERPOLATION_DEGREE}, within 1 m of the orbit at mid-step in LEO up to "
                          f"a step of {ndm.MAX_STEP_1M_S:.0f} s")
    for p in (omm, oem):
        p.add_argument("--out", required=True, type=Path, help="directory to write the files into")
        p.add_argument("--format", choices=("kvn", "xml"), default="kvn")
        p.add_argument("--orbits", choices=("fused", "catalogue"), default="fused",
                       help="fused (default): an object's newest usable fused orbit (gold fused_orbits) where it "
                            "has one, the catalogue's element set otherwise; catalogue: the catalogue's alone")


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
        if getattr(args, "orbits", "fused") == "catalogue":
            source = catalog_source(spark, settings)
        elif args.kind == "oem":
            ids = [int(n) for n in args.objects.split(",") if n.strip()]
            source = fused_source(spark, settings, args.start, ids)
        else:
            source = fused_source(spark, settings, dt.datetime.now(dt.timezone.utc))
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
