"""One settings object for the whole pipeline.

Every value has an embedded default (local Spark, a Delta directory under ``var/``, simulated
sensors) and an ``SDA_*`` environment-variable override. Values are parsed and validated when the
settings are loaded; a bad value raises :class:`SettingsError` naming the variable, the value and
what was expected, so a typo never turns into a silent default.

Path settings (``SDA_LAKEHOUSE``, ``SDA_LANDING``, ``SDA_OUTBOX``, ``SDA_CATALOG_FILE``,
``SDA_JARS_DIR``, and ``Path`` overrides alike) are resolved (``~``, ``..``, symlinks; relative to the
project) and refused when they hold NUL bytes or control characters; the places the pipeline writes
to may be neither ``/`` nor a system directory (``sda.config.paths.SYSTEM_DIRS``) unless inside the project;
the lakehouse path, quoted into Delta SQL, may not hold `` ` ' " ; ``; and the lakehouse, landing
zone and outbox may not contain one another (see :mod:`sda.config.paths`).

This module imports nothing heavy: DAG files read it at parse time.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sda.config.errors import SettingsError


def _project_root() -> Path:
    """The project directory: ``SDA_HOME`` when set, else three levels above this module
    (``include/sda/config``). Spark
    executors and a ``spark-submit`` driver may import ``sda`` from the shipped zip
    (:mod:`sda.lake.dist`), whose location says nothing about the project: jobs get ``SDA_HOME``."""
    home = os.environ.get("SDA_HOME")
    return Path(home).resolve() if home else Path(__file__).resolve().parents[3]


PROJECT_ROOT = _project_root()
ENV_PREFIX = "SDA_"
# SDA_* variables that steer tools rather than the pipeline (scripts/run.sh, the Spark UI switch and port, the log
# format of a stage run by hand, the fault injection of sda.pipeline.faults.checkpoint):
# allowed alongside the settings, so only a misspelt setting is refused.
CONTROL_VARIABLES = frozenset({"SDA_HOME", "SDA_EXIT_AFTER_RUN", "SDA_SPARK_UI", "SDA_SPARK_UI_PORT", "SDA_LOG_FORMAT",
                               "SDA_KILL_AT", "SDA_TEST_CONNECT_PORT", "SDA_TEST_AIRFLOW_DB", "SDA_TEST_TIMELINE",
                               "SDA_TEST_STAGES"})


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise SettingsError(f"{name}={raw!r}: expected a positive finite number")
    return value


def _bool(name: str, raw: str) -> bool:
    """true/false (also yes/no, 1/0, on/off; any case)."""
    value = raw.strip().lower()
    if value in ("true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise SettingsError(f"{name}={raw!r}: expected true or false")


def _non_negative_float(name: str, raw: str) -> float:
    """A finite number >= 0 (0: a retention that keeps everything)."""
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected a number") from None
    if not 0 <= value < float("inf"):
        raise SettingsError(f"{name}={raw!r}: expected a finite number >= 0 (0 keeps every file)")
    return value


def _optional_positive_float(name: str, raw: str) -> float | None:
    """Empty (or ``None``) is unset; anything else a positive finite number."""
    return None if raw.strip() in ("", "None") else _positive_float(name, raw)


def _optional_file(name: str, raw: str) -> Path | None:
    """Empty (or ``None``) is unset; anything else the path of a file that exists."""
    if raw.strip() in ("", "None"):
        return None
    path = _path(name, raw)
    if not path.is_file():
        raise SettingsError(f"{name}={raw!r}: no such file")
    return path


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected a whole number") from None
    if value <= 0:
        raise SettingsError(f"{name}={raw!r}: expected a whole number above 0")
    return value


SIM_OBJECTS_MAX = 29900  # sda.orbit.catalog.synthetic numbers objects 70000..99899


def _sim_objects(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > SIM_OBJECTS_MAX:
        raise SettingsError(
            f"{name}={raw!r}: expected at most {SIM_OBJECTS_MAX} objects (the generator's NORAD id range)")
    return value


def _probability(name: str, raw: str) -> float:
    value = _positive_float(name, raw)
    if value > 1:
        raise SettingsError(f"{name}={raw!r}: expected a probability in (0, 1]")
    return value


# \Z: '$' would let a trailing newline through
_MASTER_RE = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?"
                        r"|spark://[A-Za-z0-9.\-]+:\d+(,[A-Za-z0-9.\-]+:\d+)*"
                        r"|yarn|k8s://\S+)\Z")


def _matching(pattern: re.Pattern[str], expected: str) -> Callable[[str, str], str]:
    """A parser that keeps a value matching ``pattern`` and refuses any other, saying what was expected."""
    def parse(name: str, raw: str) -> str:
        if not pattern.match(raw):
            raise SettingsError(f"{name}={raw!r}: expected {expected}")
        return raw

    return parse


_spark_master = _matching(_MASTER_RE, "a Spark master URL such as local[2], spark://host:7077, yarn or k8s://...")


def _path(name: str, raw: str) -> Path:
    """A directory or file path: ``~`` expanded, relative to the project, resolved (``..`` and
    symlinks). NUL bytes, newlines and other control characters are refused."""
    from sda.config.paths import check_text

    if not raw.strip():
        raise SettingsError(f"{name} is empty: expected a directory path")
    check_text(name, raw)
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = PROJECT_ROOT / path
    return path.resolve()


def _data_path(name: str, raw: str) -> Path:
    """A location the pipeline writes to: as :func:`_path`, and neither ``/`` nor a system directory
    (``sda.config.paths.SYSTEM_DIRS``) unless inside the project itself."""
    from sda.config.paths import refuse_system_dir

    return refuse_system_dir(name, _path(name, raw), raw, allow_under=(PROJECT_ROOT,))


def _lakehouse_path(name: str, raw: str) -> Path:
    """The lakehouse root: as :func:`_data_path`, and free of the characters that could end a quoted
    SQL name or string (its table paths are quoted into Delta SQL, e.g. ``VACUUM delta.`<path>```)."""
    from sda.config.paths import check_text

    check_text(name, raw, sql=True)
    path = _data_path(name, raw)
    check_text(name, str(path), sql=True)  # the resolved path too: a symlink could bring the characters in
    return path


_MEMORY_RE = re.compile(r"^[1-9]\d*[kmgt]\Z", re.IGNORECASE)
_memory = _matching(_MEMORY_RE, "a JVM memory size such as 2g or 1536m")
_HOST_RE = re.compile(r"^(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?\Z")
_host = _matching(_HOST_RE, "a host name or IPv4 address such as 127.0.0.1 or spark-connect")


def _port(name: str, raw: str) -> int:
    value = _positive_int(name, raw)
    if value > 65535:
        raise SettingsError(f"{name}={raw!r}: expected a TCP port from 1 to 65535")
    return value


_ORIGINATOR_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}\Z")


_cdm_originator = _matching(_ORIGINATOR_RE,
                            "1-40 letters, digits, '_', '.' or '-' (it goes into CDM headers and file names)")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Validated configuration. Build with :func:`load_settings`; never mutate."""

    # where things live
    lakehouse: Path = PROJECT_ROOT / "var" / "lakehouse"
    landing: Path = PROJECT_ROOT / "var" / "landing"
    outbox: Path = PROJECT_ROOT / "var" / "outbox"
    jars_dir: Path = PROJECT_ROOT / "var" / "jars"
    catalog_file: Path = PROJECT_ROOT / "var" / "catalog" / "catalog.tle"
    # the catalogue's states on the incremental screening's grid, on the Spark server's disk
    # (sda.orbit.screening.ephemeris; a cache: removing it costs one slower screening, never a result)
    ephemeris_cache: Path = PROJECT_ROOT / "var" / "ephemeris"
    # compute
    spark_master: str = "local[2]"  # the Spark Connect server's master
    shuffle_partitions: int = 4
    driver_memory: str = "2g"  # the Spark Connect server's driver (with local[N], all of Spark's) memory
    connect_host: str = "127.0.0.1"  # where clients reach the Spark Connect server (sda.lake.server)
    connect_port: int = 15002
    connect_bind: str = "127.0.0.1"  # the address the server listens on (compose: 0.0.0.0 inside its network)
    # Spark Connect secured (docker-compose.yaml): the CA that signed its TLS proxy's certificate (clients then speak
    # TLS, trusting that CA alone), and the file of the pre-shared token the server requires and clients present
    connect_tls_ca: Path | None = None
    connect_token_file: Path | None = None
    # where the local Airflow (API server, task log servers: sda.orchestration.local_stack) listens;
    # 0.0.0.0 offers the UI and the task logs to the network, on purpose only
    bind_host: str = "127.0.0.1"
    # orchestration
    cadence_minutes: int = 15
    replay_max_hours: float = 168.0  # the longest event-time range one replay or backfill may recompute
    # event time
    dedup_window_s: float = 10.0
    allowed_lateness_s: float = 3600.0  # watermark = newest event time seen from a sensor minus this
    idle_source_s: float = 21600.0  # a sensor this far (event time) behind the newest one holds no window open
    pass_gap_s: float = 600.0  # a sensor's pass over an object ends after this gap (session window)
    state_window_s: float = 3600.0  # per-object catalogue-state window (fixed, event time)
    clock_skew_s: float = 300.0
    # ingest: new files go to bronze in ledger batches of at most this many MB of file bytes, so the
    # client holds one batch in memory whatever the backlog (a file larger than it is a batch alone)
    ingest_batch_mb: float = 256.0
    # correlation
    correlation_gate_km: float = 50.0
    # the sensors' radar ranges and angles and optical angles carry light time, as real sensors (and the simulator's
    # harsher skies, its default) report them (sda.orbit.estimation.measurements); false: geometric measurements, as
    # the simulator's kinder sky (`sda simulate --sky kind`) reports them (or a provider that corrected them)
    light_time: bool = True
    # None: each candidate's covariance from sda.orbit.uncertainty; a number: that fixed isotropic 1-sigma instead
    correlation_prediction_sigma_m: float | None = None
    # orbit determination (jobs/fuse.py, sda.orbit.fusion.arcs): the event-time arc of one fit, and by how much
    # a fused orbit's screening element set must stray from its new prediction before it is renewed
    fusion_arc_h: float = 6.0
    fusion_renew_m: float = 500.0
    # the sensors' remaining biases carried in each fit's covariance as consider parameters of this many times
    # their nominal sigmas (sda.orbit.estimation.bias_consider); 0: the noise alone (the kinder sky's sensors).
    # 0.3: chosen on development seed 1 (harsher sky, 50 LEO objects refitted): 0.94 of the errors inside the 95 %
    # ellipsoid at the run's end, against 0.88 without and 1.00 at the nominal sigmas
    sensor_bias_consider: float = 0.3
    # which fused orbits the screening, the assessment and correlation use (sda.lake.orbits.newest_fused_orbits):
    # none older than fusion_max_age_h before the screening's start (the catalogue's element set is used, as for an
    # object never fused), none fitted over a shorter arc than fusion_min_span_s (epoch - first observation): one
    # pass determines the along-track motion worse than a fresh element set does, and the fuse stage fits no
    # screening element set to a shorter fit
    fusion_max_age_h: float = 48.0
    fusion_min_span_s: float = 5400.0
    # new objects (jobs/acquire.py, sda.orbit.acquisition.search): the event time searched back from the newest held
    # observation, how long a provisional object may go unseen before it is retired, and how close a
    # catalogued object's element set must follow it to merge it
    acquire_lookback_h: float = 24.0
    acquire_retire_h: float = 12.0
    acquire_merge_km: float = 25.0
    # conjunction screening
    screening_horizon_h: float = 24.0
    screening_step_s: float = 30.0  # grid step: 30 s is the cheapest for a LEO-crowded catalogue (bench/screening.py)
    screening_threshold_km: float = 5.0
    alert_distance_km: float = 1.0
    pc_red: float = 1e-4
    pc_yellow: float = 1e-7
    # an event is a yellow alert when the probability that its miss is under alert_distance_km, from the pair's
    # covariance, is at least this (sda.alerts.assessment.judge)
    alert_miss_probability: float = 0.05
    hard_body_radius_m: float = 20.0
    alert_tca_tolerance_s: float = 120.0  # an event belongs to an open alert of the same pair within this TCA shift
    cdm_originator: str = "SDA-FUSION"
    uncertainty_min_sigma_m: float = 10.0  # floor per axis of an observed object's position sigma
    # simulation: objects in the catalogue sda.orbit.catalog.synthetic generates (sda simulate, sda catalog generate,
    # make run)
    sim_objects: int = 300
    # table upkeep (jobs/maintenance.py)
    vacuum_retention_h: float = 168.0  # VACUUM keeps files this long at least (and longer for a lagging consumer)
    # the files beside the tables (sda.pipeline.retention; 0 keeps them all): landed files once ingested,
    # the outbox's CDMs, Airflow's task logs
    landing_retention_h: float = 72.0
    outbox_retention_h: float = 720.0
    log_retention_h: float = 168.0

    def table_path(self, name: str) -> str:
        """The storage location of a registered table (see :mod:`sda.lake.tables`)."""
        return str(self.lakehouse / name)

    @property
    def connect_url(self) -> str:
        """The Spark Connect URL clients use (``sc://host:port``)."""
        return f"sc://{self.connect_host}:{self.connect_port}"

    def connect_token(self) -> str | None:
        """The Spark Connect token (the first line of ``connect_token_file``), or None when none is set."""
        if self.connect_token_file is None:
            return None
        token = self.connect_token_file.read_text().strip()
        if not token or any(c.isspace() for c in token):
            raise SettingsError(f"SDA_CONNECT_TOKEN_FILE={str(self.connect_token_file)!r}: expected one token, "
                                "no spaces")
        return token

    def spark_jars(self) -> list[str]:
        """The Delta jars resolved by ``make setup`` (empty until then)."""
        if not self.jars_dir.is_dir():
            return []
        return sorted(str(p) for p in self.jars_dir.glob("*.jar"))

    def as_env(self) -> dict[str, str]:
        """The ``SDA_*`` variables that reproduce these settings in a child process."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:  # unset stays unset (the child gets the same default)
                out[ENV_PREFIX + field.name.upper()] = str(value)
        return out


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "lakehouse": _lakehouse_path,
    "landing": _data_path,
    "outbox": _data_path,
    "jars_dir": _path,  # read only (the Delta jars)
    "catalog_file": _data_path,
    "ephemeris_cache": _data_path,
    "spark_master": _spark_master,
    "alert_tca_tolerance_s": _positive_float,
    "correlation_prediction_sigma_m": _optional_positive_float,
    "cdm_originator": _cdm_originator,
    "light_time": _bool,
    "uncertainty_min_sigma_m": _positive_float,
    "shuffle_partitions": _positive_int,
    "driver_memory": _memory,
    "connect_host": _host,
    "connect_port": _port,
    "connect_bind": _host,
    "connect_tls_ca": _optional_file,
    "connect_token_file": _optional_file,
    "bind_host": _host,
    "cadence_minutes": _positive_int,
    "replay_max_hours": _positive_float,
    "dedup_window_s": _positive_float,
    "allowed_lateness_s": _positive_float,
    "idle_source_s": _positive_float,
    "pass_gap_s": _positive_float,
    "state_window_s": _positive_float,
    "clock_skew_s": _positive_float,
    "ingest_batch_mb": _positive_float,
    "correlation_gate_km": _positive_float,
    "screening_horizon_h": _positive_float,
    "fusion_arc_h": _positive_float,
    "fusion_renew_m": _positive_float,
    "sensor_bias_consider": _non_negative_float,
    "fusion_max_age_h": _positive_float,
    "fusion_min_span_s": _positive_float,
    "acquire_lookback_h": _positive_float,
    "acquire_retire_h": _positive_float,
    "acquire_merge_km": _positive_float,
    "screening_step_s": _positive_float,
    "screening_threshold_km": _positive_float,
    "alert_distance_km": _positive_float,
    "pc_red": _probability,
    "pc_yellow": _probability,
    "alert_miss_probability": _probability,
    "hard_body_radius_m": _positive_float,
    "vacuum_retention_h": _positive_float,
    "landing_retention_h": _non_negative_float,
    "outbox_retention_h": _non_negative_float,
    "log_retention_h": _non_negative_float,
    "sim_objects": _sim_objects,
}


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from defaults, then ``SDA_*`` variables in ``env`` (default ``os.environ``), then
    keyword ``overrides`` (already-typed values, e.g. from tests)."""
    env = os.environ if env is None else env
    known = {ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings)}
    unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known and k not in CONTROL_VARIABLES)
    if unknown:
        raise SettingsError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Settings):
        var = ENV_PREFIX + field.name.upper()
        if var in env:
            values[field.name] = _PARSERS[field.name](var, env[var])
    for key, value in overrides.items():
        if key not in _PARSERS:
            raise SettingsError(f"unknown setting {key!r}")
        if isinstance(value, Path):  # as before: a relative Path is taken from the current directory
            value = value.expanduser().resolve()
        values[key] = _PARSERS[key](key, str(value))
    settings = Settings(**values)
    _check_consistency(settings)
    return settings


# Roots that must not contain one another: ingest would read Delta files as sensor files, VACUUM
# could delete landed files, CDMs would land among the tables, the ephemeris cache would be ingested.
SEPARATE_ROOTS = ("lakehouse", "landing", "outbox", "ephemeris_cache")


def _check_consistency(s: Settings) -> None:
    for i, a in enumerate(SEPARATE_ROOTS):
        for b in SEPARATE_ROOTS[i + 1:]:
            pa, pb = getattr(s, a), getattr(s, b)
            if pa == pb or pa.is_relative_to(pb) or pb.is_relative_to(pa):
                va, vb = ENV_PREFIX + a.upper(), ENV_PREFIX + b.upper()
                if pa == pb:
                    how = "is the same directory as"
                else:
                    how = "lies inside" if pa.is_relative_to(pb) else "contains"
                raise SettingsError(
                    f"{va}={str(pa)!r} {how} {vb}={str(pb)!r}: the lakehouse, the landing zone, the outbox "
                    "and the ephemeris cache must be separate directories, none inside another"
                )
    if s.pc_yellow > s.pc_red:
        raise SettingsError(
            f"SDA_PC_YELLOW={s.pc_yellow} is above SDA_PC_RED={s.pc_red}: yellow must be the lower threshold")
    if s.alert_distance_km > s.screening_threshold_km:
        raise SettingsError(
            f"SDA_ALERT_DISTANCE_KM={s.alert_distance_km} exceeds "
            f"SDA_SCREENING_THRESHOLD_KM={s.screening_threshold_km}: "
            "an alert distance must lie inside the screening threshold"
        )
    if s.state_window_s % s.dedup_window_s or s.state_window_s < s.dedup_window_s:
        raise SettingsError(
            f"SDA_STATE_WINDOW_S={s.state_window_s} is not a whole multiple of SDA_DEDUP_WINDOW_S={s.dedup_window_s}: "
            "dedup windows must nest inside state windows, or a final state window could be re-fired"
        )
    if s.vacuum_retention_h < 24:
        raise SettingsError(f"SDA_VACUUM_RETENTION_H={s.vacuum_retention_h}: "
                            "at least 24 hours, so no change-feed reader loses its files")
    if s.screening_step_s > 600:
        raise SettingsError(f"SDA_SCREENING_STEP_S={s.screening_step_s}: at most 600 s, or close approaches are missed")
