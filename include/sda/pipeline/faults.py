"""Fault injection: named points between a stage's writes where a test can make the stage die.

A stage calls :func:`checkpoint` between two writes (``<stage>:<where>``); normally nothing happens.
The exactly-once tests arm those points to show that a crash anywhere leaves nothing lost and
nothing doubled once the retry has run.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("sda")

KILL_ENV = "SDA_KILL_AT"
KILL_AT: set[str] = set()  # armed in-process by tests: checkpoint() raises SimulatedCrash there


class SimulatedCrash(RuntimeError):
    """Raised at an armed checkpoint: the stage dies there, as a killed executor or driver would."""


def checkpoint(name: str) -> None:
    """A point between two writes of a stage (``<stage>:<where>``). Normally nothing happens.

    Armed in-process (``KILL_AT``) it raises :class:`SimulatedCrash`; armed through the environment
    (``SDA_KILL_AT=normalize:after-silver``, comma-separated) the process exits at once with status
    137, as after ``kill -9``: no ``finally`` block, no Spark shutdown hook, nothing flushed.
    """
    if name in KILL_AT:
        raise SimulatedCrash(name)
    if name in {p.strip() for p in os.environ.get(KILL_ENV, "").split(",") if p.strip()}:
        log.error("SDA_KILL_AT=%s: killing the process at %s", os.environ[KILL_ENV], name)
        os._exit(137)
