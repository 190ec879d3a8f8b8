from sda.lake import schemas
from sda.lake.tables import BRONZE_BY_KIND, TABLES, ensure_tables


def test_every_table_has_change_data_feed_and_its_key_in_its_schema():
    for spec in TABLES.values():
        assert spec.properties["delta.enableChangeDataFeed"] == "true", spec.name
        names = {f.name for f in spec.schema.fields}
        assert set(spec.key) <= names, spec.name
        assert set(spec.partition_by) <= names, spec.name
        assert spec.append_only or spec.key, f"{spec.name}: a mutable table needs a key for idempotent writes"


def test_layers_and_bronze_kinds():
    assert {s.layer for s in TABLES.values()} == {"ops", "bronze", "silver", "gold"}
    assert set(BRONZE_BY_KIND) == set(schemas.SENSOR_KINDS)
    assert all(spec.layer == "bronze" and spec.append_only for spec in BRONZE_BY_KIND.values())


def test_every_table_carries_event_or_ingest_time():
    for name in ("observations", "observations_dedup", "correlated", "uncorrelated"):
        assert "event_time" in TABLES[name].schema.fieldNames()
    for spec in BRONZE_BY_KIND.values():
        assert "ingest_time" in spec.schema.fieldNames()


def test_ensure_tables_is_idempotent_and_enables_cdf(spark, settings):
    ensure_tables(spark, settings, ["observations", "progress"])
    ensure_tables(spark, settings, ["observations", "progress"])
    path = TABLES["observations"].path(settings)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
    assert props["delta.enableChangeDataFeed"] == "true"
    assert spark.read.format("delta").load(path).schema == TABLES["observations"].schema
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert list(detail["partitionColumns"]) == ["event_date"]


class _FlakyCreate:
    """A session whose first CREATE fails the way a concurrent creator makes it fail."""

    def __init__(self, message: str):
        self.message, self.calls = message, 0

    def sql(self, statement):
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError(self.message)
        return self

    def collect(self):
        return []


def test_a_create_racing_another_creator_is_retried(monkeypatch):
    """Catalog and ingest create a fresh lakehouse's tables at the same moment (the compose stack's
    first run): the loser sees the winner's _delta_log before its first commit, and tries again."""
    from sda.lake import tables

    monkeypatch.setattr("time.sleep", lambda s: None)
    racing = _FlakyCreate("[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table ... is not empty "
                          "and also not a Delta table.")
    tables._create_with_retry(racing, "CREATE TABLE IF NOT EXISTS ...", "ops.late_data")
    assert racing.calls == 2
    other = _FlakyCreate("[PARSE_SYNTAX_ERROR] Syntax error")
    try:
        tables._create_with_retry(other, "CREATE TABLE nonsense", "ops.late_data")
    except RuntimeError as exc:
        assert "PARSE_SYNTAX_ERROR" in str(exc) and other.calls == 1
    else:
        raise AssertionError("an error that is not a race was retried")
