"""Alerting: which conjunctions become alerts and how they evolve across runs (:mod:`.plan`), CCSDS
Conjunction Data Messages (:mod:`.cdm`) and the outbox they are published to (:mod:`.outbox`)."""
