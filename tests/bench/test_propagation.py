"""bench/propagation.py's pure parts: the LEO objects it times, and its column errors on hand-made matrices."""

from __future__ import annotations

import numpy as np
import propagation

from sda.orbit.estimation.dynamics import Trajectory


def _trajectory(phi: np.ndarray, sens: np.ndarray) -> Trajectory:
    return Trajectory(np.zeros(1), np.zeros((1, 6)), phi[None], sens[None])


def test_the_objects_are_leo_states():
    sats, states = propagation.leo_objects(5, seed=5)
    assert len(sats) == len(states) == 5
    radius_km = np.linalg.norm(states[:, :3], axis=1) / 1e3
    speed_kms = np.linalg.norm(states[:, 3:], axis=1) / 1e3
    assert np.all((6500 < radius_km) & (radius_km < 8400)) and np.all((6.5 < speed_kms) & (speed_kms < 8.2))


def test_column_errors_are_relative_to_the_references_columns():
    ref = np.diag([1.0, 2.0, 4.0, 10.0, 100.0, 1000.0])
    ours = ref.copy()
    ours[0, 1] = 0.2  # column 1: 0.2 / 2 = 10 %
    ours[1, 4] = 5.0  # column 4 (a large one): 5 / 100 = 5 %
    large, worst, sens = propagation.column_errors(_trajectory(ours, np.array([3.0, 4, 0, 0, 0, 0])),
                                                   _trajectory(ref, np.array([3.0, 0, 0, 0, 0, 0])))
    assert np.isclose(large, 0.05) and np.isclose(worst, 0.1) and np.isclose(sens, 4.0 / 3.0)
