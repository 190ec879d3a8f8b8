"""Alerting: which conjunctions become alerts and how they evolve across runs, CCSDS Conjunction Data
Messages, manoeuvre messages (CCSDS OPM), and the outbox they are published to.

* :mod:`.assessment`: Pc, its validity and the alert level of each screened event;
* :mod:`.fused`: the fused orbits as the assessment uses them (refinement on them, their covariance);
* :mod:`.content`: what an alert version says (content hash) and whether it changed;
* :mod:`.plan`: the alert lifecycle (new / updated / closed) of a run;
* :mod:`.outbox`: the CDM and JSON twin of each emitted version, written once;
* :mod:`.manoeuvre_message`: the CCSDS OPM and JSON twin of each detected manoeuvre, written once;
* :mod:`.publish`: the stage's table reads and writes around them (conjunctions, alerts, alert_events);
* :mod:`.screening_record`: the screening's own record (``ops.screening_state``, ``ops.screening_events``) and
  the object states its Pc used;
* :mod:`.cdm` (KVN parsing and writing) and :mod:`.cdm_model` (the message as data);
* :mod:`.values`: UTC-aware times and missing values, as alert rows carry them.

Only :mod:`.publish` and :mod:`.screening_record` read and write tables (with a Spark session; the orbits each
object is used with are read through :mod:`sda.lake.orbits`). Everything else needs no Spark session (the alert
row's columns are those of the table schema, :mod:`sda.lake.schemas`), so it is tested without Spark.
"""
