"""How stages run: the operator graph (:mod:`.topology`, the one place to read the architecture), the
runtime every job shares -- running a stage (:mod:`.runtime`), its command line (:mod:`.arguments`),
idempotent sinks (:mod:`.sinks`), change-feed reads and consumed versions (:mod:`.changefeed`), run
metrics (:mod:`.run_metrics`), fault injection (:mod:`.faults`) -- event-time watermarks
(:mod:`.watermarks`), replay of a time range (:mod:`.replay`) and lineage from an alert back to its
observations (:mod:`.lineage`)."""
