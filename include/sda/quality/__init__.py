"""Data quality: the Great Expectations gates between layers (:mod:`.gates`), their suites
(:mod:`.suites`) and the per-run report an operator reads (:mod:`.report`)."""
