"""How stages run: the operator graph (:mod:`.topology`, the one place to read the architecture), the
runtime every job shares (:mod:`.runtime`: arguments, progress, idempotent sinks, change-feed reads,
metrics), event-time watermarks (:mod:`.watermarks`), replay of a time range (:mod:`.replay`) and
lineage from an alert back to its observations (:mod:`.lineage`)."""
