"""docs/performance.md's acquisition tables (bench/acquisition.py's results), for bench/report.py: the two targets,
what was acquired and how soon, how good the first orbits are, the false objects and their fate, per regime."""

from __future__ import annotations

Row = tuple[str, tuple, str, str]  # as bench/report.py's: label, path in the JSON, format, target


def rows(result: dict) -> list[Row]:
    target, false = ("targets", "leo_3_passes_within_24h"), ("targets", "no_false_object_surviving_24h")
    out: list[Row] = [
        ("hidden LEO bodies seen in 3 or more passes: acquired within 24 h", (*target, "share"), "{:.3f}", ">= 0.90"),
        ("... bodies", (*target, "bodies"), "{}", ""),
        ("false objects surviving 24 h", (*false, "surviving"), "{}", "0"),
        ("... false objects younger than 24 h at the run's end (undecided)", (*false, "undecided"), "{}", ""),
        ("hidden bodies observed", ("overall", "observed"), "{}", ""),
        ("... acquired", ("overall", "acquired"), "{}", ""),
        ("... acquired within 6 h of their first observation", ("overall", "within_6h", "share"), "{:.3f}", ""),
        ("delay from the first observation, median", ("overall", "delay_h", "median"), "{:.2f} h", ""),
        ("... p90", ("overall", "delay_h", "p90"), "{:.2f} h", ""),
        ("first fitted orbit's position error, median", ("overall", "pos_err_km", "median"), "{:.3f} km", ""),
        ("... its element set's, median", ("overall", "lines_err_km", "median"), "{:.3f} km", ""),
        ("bodies lost to a wrong merge", ("overall", "merged_wrongly"), "{}", ""),
        ("false objects", ("false_objects", "false"), "{}", ""),
        ("... second objects of a body acquired already", ("false_objects", "by_outcome", "duplicate"), "{}", ""),
        ("... of a catalogued body", ("false_objects", "by_outcome", "catalogued body"), "{}", ""),
        ("... merged within 24 h", ("false_objects", "fate_24h", "merged"), "{}", ""),
        ("... retired within 24 h", ("false_objects", "fate_24h", "retired"), "{}", ""),
        ("acquisition per one-hour step, median", ("timing_s", "acquire_per_step", "median"), "{:.1f} s", ""),
    ]
    for regime in sorted(result.get("by_regime") or {}):
        out.append((f"acquired, {regime}", ("by_regime", regime, "share"), "{:.3f}", ""))
    return out
