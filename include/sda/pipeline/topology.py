"""The operator graph of the pipeline, top to bottom: the one place to read the architecture.

Each :class:`Stage` is one job (``jobs/<name>.py``, a client of the Spark Connect server) and one
Airflow task. For every stage this module records what it reads and writes (table names from
:mod:`sda.lake.tables`), the operators it applies, whether its input edge is keyed (a hash shuffle)
and by what, and what state it keeps between runs. ``dags/sda_pipeline.py`` builds its tasks and
dependencies from :data:`STAGES` and its ``doc_md`` from :func:`markdown`; the README's diagram is
:func:`mermaid` (a test keeps it up to date). Every other list of stages (the CLI's, the replay's, the
benchmarks', the README's folder map) is taken from :func:`stage_names`, :func:`stages_upto`,
:func:`stages_from` or :func:`stages_between`, never written out.

Every stage that consumes a table's change feed records the last Delta version it consumed in
``ops.progress`` (see :mod:`sda.pipeline.runtime`), so a retried or late run resumes where the last one
stopped; that cursor is not repeated per stage below.

This module imports nothing heavy: the DAG file reads it at parse time. Table names are plain
strings here and a test checks them against the registry.
"""

from __future__ import annotations

import dataclasses

OPERATOR_KINDS = ("map", "filter", "flatMap", "fold", "window", "join")
LANDING = "landing"  # external source: sensor and space-weather files under settings.landing
CATALOG_FILE = "catalog_file"  # external source: a TLE/OMM file (settings.catalog_file)
OUTBOX = "outbox"  # external sink: alert CDMs and manoeuvre OPMs (CCSDS KVN), JSON twins, withdrawals; settings.outbox


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    summary: str
    upstream: tuple[str, ...]  # stages that must finish first (Airflow dependencies)
    inputs: tuple[str, ...]  # tables (or LANDING / CATALOG_FILE) read
    outputs: tuple[str, ...]  # tables (or OUTBOX) written
    operators: tuple[str, ...]  # operator kinds, in the order they apply
    key: tuple[str, ...] = ()  # what the keyed (shuffled) edge into the stage partitions by
    broadcast: tuple[str, ...] = ()  # small inputs shipped whole to every task instead of shuffled
    state: str = ""  # what the stage keeps between runs; empty when it is stateless
    extra_args: tuple[str, ...] = ()  # job arguments beyond --start/--end/--run-id; {setting} placeholders

    @property
    def job(self) -> str:
        """The job file, relative to the project root."""
        return f"jobs/{self.name}.py"

    @property
    def keyed(self) -> bool:
        return bool(self.key)

    @property
    def stateful(self) -> bool:
        return bool(self.state)


STAGES: tuple[Stage, ...] = (
    Stage(
        name="catalog",
        summary="load the catalogue file (TLE or OMM) into TLE history by epoch",
        upstream=(),
        inputs=(CATALOG_FILE,),
        outputs=("catalog", "quarantine"),
        operators=("map", "filter"),
        key=("norad_id", "epoch"),
        state="catalog: every element set seen, merged by (norad_id, epoch)",
        extra_args=("--file", "{catalog_file}"),
    ),
    Stage(
        name="ingest",
        summary="new landing files -> raw bronze records, once per file; space-weather files -> their 3-hour "
                "intervals, the newest issue's per interval",
        upstream=(),
        inputs=(LANDING, "ingested_files"),
        outputs=("radar_frames", "optical_tracks", "isl_beacons", "tdm_messages", "space_weather_lines",
                 "space_weather", "ingested_files", "quarantine"),
        operators=("filter", "flatMap"),
        key=("file_path", "file_sha256"),
        state="ingested_files: ledger of files already taken (exactly once per file)",
    ),
    Stage(
        name="normalize",
        summary="bronze records -> common observation envelope (SI units, event time)",
        upstream=("ingest",),
        inputs=("radar_frames", "optical_tracks", "isl_beacons", "tdm_messages"),
        outputs=("observations", "quarantine", "watermarks"),
        operators=("flatMap", "map", "filter", "fold"),
        key=("sensor_id", "ingest_batch"),
        state="watermarks: newest event time per sensor and ingest batch (the watermarks' source)",
    ),
    Stage(
        name="dedup",
        summary="collapse redeliveries and same-track repeats within an event-time window",
        upstream=("normalize",),
        inputs=("observations", "watermarks"),
        outputs=("observations_dedup", "late_data"),
        operators=("filter", "window", "fold"),
        key=("sensor_id", "event-time window"),
        state="observations_dedup: kept observations, so copies arriving within the allowed lateness fold into them",
    ),
    Stage(
        name="correlate",
        summary="associate each observation with the catalogue object that explains it",
        upstream=("dedup", "catalog"),
        inputs=("observations_dedup", "catalog", "provisional_objects", "watermarks"),
        outputs=("correlated", "uncorrelated", "object_state", "passes"),
        operators=("join", "filter", "fold", "window"),
        key=("event-time bucket",),
        broadcast=("catalog",),
        state="object_state: a fold keyed by (norad_id, fixed event-time window), provisional until the "
              "watermark passes; passes: session windows keyed by (sensor_id, norad_id)",
    ),
    Stage(
        name="fuse",
        summary="decide each arc window's observations again against the earlier windows' fused orbits, then fit "
                "each observed object's orbit to its radar, optical and ISL observations (orbit determination)",
        upstream=("correlate",),
        inputs=("correlated", "uncorrelated", "catalog", "provisional_objects", "fused_orbits", "sensor_calibrations"),
        outputs=("fused_orbits", "manoeuvres", "correlated", "uncorrelated", "reassociations", "sensor_calibrations"),
        operators=("window", "fold", "map"),
        key=("norad_id",),
        broadcast=("catalog", "provisional_objects", "fused_orbits", "sensor_calibrations"),
        state="fused_orbits: a fold keyed by (norad_id, event-time arc window), each window's fit the prior of "
              "the next; a change refits its window and the object's later ones. Before a window is fitted its "
              "observations are decided again against the earlier windows' fused orbits, the ones no gate took "
              "against every element set with a wider gate (moves logged in reassociations). manoeuvres: each "
              "window's detections, a failing pass confirmed by the next; a pass at a window's end that would "
              "decide alone waits, and the next window tests and fits it first. Held observations a fit explains move "
              "from uncorrelated to correlated (a feedback edge: the next run refits the same window to the same "
              "orbit). sensor_calibrations: per "
              "(sensor, arc window), the sum of the window's fits' residual statistics, applied to the later windows",
    ),
    Stage(
        name="acquire",
        summary="find objects in no catalogue among the uncorrelated observations: number them provisionally, "
                "retire the ones no longer seen, merge the ones a catalogued object turns out to be",
        upstream=("fuse",),
        inputs=("uncorrelated", "correlated", "catalog", "provisional_objects"),
        outputs=("provisional_objects", "catalog", "correlated", "uncorrelated"),
        operators=("window", "flatMap", "fold", "map"),
        broadcast=("catalog",),
        state="provisional_objects: every object numbered from its earliest observation (80000-89999), active, "
              "retired or merged; its element set joins catalog and its observations move to correlated (a "
              "feedback edge: the next run's correlation and fit take it as any catalogued object)",
    ),
    Stage(
        name="conjunction",
        summary="screen catalogued objects for close approaches over the horizon and raise alerts; publish "
                "each detected manoeuvre, and withdraw a published one a re-fit no longer finds",
        upstream=("acquire",),
        inputs=("catalog", "provisional_objects", "fused_orbits", "manoeuvres", "object_state", "alerts",
                "screening_state", "screening_events"),
        outputs=("conjunctions", "alerts", "alert_events", "propagation_errors", "screening_state",
                 "screening_events", OUTBOX),
        operators=("flatMap", "join", "fold", "map", "filter"),
        key=("time step", "grid cell", "pair"),
        state="screening_state / screening_events: the horizon covered, the element-set epoch screened per "
              "object, threshold, step, code version and the open events; a run screens only the new slice "
              "of the horizon and the objects whose element set changed",
    ),
)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A data-quality gate: ``jobs/quality.py --layer <layers>`` on the rows the run wrote, between
    stages. A fail-severity check fails the task, so the stages in ``before`` do not run."""

    name: str
    layers: tuple[str, ...]
    after: tuple[str, ...]
    before: tuple[str, ...]
    summary: str

    job = "jobs/quality.py"


GATES: tuple[Gate, ...] = (
    Gate(name="quality_silver", layers=("bronze", "silver"), after=("dedup",), before=("correlate",),
         summary="validate this run's bronze and silver rows; a failed gate keeps them out of gold"),
    Gate(name="quality_gold", layers=("gold",), after=("conjunction",), before=(),
         summary="validate this run's gold rows (correlation, conjunctions, alerts) and publish the run report"),
)

STAGE_BY_NAME: dict[str, Stage] = {stage.name: stage for stage in STAGES}
EXTERNAL = (LANDING, CATALOG_FILE, OUTBOX)


def stage_names() -> tuple[str, ...]:
    """Every stage, in the order the DAG runs them one at a time (each after the stages upstream of it)."""
    return tuple(stage.name for stage in STAGES)


def _closure(name: str, step) -> set[str]:
    if name not in STAGE_BY_NAME:
        raise KeyError(f"unknown stage {name!r}: the stages are {', '.join(stage_names())}")
    seen, todo = {name}, [name]
    while todo:
        for nxt in step(todo.pop()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def stages_upto(last: str) -> tuple[str, ...]:
    """``last`` and every stage it depends on, directly or not, in DAG order: what a run needs to have
    run for ``last`` to see its inputs."""
    wanted = _closure(last, lambda name: STAGE_BY_NAME[name].upstream)
    return tuple(name for name in stage_names() if name in wanted)


def stages_from(first: str) -> tuple[str, ...]:
    """``first`` and every stage depending on it, directly or not, in DAG order."""
    wanted = _closure(first, lambda name: [s.name for s in STAGES if name in s.upstream])
    return tuple(name for name in stage_names() if name in wanted)


def stages_between(first: str, last: str) -> tuple[str, ...]:
    """The stages on the paths from ``first`` to ``last`` (both included), in DAG order."""
    after = set(stages_from(first))
    return tuple(name for name in stages_upto(last) if name in after)


def source_stages() -> tuple[str, ...]:
    """The stages no other stage feeds (they read files: the catalogue file, the landing zone)."""
    return tuple(stage.name for stage in STAGES if not stage.upstream)


def markdown() -> str:
    """The stages and gates as a Markdown list (the ``sda_pipeline`` DAG's ``doc_md``, in the Airflow UI)."""
    out = []
    for stage in STAGES:
        reads = ", ".join(f"`{name}`" for name in stage.inputs)
        writes = ", ".join(f"`{name}`" for name in stage.outputs)
        out.append(f"* `{stage.name}` (`{stage.job}`): {stage.summary}. Reads {reads}; writes {writes}")
    for gate in GATES:
        where = f"after {', '.join(gate.after)}" + (f", before {', '.join(gate.before)}" if gate.before else "")
        out.append(f"* `{gate.name}` (`{gate.job} --layer {','.join(gate.layers)}`, {where}): {gate.summary}")
    return "\n".join(out) + "\n"


def edges(gates: bool = True) -> list[tuple[str, str]]:
    """(upstream task, downstream task) pairs: the task graph, with the quality gates unless
    ``gates`` is false."""
    out = [(up, stage.name) for stage in STAGES for up in stage.upstream]
    if gates:
        for gate in GATES:
            out += [(up, gate.name) for up in gate.after] + [(gate.name, down) for down in gate.before]
    return out


def tables() -> list[str]:
    """Every table the graph mentions, in first-mention order (external sources and sinks excluded)."""
    seen: dict[str, None] = {}
    for stage in STAGES:
        for name in stage.inputs + stage.outputs:
            if name not in EXTERNAL:
                seen.setdefault(name, None)
    return list(seen)


def _node(name: str) -> str:
    return name.replace("-", "_")


def mermaid() -> str:
    """The topology as a Mermaid flowchart: stages (boxes), tables (cylinders), keyed edges labelled.

    Stateful stages are drawn with a double border; an edge into a keyed stage names the key it is
    shuffled by, or says it is broadcast.
    """
    lines = ["flowchart TD"]
    lines.append(f'    {LANDING}[/"landing files<br/>radar · optical · ISL · space weather"/]')
    lines.append(f'    {CATALOG_FILE}[/"catalogue file<br/>TLE · OMM"/]')
    lines.append(f'    {OUTBOX}[\\"outbox<br/>alert CDMs · manoeuvre OPMs + JSON"\\]')
    for stage in STAGES:
        ops = " → ".join(stage.operators)
        shape = ("[[", "]]") if stage.stateful else ("[", "]")
        lines.append(f'    {_node("stage_" + stage.name)}{shape[0]}"<b>{stage.name}</b><br/>{ops}"{shape[1]}')
    for table in tables():
        lines.append(f'    {_node(table)}[("{table}")]')
    written: set[tuple[str, str]] = set()
    for stage in STAGES:
        target = _node("stage_" + stage.name)
        keyed = f"keyed by {' + '.join(stage.key)}" if stage.keyed else ""
        for source in stage.inputs:
            label = "broadcast" if source in stage.broadcast else keyed
            arrow = f'-- "{label}" -->' if label else "-->"
            lines.append(f"    {_node(source)} {arrow} {target}")
        for sink in stage.outputs:
            if (stage.name, sink) not in written:
                written.add((stage.name, sink))
                lines.append(f"    {target} --> {_node(sink)}")
    return "\n".join(lines) + "\n"


def describe() -> str:
    """A plain-text table of the stages (``python -m sda.pipeline.topology``)."""
    out = []
    for stage in STAGES:
        out.append(f"{stage.name}  ({stage.job})  after: {', '.join(stage.upstream) or '-'}")
        out.append(f"    {stage.summary}")
        out.append(f"    reads  {', '.join(stage.inputs)}")
        out.append(f"    writes {', '.join(stage.outputs)}")
        out.append(f"    ops    {' -> '.join(stage.operators)}")
        out.append(f"    keyed  {' + '.join(stage.key) if stage.keyed else 'no (narrow, no shuffle)'}")
        if stage.broadcast:
            out.append(f"    broadcast {', '.join(stage.broadcast)}")
        out.append(f"    state  {stage.state or 'none'}")
    for gate in GATES:
        out.append(f"{gate.name}  ({gate.job} --layer {','.join(gate.layers)})  after: {', '.join(gate.after)}"
                   f"  before: {', '.join(gate.before) or '-'}")
        out.append(f"    {gate.summary}")
    return "\n".join(out)


if __name__ == "__main__":  # python -m sda.pipeline.topology [--mermaid]
    import sys

    print(mermaid() if "--mermaid" in sys.argv[1:] else describe())
