from pathlib import Path

import pytest

from sda.config.settings import PROJECT_ROOT, SettingsError, load_settings


def test_defaults_are_local_and_embedded():
    s = load_settings(env={})
    assert s.spark_master == "local[2]"
    assert s.lakehouse == PROJECT_ROOT / "var" / "lakehouse"
    assert s.screening_threshold_km == 5.0 and s.screening_horizon_h == 24.0
    assert s.pc_red == 1e-4 and s.pc_yellow == 1e-7


def test_environment_overrides_are_parsed():
    s = load_settings(env={"SDA_SPARK_MASTER": "spark://spark-master:7077", "SDA_CADENCE_MINUTES": "5",
                           "SDA_LAKEHOUSE": "/data/lake", "SDA_LANDING": "rel/landing"})
    assert s.spark_master == "spark://spark-master:7077"
    assert s.cadence_minutes == 5
    assert s.lakehouse == Path("/data/lake")
    assert s.landing == PROJECT_ROOT / "rel" / "landing"  # relative paths are project-relative


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SDA_CADENCE_MINUTES": "fifteen"}, "SDA_CADENCE_MINUTES='fifteen': expected a whole number"),
        ({"SDA_CADENCE_MINUTES": "0"}, "above 0"),
        ({"SDA_SCREENING_THRESHOLD_KM": "-5"}, "positive finite"),
        ({"SDA_SCREENING_THRESHOLD_KM": "nan"}, "positive finite"),
        ({"SDA_PC_RED": "2"}, "probability"),
        ({"SDA_SPARK_MASTER": "local[two]"}, "Spark master URL"),
        ({"SDA_PC_RED": "1e-8"}, "yellow must be the lower threshold"),
        ({"SDA_ALERT_DISTANCE_KM": "9"}, "inside the screening threshold"),
        ({"SDA_LAKEHOUS": "/tmp/x"}, "unknown setting(s) SDA_LAKEHOUS"),
        ({"SDA_LANDING": "  "}, "is empty"),
    ],
)
def test_bad_values_are_refused_with_a_clear_message(env, message):
    with pytest.raises(SettingsError) as err:
        load_settings(env=env)
    assert message in str(err.value)


def test_as_env_round_trips():
    s = load_settings(env={"SDA_CADENCE_MINUTES": "7", "SDA_PC_YELLOW": "1e-6"})
    assert load_settings(env=s.as_env()) == s


def test_control_variables_are_not_mistaken_for_settings():
    s = load_settings(env={"SDA_EXIT_AFTER_RUN": "1", "SDA_SPARK_UI": "true", "SDA_CADENCE_MINUTES": "5"})
    assert s.cadence_minutes == 5


def test_sim_objects_setting_sizes_the_generated_catalogue():
    from sda.config.settings import SettingsError, load_settings

    assert load_settings(env={}).sim_objects == 300
    assert load_settings(env={"SDA_SIM_OBJECTS": "13000"}).sim_objects == 13000
    for bad in ("0", "-5", "many", "30000"):
        with pytest.raises(SettingsError, match="SDA_SIM_OBJECTS"):
            load_settings(env={"SDA_SIM_OBJECTS": bad})


def test_fusion_policy_settings_default_and_are_validated():
    s = load_settings(env={})
    assert (s.fusion_max_age_h, s.fusion_min_span_s) == (48.0, 5400.0)
    s = load_settings(env={"SDA_FUSION_MAX_AGE_H": "12", "SDA_FUSION_MIN_SPAN_S": "3600"})
    assert (s.fusion_max_age_h, s.fusion_min_span_s) == (12.0, 3600.0)
    for var in ("SDA_FUSION_MAX_AGE_H", "SDA_FUSION_MIN_SPAN_S"):
        for bad in ("0", "-1", "nan", "soon"):
            with pytest.raises(SettingsError, match=var):
                load_settings(env={var: bad})
