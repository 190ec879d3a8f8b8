"""Data-quality gate: run a table's Great Expectations suite on a Spark DataFrame, split the rows,
record the results.

    result = quality.validate(spark, settings, "silver", "observations", df, run_id)
    if not result.gate_passed:
        raise RuntimeError(result.summary())       # do not publish
    publish(result.passed)                          # the rows the quarantine checks let through

What :func:`validate` does (suites and severities: :mod:`sda.quality.suites`):

1. adds the ``_q_*`` helper columns the suite compares against and caches the frame;
2. runs a GX Checkpoint (suite ``sda.<layer>.<table>``, one Spark data source ``sda``, one dataframe
   asset per table, whole-dataframe batch), then builds its Data Docs page; the GX run name is our
   ``run_id``, so the validation page lands at
   ``<lakehouse>/../reports/gx/uncommitted/data_docs/local_site/validations/sda/<layer>/<table>/<run_id>/<time>/...html``;
3. ``passed`` = rows passing every quarantine-severity check, ``quarantined`` = the others, as
   ``ops/quarantine`` rows (reason: the failed checks), MERGEd on a deterministic ``quarantine_id``;
4. one ``ops/data_quality`` row per check, keyed by (run_id, table, expectation): a rerun of the same
   run replaces its rows instead of adding more (:func:`record_results`; a gate validating several
   tables writes them all at once, and builds their Data Docs pages in one pass, :func:`build_docs`).

The GX file context is rooted at ``<lakehouse parent>/reports`` (its ``gx/`` directory; ``uncommitted/``
with the Data Docs and stored validation results sits under ``var/``, which git ignores). The suite,
validation definition and checkpoint are rewritten from code on every call -- the code is their
source of truth -- under an exclusive file lock, because concurrent jobs would otherwise race on
``great_expectations.yml`` and the Data Docs index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sda.lake.tables import TABLES, ensure_tables
from sda.pipeline import sinks
from sda.pipeline.arguments import RUN_ID_RE
from sda.quality.report import reports_root
from sda.quality.suites import HELPER_PREFIX, Check, derive, suite_checks
from sda.transforms import envelope

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

log = logging.getLogger("sda.quality.gates")
STAGE = "quality"
DATASOURCE = "sda"
SITE = "local_site"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    expectation_type: str
    column: str | None
    severity: str  # warn | quarantine | fail
    success: bool
    unexpected_count: int | None
    element_count: int | None
    observed: str | None  # observed value, or an unexpected-values sample, or the exception

    def describe(self) -> str:
        where = f"({self.column})" if self.column else ""
        count = f", {self.unexpected_count} of {self.element_count} rows unexpected" if self.unexpected_count else ""
        return f"{self.name}{where} [{self.severity}]{count}: observed {self.observed}"


@dataclasses.dataclass
class QualityResult:
    run_id: str
    layer: str
    table: str
    suite: str
    checks: list[CheckResult]
    passed: "DataFrame"  # the input rows (input columns only) that pass every quarantine check
    quarantined: "DataFrame"  # ops/quarantine rows for the others
    quarantined_count: int
    gate_passed: bool  # False when a fail-severity check failed: do not publish
    data_docs_path: Path | None
    data_docs_url: str | None  # file:// URL of this run's validation page
    seconds: float
    _cached: Any = dataclasses.field(default=None, repr=False)
    gx_identifier: Any = dataclasses.field(default=None, repr=False)  # GX's validation result id (build_docs)

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.success]

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def summary(self) -> str:
        bad = self.failed
        gate = "passed" if self.gate_passed else "FAILED"
        head = (f"quality {self.layer}.{self.table} run {self.run_id}: gate {gate}, "
                f"{len(self.checks) - len(bad)}/{len(self.checks)} checks passed, "
                f"{self.quarantined_count} rows quarantined")
        lines = [head] + [f"  - {c.describe()}" for c in bad]
        if self.data_docs_url:
            lines.append(f"  Data Docs: {self.data_docs_url}")
        return "\n".join(lines)

    def metrics(self) -> dict[str, Any]:
        return {"table": self.table, "gate_passed": self.gate_passed, "checks": len(self.checks),
                "failed": {c.name: c.severity for c in self.failed}, "quarantined": self.quarantined_count,
                "data_docs_url": self.data_docs_url, "seconds": round(self.seconds, 2)}

    def release(self) -> None:
        """Drop the cached validated frame (``passed``/``quarantined`` then recompute from the input)."""
        if self._cached is not None:
            self._cached.unpersist()
            self._cached = None


# --- GX plumbing ----------------------------------------------------------------------------------

@contextlib.contextmanager
def _gx_lock(root: Path):
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".gx.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _checkpoint(context, root: Path, suite_name: str, table: str, checks: list[Check]):
    """Suite, data asset, batch definition, validation definition and checkpoint for ``table``.

    They are rewritten from code when the code's definition changed since this project last wrote them
    (a fingerprint of the expectations, kept in ``gx/sda_fingerprints.json``), and otherwise loaded:
    three ``add_or_update`` calls cost seconds a table, a ``get`` a fraction of that."""
    import great_expectations as gx

    expectations = [check.expectation() for check in checks]
    fingerprint = hashlib.sha256(json.dumps(
        {"gx": gx.__version__, "table": table, "datasource": DATASOURCE,
         "expectations": [e.configuration.to_json_dict() for e in expectations]},
        sort_keys=True, default=str).encode()).hexdigest()
    prints_file = root / "gx" / "sda_fingerprints.json"
    try:
        prints = json.loads(prints_file.read_text())
    except (OSError, ValueError):
        prints = {}
    if prints.get(suite_name) == fingerprint:
        try:
            return context.checkpoints.get(suite_name)
        except Exception as exc:  # removed or damaged since: write it again
            log.info("GX checkpoint %s not loadable (%s): writing it again", suite_name, exc)

    try:
        source = context.data_sources.get(DATASOURCE)
    except (KeyError, ValueError):
        source = context.data_sources.add_spark(DATASOURCE)
    try:
        asset = source.get_asset(table)
    except LookupError:
        asset = source.add_dataframe_asset(table)
    try:
        batch = asset.get_batch_definition("whole")
    except (KeyError, LookupError, ValueError):
        batch = asset.add_batch_definition_whole_dataframe("whole")

    # expectations passed at construction: add_expectation() on a suite already stored would write
    # the suite file once per expectation
    suite = gx.ExpectationSuite(name=suite_name, meta={"sda_table": table}, expectations=expectations)
    suite = context.suites.add_or_update(suite)
    definition = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=suite_name, data=batch, suite=suite))
    # no UpdateDataDocsAction: the pages of a job's validations are built once, together (build_docs)
    checkpoint = context.checkpoints.add_or_update(
        gx.Checkpoint(name=suite_name, validation_definitions=[definition], actions=[],
                      result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5}))
    prints[suite_name] = fingerprint
    prints_file.parent.mkdir(parents=True, exist_ok=True)
    prints_file.write_text(json.dumps(prints, indent=1, sort_keys=True))
    return checkpoint


def preload_gx() -> None:
    """Import Great Expectations in a background thread (several seconds of Python imports) while
    the caller's first Spark requests wait on the server; the first validation then finds it loaded."""
    import threading

    def load() -> None:
        try:
            import great_expectations  # noqa: F401
            from great_expectations.core.run_identifier import RunIdentifier  # noqa: F401
        except Exception:  # pragma: no cover - the validation's own import reports it
            pass

    threading.Thread(target=load, name="gx-preload", daemon=True).start()


_CONTEXTS: dict[str, Any] = {}


def _context(root: Path):
    """The file-backed GX context of ``root``, opened once per process (a gate validates several
    tables; opening it reads and checks the whole project configuration)."""
    import great_expectations as gx

    key = str(root)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = gx.get_context(mode="file", project_root_dir=key)
    return _CONTEXTS[key]


def _observed(result: dict, exception: dict | None) -> str | None:
    if exception and exception.get("raised_exception"):
        return f"error: {exception.get('exception_message')}"
    if "observed_value" in result:
        value = result["observed_value"]
        return value if isinstance(value, str) else json.dumps(value, default=str)
    if "unexpected_count" in result:
        sample = result.get("partial_unexpected_list") or []
        return f"{result.get('unexpected_percent') or 0:.3g}% unexpected" + (
            f", e.g. {json.dumps(sample[:5], default=str)}" if sample else "")
    return None


def _run_gx(settings: "Settings", suite_name: str, table: str, checks: list[Check], frame: "DataFrame",
            run_id: str) -> tuple[list[CheckResult], Any, Path | None]:
    """Validate ``frame``; returns the check results, GX's validation result identifier (for
    :func:`build_docs`) and the path its Data Docs page has once built."""
    from great_expectations.core.run_identifier import RunIdentifier

    root = reports_root(settings)
    with _gx_lock(root):
        context = _context(root)
        checkpoint = _checkpoint(context, root, suite_name, table, checks)
        outcome = checkpoint.run(batch_parameters={"dataframe": frame},
                                 run_id=RunIdentifier(run_name=run_id, run_time=dt.datetime.now(dt.timezone.utc)))
        (identifier, validation), = outcome.run_results.items()
        page = None
        sites = context.get_docs_sites_urls(resource_identifier=identifier, site_names=[SITE], only_if_exists=False)
        for site in sites:
            url = site.get("site_url")
            if url and url.startswith("file://"):
                page = Path(unquote(url[len("file://"):]))  # GX percent-encodes the run name

    by_name = {c.name: c for c in checks}
    results = []
    for r in validation.results:
        check = by_name[r.expectation_config.meta["sda_check"]]
        body = r.result or {}
        results.append(CheckResult(
            name=check.name,
            expectation_type=r.expectation_config.type,
            column=check.column,
            severity=check.severity,
            success=bool(r.success),
            unexpected_count=body.get("unexpected_count"),
            element_count=body.get("element_count"),
            observed=_observed(body, r.exception_info),
        ))
    order = {c.name: i for i, c in enumerate(checks)}
    results.sort(key=lambda c: order[c.name])
    return results, identifier, page


def build_docs(settings: "Settings", results: "list[QualityResult]") -> None:
    """Build the Data Docs pages of ``results`` (each validation and its suite) and the site's index,
    in one pass: the index lists every stored validation, so building it once per job rather than
    once per table saves seconds a table."""
    from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

    identifiers = []
    for result in results:
        if result.gx_identifier is not None:
            identifiers += [result.gx_identifier, ExpectationSuiteIdentifier(name=result.suite)]
    if not identifiers:
        return
    root = reports_root(settings)
    with _gx_lock(root):
        _context(root).build_data_docs(site_names=[SITE], resource_identifiers=identifiers)


# --- rows -----------------------------------------------------------------------------------------

def _quarantine_rows(bad: "DataFrame", input_columns: list[str], layer: str, table: str, run_id: str) -> "DataFrame":
    """Failing rows -> ``ops/quarantine`` rows, built from the quarantine schema's field names, so a
    column added there later is filled when the row has it and null otherwise."""
    from pyspark.sql import functions as F

    stage = f"{STAGE}:{layer}.{table}"
    row_json = F.to_json(F.struct(*[F.col(f"`{c}`") for c in input_columns]))
    raw = F.col("payload").cast("binary") if "payload" in input_columns else row_json.cast("binary")
    # content hash: the same bad row in a retried run gets the same key, two different rows never share one
    derived = {
        "quarantine_id": envelope.quarantine_id(stage, F.sha2(row_json, 256)),
        "stage": F.lit(STAGE),
        "reason": F.concat(F.lit(f"{layer}.{table} failed "), F.col("_q_reason")),
        "raw": raw,
        "quarantine_time": F.current_timestamp(),
        "run_id": F.lit(run_id),
    }
    out = []
    for field in TABLES["quarantine"].schema.fields:
        if field.name in derived:
            value = derived[field.name]
        elif field.name in input_columns:
            value = F.col(field.name)
        else:
            value = F.lit(None)
        out.append(value.cast(field.dataType).alias(field.name))
    return bad.select(*out)


def record_results(spark: "SparkSession", settings: "Settings", results: "list[QualityResult]") -> None:
    """One ``ops/data_quality`` row per check of each result, in one write (an append unless a rerun
    of the same run already left rows: then they are replaced, see :func:`sda.pipeline.sinks.write_rows`)."""
    schema = TABLES["data_quality"].schema
    now = dt.datetime.now(dt.timezone.utc)
    rows = [
        {"run_id": q.run_id, "layer": q.layer, "table": q.table, "expectation": r.name,
         "expectation_type": r.expectation_type, "column": r.column, "severity": r.severity, "success": r.success,
         "unexpected_count": None if r.unexpected_count is None else int(r.unexpected_count),
         "element_count": None if r.element_count is None else int(r.element_count),
         "observed": r.observed, "checked_at": now, "suite": q.suite, "data_docs_url": q.data_docs_url}
        for q in results for r in q.checks
    ]
    sinks.write_rows(spark, [tuple(row.get(f.name) for f in schema.fields) for row in rows], "data_quality", settings)


def validate(spark: "SparkSession", settings: "Settings", layer: str, table: str, df: "DataFrame", run_id: str,
             *, uncorrelated_count: int | None = None, write: bool = True, deferred: bool = False) -> QualityResult:
    """Run ``table``'s suite on ``df`` (see the module docstring).

    ``uncorrelated_count``: for ``correlated``, the batch's uncorrelated observations (the correlated
    fraction's denominator); by default the ``uncorrelated`` rows sharing ``df``'s correlate_run_ids.
    ``write=False`` skips both Delta writes (results and Data Docs still produced). ``deferred=True``
    leaves the ``ops/data_quality`` rows and the Data Docs page to the caller, who validates several
    tables and then calls :func:`record_results` and :func:`build_docs` once for all of them.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    spec = TABLES.get(table)
    if spec is None:
        raise KeyError(f"unknown table {table!r}")
    if spec.layer != layer:
        raise ValueError(f"table {table} is in layer {spec.layer}, not {layer}")
    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"run id {run_id!r}: use 1-200 characters from letters, digits and _ . : + -")
    if write:
        ensure_tables(spark, settings, ["data_quality", "quarantine"])

    input_columns = list(df.columns)
    if table == "correlated" and uncorrelated_count is None:
        uncorrelated_count = _uncorrelated_count(spark, settings, df)
    checks = suite_checks(table, settings, input_columns)
    suite_name = f"sda.{layer}.{table}"

    # the reasons per row, computed once: null where every quarantine check passes
    quarantine_checks = [c for c in checks if c.severity == "quarantine"]
    frame = derive(spark, settings, table, df, uncorrelated_count)
    if quarantine_checks:
        reasons = F.concat_ws(", ", *[F.when(~F.coalesce(c.row_ok(), F.lit(True)), F.lit(c.name))
                                      for c in quarantine_checks])
        frame = frame.withColumn("_q_reason", F.when(F.length(reasons) > 0, reasons))
    else:
        frame = frame.withColumn("_q_reason", F.lit(None).cast("string"))
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)

    results, identifier, page = _run_gx(settings, suite_name, table, checks, frame, run_id)
    url = page.resolve().as_uri() if page else None

    passed = frame.where(F.col("_q_reason").isNull()).select(*[F.col(f"`{c}`") for c in input_columns])
    quarantined = _quarantine_rows(frame.where(F.col("_q_reason").isNotNull()), input_columns, layer, table, run_id)
    quarantined_count = _count_and_cross_check(results, quarantine_checks, frame)
    gate = not any(r.severity == "fail" and not r.success for r in results)
    if write and quarantined_count:
        sinks.merge_new(spark, quarantined, "quarantine", settings)
    result = QualityResult(run_id, layer, table, suite_name, results, passed, quarantined, quarantined_count, gate,
                           page, url, time.monotonic() - started, frame, identifier)
    if not deferred:
        build_docs(settings, [result])
        if write:
            record_results(spark, settings, [result])
    log.info("%s", result.summary())
    return result


def _uncorrelated_count(spark: "SparkSession", settings: "Settings", correlated: "DataFrame") -> int:
    """Uncorrelated rows of the same correlation run(s) as ``correlated`` (0 without that table)."""
    from pyspark.sql import functions as F

    from sda.lake.tables import table_exists

    path = TABLES["uncorrelated"].path(settings)
    if "correlate_run_id" not in correlated.columns or not table_exists("uncorrelated", settings):
        return 0
    runs = [r[0] for r in correlated.select("correlate_run_id").distinct().collect() if r[0] is not None]
    if not runs:
        return 0
    return spark.read.format("delta").load(path).where(F.col("correlate_run_id").isin(runs)).count()


def _count_and_cross_check(results: list[CheckResult], checks: list[Check], frame: "DataFrame") -> int:
    """Rows to quarantine; also checks that GX's counts and our row predicates agree (a mismatch is
    logged: the predicates decide which rows go)."""
    from pyspark.sql import functions as F

    failing = [F.sum(F.when(~F.coalesce(c.row_ok(), F.lit(True)), 1).otherwise(0)).alias(c.name) for c in checks]
    row = frame.agg(F.count(F.col("_q_reason")).alias("_q_total"), *failing).first().asDict()
    for r in results:
        if r.name in row and r.unexpected_count is not None and int(row[r.name] or 0) != r.unexpected_count:
            log.warning("check %s: GX counted %s unexpected rows, the row predicate %s", r.name, r.unexpected_count,
                        row[r.name])
    return int(row["_q_total"])


def helper_columns(df: "DataFrame") -> list[str]:
    return [c for c in df.columns if c.startswith(HELPER_PREFIX)]
