"""How stages run: the operator graph (:mod:`.topology`, the one place to read the architecture), the
runtime every job shares -- running a stage (:mod:`.runtime`), its command line (:mod:`.arguments`),
idempotent sinks (:mod:`.sinks`), change-feed reads and consumed versions (:mod:`.changefeed`), run
metrics (:mod:`.run_metrics`), fault injection (:mod:`.faults`) -- the landing zone as ingest lists it
(:mod:`.landing`), event-time watermarks
(:mod:`.watermarks`), replay of a time range (:mod:`.replay`), lineage from an alert back to its
observations and landing files (:mod:`.lineage`, one module per hop), the fuse and acquire stages' table I/O
for manoeuvres and provisional objects (:mod:`.manoeuvres`, :mod:`.provisional`), and ``sda export``
(:mod:`.export`)."""
