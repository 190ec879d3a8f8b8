import numpy as np

from sda.orbit.sensors import Sensor, load_sensors


def test_embedded_registry_has_all_kinds_with_noise():
    sensors = load_sensors()
    kinds = {s.kind for s in sensors.values()}
    assert kinds == {"radar", "optical", "isl"}
    for s in sensors.values():
        if s.kind == "radar":
            assert s.sigma_range_m and s.sigma_angle_deg and s.max_range_km and s.lat_deg is not None
        if s.kind == "optical":
            assert s.sigma_angle_deg and s.min_el_deg >= 10
        if s.kind == "isl":
            assert s.sigma_pos_m and s.lat_deg is None


def test_field_of_regard_sector_wrapping_through_north():
    s = Sensor("X", "radar", "x", 0, 0, 0, min_el_deg=3, az_min_deg=347, az_max_deg=227, max_range_km=5000)
    az = np.deg2rad([0, 100, 227, 250, 300, 346, 347, 359])
    ok = s.in_field_of_regard(az, np.deg2rad(np.full(8, 10.0)))
    assert ok.tolist() == [True, True, True, False, False, False, True, True]
    assert not s.in_field_of_regard(np.deg2rad([10.0]), np.deg2rad([2.0]))[0]  # below the mask
    assert not s.in_field_of_regard(np.deg2rad([10.0]), np.deg2rad([10.0]), np.array([6000.0]))[0]


def test_field_of_regard_plain_sector_and_full_circle():
    south = Sensor("E", "radar", "e", 0, 0, 0, az_min_deg=120, az_max_deg=240)
    assert south.in_field_of_regard(np.deg2rad([119, 120, 180, 240, 241]), np.full(5, 0.5)).tolist() == [
        False, True, True, True, False]
    full = Sensor("F", "radar", "f", 0, 0, 0, az_min_deg=0, az_max_deg=360)
    assert full.in_field_of_regard(np.deg2rad([0, 90, 359.9]), np.full(3, 0.5)).all()


def test_reads_the_resonaate_site_file(shared_data):
    sensors = load_sensors(shared_data / "sensors" / "resonaate_ssn_sigmas.csv")
    eglin = next(s for s in sensors.values() if s.name.startswith("Eglin"))
    assert eglin.kind == "radar" and abs(eglin.lat_deg - 30.57222) < 1e-6
    assert abs(eglin.sigma_range_m - 30.0) < 1e-9 and abs(eglin.sigma_angle_deg - 0.0154) < 1e-9
    assert any(s.kind == "optical" for s in sensors.values())


def test_sensor_aliases_resolve_ids_registry_names_and_designations():
    from sda.orbit.sensors import name_key, sensor_aliases

    aliases = sensor_aliases()
    assert name_key("Cape Cod") == name_key("CAPE-COD") == name_key(" cape_cod ") == "CAPE COD"
    for name, sensor_id in [("EGLIN", "EGLIN"), ("Eglin AN/FPS-85", "EGLIN"), ("AN/FPS-85", "EGLIN"),
                            ("Cape Cod", "CAPECOD"), ("GEODSS Socorro", "SOCORRO"), ("Pituffik", "THULE"),
                            ("isl-01", "ISL-01")]:
        assert aliases[name_key(name)] == sensor_id, name
    assert name_key("DSS-25") not in aliases


def test_a_name_two_sensors_share_is_not_resolved():
    from sda.orbit.sensors import name_key, sensor_aliases

    registry = {"A": Sensor("A", "radar", "Twin Site"), "B": Sensor("B", "radar", "Twin Site")}
    aliases = sensor_aliases(registry)
    assert aliases[name_key("Twin Site")] is None and aliases["A"] == "A"
    assert name_key("Eglin") not in aliases  # the embedded aliases of sensors this registry lacks
