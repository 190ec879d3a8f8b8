"""Stage code uses only what a Spark Connect session has (sda.lake.spark): no SparkContext, RDDs,
broadcast variables, ``_jvm`` or Delta's Python ``DeltaTable`` in ``include/`` or ``jobs/``.

The check reads the source (AST), so it finds a forbidden call on any code path, not only the ones a
test happens to run. It is itself tested on snippets that must be refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Attributes of a classic session / DataFrame that a Connect session does not have.
FORBIDDEN_ATTRIBUTES = {"sparkContext", "_jvm", "_jsc", "_jsparkSession", "_jdf", "rdd"}
FORBIDDEN_NAMES = {"SparkContext", "DeltaTable"}
FORBIDDEN_MODULES = ("delta.tables", "pyspark.rdd", "pyspark.context", "py4j")
# sda.lake.spark.resolve_jars starts a throw-away classic session once, at `make setup`, to let Spark's
# Ivy fetch the Delta jars: it is setup, not stage code, and calls none of the above.


def forbidden_calls(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: what`` for every use of a classic-only API in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            found.append(f"{where}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "broadcast"
              and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "F")):
            found.append(f"{where}: .broadcast() (a broadcast variable; F.broadcast, the join hint, is fine)")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{where}: {node.id}")
        elif isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.startswith(FORBIDDEN_MODULES)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(FORBIDDEN_MODULES):
            found.append(f"{where}: from {node.module} import ...")
    return found


@pytest.mark.parametrize("snippet, expected", [
    ("spark.sparkContext.setLogLevel('WARN')", ".sparkContext"),
    ("df.rdd.map(f)", ".rdd"),
    ("sc = spark.sparkContext\nb = sc.broadcast(x)", ".broadcast"),
    ("from delta.tables import DeltaTable\nDeltaTable.forPath(spark, p)", "from delta.tables"),
    ("spark._jvm.org.apache.spark", "._jvm"),
    ("import py4j.java_gateway", "import py4j"),
])
def test_the_check_refuses_classic_only_calls(snippet, expected):
    assert any(expected in hit for hit in forbidden_calls(snippet)), forbidden_calls(snippet)


def test_the_check_allows_the_join_hint_and_pandas_functions():
    ok = "df.join(F.broadcast(small), on='k', how='left').mapInPandas(f, schema)\nspark.sql('MERGE INTO t ...')"
    assert forbidden_calls(ok) == []


def test_include_and_jobs_use_only_spark_connect_apis():
    hits = []
    for folder in ("include", "jobs"):
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            source = path.read_text()
            rel = path.relative_to(PROJECT_ROOT).as_posix()
            if rel == "include/sda/lake/spark.py":  # resolve_jars: the setup-time classic session (see above)
                source = source.replace(source[source.index("def resolve_jars"):source.index("def _artifact")], "")
            hits += forbidden_calls(source, rel)
    assert hits == [], "classic-only Spark APIs in stage code:\n" + "\n".join(hits)
