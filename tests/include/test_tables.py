from sda import schemas
from sda.tables import BRONZE_BY_KIND, TABLES, ensure_tables


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
