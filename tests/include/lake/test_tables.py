from sda.lake import schemas
from sda.lake.tables import BRONZE_BY_KIND, BRONZE_BY_LANDING_KIND, TABLES, ensure_tables


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
    # every landing kind has its bronze table; space weather is no observation kind (normalize does not read it)
    assert schemas.LANDING_KINDS == ("radar", "optical", "isl", "tdm", "space_weather")
    assert BRONZE_BY_LANDING_KIND["space_weather"].name == "space_weather_lines"
    assert set(BRONZE_BY_LANDING_KIND) == set(schemas.LANDING_KINDS) == set(schemas.LANDING_SUFFIX)
    assert all(spec.layer == "bronze" and spec.append_only for spec in BRONZE_BY_LANDING_KIND.values())


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


def test_statistics_are_kept_for_the_listed_columns_only_and_an_older_table_is_brought_up_to_date(spark, settings):
    """The observation tables keep per-file min/max of the columns reads filter by, not of all 25
    (each costs every written row); a table created before that setting gets it from the maintenance job."""
    import json
    from pathlib import Path

    from pyspark.sql import functions as F

    from sda.lake.tables import create_statement, sync_properties

    spec = TABLES["observations"]
    assert spec.properties["delta.dataSkippingStatsColumns"] == "sensor_id,event_time,ingest_batch"
    for name in spec.properties["delta.dataSkippingStatsColumns"].split(","):
        assert name in spec.schema.fieldNames()
    old = create_statement(spec, settings).replace(", 'delta.dataSkippingStatsColumns' = "
                                                   "'sensor_id,event_time,ingest_batch'", "")
    assert "dataSkippingStatsColumns" not in old
    spark.sql(old).collect()
    path = spec.path(settings)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
    assert sync_properties(spark, settings, "observations", props) == {
        "delta.dataSkippingStatsColumns": "sensor_id,event_time,ingest_batch"}
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
    assert sync_properties(spark, settings, "observations", props) == {}

    row = spark.sql("SELECT 'o1' AS obs_id, 'S' AS sensor_id, 'radar' AS sensor_kind, "
                    "TIMESTAMP'2026-11-20 06:00:00' AS event_time, DATE'2026-11-20' AS event_date, "
                    "TIMESTAMP'2026-11-20 06:01:00' AS ingest_time, 7L AS ingest_batch, 1e6D AS range_m, "
                    "'b1' AS bronze_id, 'f' AS source_file, 'r' AS run_id")
    full = row.select(*[(row[f.name] if f.name in row.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                        for f in spec.schema.fields])
    full.write.format("delta").mode("append").save(path)
    commits = sorted((Path(path) / "_delta_log").glob("*.json"))
    adds = [json.loads(line)["add"] for line in commits[-1].read_text().splitlines() if '"add"' in line]
    stats = json.loads(adds[0]["stats"])
    assert stats["numRecords"] == 1
    assert set(stats["minValues"]) == {"sensor_id", "event_time", "ingest_batch"}
