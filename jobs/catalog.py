"""Stage ``catalog``: a TLE/OMM catalogue -> gold ``catalog`` (TLE history by epoch).

    python jobs/catalog.py --start ISO --end ISO --run-id ID [--file PATH | --celestrak GROUP]

The file (default ``settings.catalog_file``; ``--file`` must lie in that file's directory or in the
landing zone, see :func:`check_args`) is parsed on the driver with :func:`sda.orbit.catalog.load_catalog`
(catalogues are megabytes, not a distributed read). With ``--celestrak GROUP`` the group is first
downloaded from CelesTrak and kept as ``<landing>/catalog/celestrak-<group>-<UTC time>.tle`` (the raw
text: a rerun of that file replays the load), then loaded like any file; offline the job fails with
the URL and the network error and writes nothing. Element sets are MERGEd on (norad_id, epoch), so
every epoch ever loaded is kept and a rerun inserts nothing; records that do not parse, fail the TLE
checksum or that SGP4 refuses at initialisation go to ``quarantine`` keyed by a hash of (stage, file
content, position), so a rerun quarantines nothing twice.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sda.lake import schemas
from sda.lake.tables import TABLES
from sda.orbit.catalog import (
    SGP4_ERRORS,
    CatalogEntry,
    Rejected,
    celestrak_url,
    check_celestrak_group,
    fetch_celestrak,
    load_catalog,
)
from sda.pipeline import runtime, sinks
from sda.pipeline.arguments import StageArgumentError, stage_parser, with_defaults

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

STAGE = "catalog"


class CatalogFetchError(RuntimeError):
    """The catalogue could not be fetched (offline, HTTP error, an empty answer): nothing was written."""


def tle_checksum_ok(line: str) -> bool:
    """Column 69 is the sum of the digits of columns 1-68 (a minus sign counts 1), modulo 10.

    Letters, blanks, '.' and '+' count 0: an Alpha-5 catalogue number ("A0001") adds only its four
    digits, and Space-Track's blank-padded "    5" weighs what "00005" does."""
    if len(line) < 69 or not line[68].isdigit():
        return False
    total = sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line[:68])
    return total % 10 == int(line[68])


def screen_entries(entries: list[CatalogEntry]) -> tuple[list[CatalogEntry], list[Rejected]]:
    """What ``load_catalog`` parsed but the pipeline must not use: bad checksums (a corrupted digit
    still parses) and element sets SGP4 refuses."""
    good, bad = [], []
    for entry in entries:
        text = entry.line1 + "\n" + entry.line2
        if not (tle_checksum_ok(entry.line1) and tle_checksum_ok(entry.line2)):
            bad.append(Rejected(f"norad {entry.norad_id}", "TLE checksum mismatch", text))
        elif entry.satrec.error != 0:
            meaning = SGP4_ERRORS.get(entry.satrec.error, "unknown")
            reason = f"SGP4 refuses the element set: error {entry.satrec.error} ({meaning})"
            bad.append(Rejected(f"norad {entry.norad_id}", reason, text))
        else:
            good.append(entry)
    return good, bad


def catalog_rows(entries: list[CatalogEntry], source: str, run_id: str, load_time: dt.datetime) -> list[tuple]:
    rows = []
    for e in entries:
        perigee, apogee = e.perigee_apogee_km
        rows.append((int(e.norad_id), e.name, e.epoch, e.line1, e.line2, float(perigee), float(apogee), source,
                     load_time, run_id))
    return rows


def _record_no(where: str) -> int | None:
    # "line 12" is 1-based in the loader; quarantine record numbers are 0-based like bronze's
    kind, _, num = where.partition(" ")
    if not num.isdigit():
        return None
    return int(num) - 1 if kind == "line" else int(num)


def quarantine_rows(rejected: list[Rejected], source: str, file_sha256: str, run_id: str,
                    now: dt.datetime) -> list[tuple]:
    """Rows in the column order of ``schemas.QUARANTINE`` (whatever columns it has today)."""
    rows = []
    for rej in rejected:
        values: dict[str, Any] = {
            "quarantine_id": hashlib.sha256(
                f"{STAGE}:{file_sha256}:{rej.where}:{hashlib.sha256(rej.text.encode()).hexdigest()}".encode()
            ).hexdigest(),
            "stage": STAGE,
            "reason": f"{rej.where}: {rej.reason}",
            "sensor_kind": None,
            "source_file": source,
            "record_no": _record_no(rej.where),
            "bronze_id": None,
            "raw": rej.text.encode("utf-8"),
            "quarantine_time": now,
            "run_id": run_id,
        }
        rows.append(tuple(values.get(f.name) for f in schemas.QUARANTINE.fields))
    return rows


def write_quarantine(spark: "SparkSession", rows: list[tuple], settings: "Settings", app_id: str) -> None:
    df = spark.createDataFrame(rows, schemas.QUARANTINE)
    if TABLES["quarantine"].key:
        sinks.merge_new(spark, df, "quarantine", settings)
    else:  # an append-only quarantine: Delta's idempotent append, once per file content
        sinks.append_once(df, "quarantine", settings, app_id, 0)


def fetch_to_landing(settings: "Settings", group: str, now: dt.datetime | None = None) -> Path:
    """Download CelesTrak GP group ``group`` as TLE and keep the raw text in the landing zone.

    Raises :class:`CatalogFetchError` (naming the URL and the ``OSError``) when CelesTrak cannot be
    reached, and when its answer holds no element set (CelesTrak answers an unknown group with a line
    of text); in both cases nothing is written."""
    group = check_celestrak_group(group)
    url = celestrak_url(group, "tle")
    try:
        text = fetch_celestrak(group, "tle")
    except OSError as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc  # the network's own error
        raise CatalogFetchError(
            f"CelesTrak group {group!r} not fetched from {url}: {type(cause).__name__}: {cause}"
        ) from exc
    if not any(line.startswith("1 ") for line in text.lstrip("\ufeff").splitlines()):
        raise CatalogFetchError(
            f"CelesTrak answered {url} without any element set (the answer begins {text.strip()[:80]!r})"
        )
    now = now or dt.datetime.now(dt.timezone.utc)
    folder = settings.landing / "catalog"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"celestrak-{group}-{now:%Y%m%dT%H%M%SZ}.tle"
    if path.exists():  # a second fetch within the same second: keep both raw files
        path = folder / f"celestrak-{group}-{now:%Y%m%dT%H%M%S.%fZ}.tle"
    tmp = folder / f".{path.name}.tmp"  # ingest and readers ignore dot files; the rename is atomic
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    if args.replay:  # a replay uses the catalogue as it stands; loading is the scheduled runs' job
        return {"skipped": "replay: the catalogue is not reloaded"}
    file_arg, group = args.file, args.celestrak
    if file_arg and group:
        raise StageArgumentError("--file and --celestrak are alternatives: pass one of them")
    fetched: dict[str, Any] = {}
    if group:
        path = fetch_to_landing(settings, group)
        fetched = {"celestrak_group": group, "celestrak_url": celestrak_url(group, "tle")}
    else:
        path = Path(file_arg) if file_arg else settings.catalog_file
    if not path.is_file():
        raise FileNotFoundError(f"catalogue file {path} does not exist (pass --file or set SDA_CATALOG_FILE)")
    data = path.read_bytes()
    file_sha256 = hashlib.sha256(data).hexdigest()
    parsed, rejected = load_catalog(path)
    entries, refused = screen_entries(parsed)
    rejected = rejected + refused
    now = dt.datetime.now(dt.timezone.utc)
    source = str(path)

    inserted = 0
    if entries:
        df = spark.createDataFrame(catalog_rows(entries, source, args.run_id, now), schemas.CATALOG)
        # the element sets not in the table yet (one anti-join): a reload of an unchanged file, the
        # usual scheduled run, then costs no MERGE
        key = list(TABLES["catalog"].key)
        inserted = df.select(*key).distinct().join(TABLES["catalog"].read(spark, settings).select(*key),
                                                   on=key, how="left_anti").count()
        if inserted:
            sinks.merge_new(spark, df, "catalog", settings)
    if rejected:
        write_quarantine(spark, quarantine_rows(rejected, source, file_sha256, args.run_id, now), settings,
                         app_id=f"{STAGE}-quarantine-{file_sha256}")
    return {
        "file": source,
        **fetched,
        "file_sha256": file_sha256,
        "element_sets": len(entries),
        "objects": len({e.norad_id for e in entries}),
        "inserted": inserted,
        "quarantined": len(rejected),
        # conservation: element sets read = new + already in the table (a reload) + refused
        "records_in": len(entries) + len(rejected),
        "records_out": inserted,
        "duplicates": len(entries) - inserted,
    }


def _group_arg(text: str) -> str:
    try:
        return check_celestrak_group(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    p = stage_parser(STAGE, "Load a TLE/OMM catalogue file into the gold catalog table.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--file", default=None,
                        help="catalogue file (TLE, OMM CSV/JSON/XML); default settings.catalog_file")
    source.add_argument("--celestrak", metavar="GROUP", type=_group_arg, default=None,
                        help="fetch this CelesTrak GP group (e.g. active) as TLE, keep it under <landing>/catalog/, "
                             "load it")
    return p


def check_args(args: argparse.Namespace, settings: "Settings") -> None:
    """``--file`` must lie (after resolving ``..`` and symlinks) in the catalogue directory (the
    directory of ``settings.catalog_file``) or the landing zone: the stage loads it into gold.
    Runs in :func:`sda.pipeline.runtime.run_stage`'s validation, before any Spark session; a refusal exits 2."""
    from sda.config.paths import confine

    if args.file:
        args.file = str(confine(args.file, [settings.catalog_file.parent, settings.landing], "--file"))


def main(argv: list[str] | None = None, settings: "Settings | None" = None,
         spark: "SparkSession | None" = None) -> dict[str, Any]:
    """Run the stage; a failed CelesTrak fetch exits with status 1 and its message on stderr."""
    try:
        return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark, check=check_args)
    except CatalogFetchError as exc:
        runtime.log.error("%s", exc)
        print(f"jobs/{STAGE}.py: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main(sys.argv[1:])
