"""The one Spark session builder (Delta enabled) and the Delta jar cache.

``make setup`` calls :func:`resolve_jars` once: Spark's own Ivy resolver fetches the Delta artifact
and its dependencies from Maven Central into ``var/ivy`` and the jars are copied to
``settings.jars_dir``. From then on every Spark process -- a local session, ``spark-submit`` from
Airflow, the tests -- loads those files with ``spark.jars`` and needs no network.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sda.settings import Settings, load_settings

def _delta_package() -> str:
    # The JVM artifact must match the installed Python package (requirements.txt pins both).
    from importlib.metadata import version

    return f"io.delta:delta-spark_4.1_2.13:{version('delta-spark')}"


DELTA_PACKAGE = _delta_package()

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def session_conf(settings: Settings) -> dict[str, str]:
    """Spark configuration shared by local sessions and spark-submit (the DAG passes it as ``conf``)."""
    conf = dict(DELTA_CONF)
    conf.update(
        {
            "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.ui.showConsoleProgress": "false",
            "spark.databricks.delta.schema.autoMerge.enabled": "false",
            # Delta rebuilds a table's snapshot with 50 tasks by default: far too many for the small
            # per-run batches of a micro-batch pipeline on a few cores (delta-io's own test setup does this too).
            "spark.databricks.delta.snapshotPartitions": str(max(2, settings.shuffle_partitions)),
            "spark.sql.adaptive.coalescePartitions.enabled": "true",
            # Delta's optimistic commits retry on their own; keep the retention check on.
            "spark.databricks.delta.retentionDurationCheck.enabled": "true",
        }
    )
    return conf


def build_session(app_name: str, settings: Settings | None = None, extra: dict[str, str] | None = None) -> "SparkSession":
    """A Spark session with Delta, on ``settings.spark_master``.

    Inside ``spark-submit`` the master and jars come from the submit command and the builder only
    adds what is still unset.
    """
    from pyspark.sql import SparkSession

    settings = settings or load_settings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if "SPARK_ENV_LOADED" not in os.environ and not os.environ.get("SPARK_SUBMIT_OPTS"):
        builder = builder.master(settings.spark_master)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    jars = settings.spark_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    else:
        builder = builder.config("spark.jars.packages", DELTA_PACKAGE)
        builder = builder.config("spark.jars.ivy", str(settings.jars_dir.parent / "ivy"))
    builder = builder.config("spark.driver.memory", settings.driver_memory)
    builder = builder.config("spark.ui.enabled", os.environ.get("SDA_SPARK_UI", "false"))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def resolve_jars(settings: Settings | None = None) -> list[Path]:
    """Fetch the Delta jars once (Maven Central through Spark's Ivy) and cache them in ``jars_dir``."""
    from pyspark.sql import SparkSession

    settings = settings or load_settings()
    existing = settings.spark_jars()
    if any("delta-spark" in Path(j).name for j in existing):
        return [Path(j) for j in existing]
    ivy = settings.jars_dir.parent / "ivy"
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("sda-resolve-jars")
        .config("spark.jars.packages", DELTA_PACKAGE)
        .config("spark.jars.ivy", str(ivy))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.stop()
    settings.jars_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    shipped = {_artifact(p.name) for p in _spark_home_jars()}
    for jar in sorted((ivy / "jars").glob("*.jar")):
        # Spark already ships newer builds of jackson, parquet, hadoop, log4j...: older copies from
        # Delta's dependency tree would only shadow them.
        if _artifact(jar.name.split("_", 1)[-1]) in shipped:
            continue
        target = settings.jars_dir / jar.name
        shutil.copy2(jar, target)
        copied.append(target)
    if not any("delta-spark" in p.name for p in copied):
        raise RuntimeError(f"Delta jars were not resolved into {ivy / 'jars'}; is Maven Central reachable?")
    return copied


def _artifact(jar_name: str) -> str:
    """'jackson-core-2.13.5.jar' -> 'jackson-core'."""
    stem = jar_name.removesuffix(".jar")
    parts = stem.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def _spark_home_jars() -> list[Path]:
    import pyspark

    return list((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


if __name__ == "__main__":  # python -m sda.spark
    for path in resolve_jars():
        print(path)
