"""The simulator's argparse types (``sda.sim.simulate``'s command line and the benchmarks')."""

from __future__ import annotations

import argparse
import math


def number_in(low: float, high: float, what: str):
    """An argparse type: a number in [``low``, ``high``], refused as not being ``what`` (also used by
    bench/accuracy.py)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what} in [{low:g}, {high:g}]")
        return value
    return parse


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (also used by bench/correlation.py)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least 1")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return value
