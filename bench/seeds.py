"""The benchmarks' seeds, in one registry: which seeds the pipeline was developed on and which are held out.

    .venv/bin/python bench/seeds.py          # the registry, a line per seed

A seed's role is one of two:

- **development**: the pipeline's constants or designs were chosen, or compared, on it. A figure measured on
  it is calibration, not a result.
- **held out**: no choice was made on it. Its figures are reported, never tuned on. A held-out seed measured
  before a choice between designs becomes a development seed from then on: move it here and say which choice.

A role is the seed's, not one benchmark's: the simulator draws every scenario of a seed from the same
generator, and a seed looked at while choosing is no longer unseen by the one who chose. A seed that is in
no list is ``unregistered``: it is neither, and a figure on it says so.

The benchmarks take their development seeds from here (``bench/accuracy.py``'s ``DEVELOPMENT_SEEDS``,
``bench/manoeuvres.py``'s ``DEV_SEEDS``), every results file records its seed's role
(:func:`common.write_result`), docs/performance.md's tables print it, and ``tests/bench/test_seeds.py`` checks
every "held out" and "not used while developing" in ``docs/`` against this registry.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVELOPMENT, HELD_OUT, UNREGISTERED = "development", "held out", "unregistered"


@dataclass(frozen=True)
class Seed:
    number: int
    role: str
    history: str  # what was chosen on it, or when it was drawn and for which figures


REGISTRY: tuple[Seed, ...] = (
    Seed(1, DEVELOPMENT, "accuracy: the bias consider's 0.3 (harsher sky); correlation: the wider pass's scale; "
                         "bench/od.py: the process noise (with seed 2)"),
    Seed(2, DEVELOPMENT, "bench/od.py: the process noise (with seed 1); fusion run after run: developed on it"),
    Seed(3, DEVELOPMENT, "accuracy: the density's error per Kp step, 0.3 (storm); the manoeuvre detector's design "
                         "and constants; acquisition's bench and test scenario"),
    Seed(5, DEVELOPMENT, "the manoeuvre detector's design and constants; accuracy's development runs; "
                         "bench/propagation.py: the estimator's integration (tolerance, free steps) chosen on it"),
    Seed(7, DEVELOPMENT, "accuracy's and the manoeuvre detector's development runs (so fusion run after run, "
                         "published on it, is a development seed's figure)"),
    Seed(13, DEVELOPMENT, "held out until two manoeuvre-detector designs were compared on it (2026-11-29); "
                          "development since"),
    Seed(9213, DEVELOPMENT, "drawn 2026-12-04 to hold out for accuracy, but its harsher sky was measured before the "
                            "calibration sigma was chosen (formal or jackknife; chosen on seed 1): development since"),
    Seed(21, DEVELOPMENT, "held out until it was measured before two correlation design choices (docked stacks "
                          "observed whole, the wider pass's candidates; 2026-11-29); development since"),
    Seed(4, HELD_OUT, "bench/od.py's published fits: the process noise was chosen on seeds 1 and 2"),
    Seed(11, HELD_OUT, "accuracy's default seed: measured to report the pipeline of each day (2026-11-26 on), no "
                       "constant chosen on it"),
    Seed(17, HELD_OUT, "the quiet manoeuvre run (false detections over 2,040 object-days)"),
    # Drawn 2026-12-04 with Python's secrets.SystemRandom from 100..9999, leaving out the seeds above, one per
    # figure family whose held-out seed had been looked at.
    Seed(6305, HELD_OUT, "drawn 2026-12-04 for accuracy (harsher sky and storm), after 9213 became a development seed"),
    Seed(1001, HELD_OUT, "drawn 2026-12-04 for correlation tracking; measured 2026-12-07"),
    Seed(1501, HELD_OUT, "drawn 2026-12-04 for manoeuvres with the pipeline's association; measured 2026-12-07"),
    Seed(6782, HELD_OUT, "drawn 2026-12-04 for acquisition; measured 2026-12-07"),
    Seed(9469, HELD_OUT, "drawn 2026-12-07 (secrets.SystemRandom, 100..9999, the seeds above left out) for "
                         "bench/propagation.py, after its integration was chosen on seed 5; measured 2026-12-07"),
)
_BY_NUMBER = {s.number: s for s in REGISTRY}


def role(seed: int | None) -> str:
    """``development``, ``held out`` or ``unregistered`` (a seed this registry does not list, or none)."""
    entry = _BY_NUMBER.get(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None
    return entry.role if entry else UNREGISTERED


def development_seeds() -> tuple[int, ...]:
    return tuple(sorted(s.number for s in REGISTRY if s.role == DEVELOPMENT))


def held_out_seeds() -> tuple[int, ...]:
    return tuple(sorted(s.number for s in REGISTRY if s.role == HELD_OUT))


if __name__ == "__main__":
    for entry in sorted(REGISTRY, key=lambda s: (s.role, s.number)):
        print(f"{entry.number:>5}  {entry.role:<12} {entry.history}")
