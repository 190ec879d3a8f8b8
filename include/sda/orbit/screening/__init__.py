"""Conjunction screening maths: the filter chain behind ``jobs/conjunction.py``, in numpy.

The chain, from all pairs of a catalogue to close approaches under a threshold ``D`` over
``[start, end)``:

(a) **altitude bands** -- two objects whose radial bands [perigee, apogee] (mean elements, padded by
    ``D`` and :data:`ALTITUDE_MARGIN_KM` for short-periodic terms) do not overlap can never meet;
(b) **spatial grid** -- positions at the time grid ``t_k = start + k h`` are keyed by cubic cell and
    joined by sorting the keys; only objects in the same or adjacent cells at the same step are
    compared, and a pair only if it lies within its own reach ``D + (V1 + V2) h / 2``. Objects no
    faster than :data:`SLOW_SPEED_KM_S` share a fine grid (cell ``D + V_slow h``); the few faster ones
    (GTO, Molniya) are compared with everything on a coarse one (cell ``D + V_max h``);
(b') **linearised motion** -- a (pair, step) survives only if the straight-line relative motion
    around ``t_k`` comes within ``D`` plus a curvature bound during the half step either side;
(c) **refinement** -- for the surviving pairs, the time of closest approach (TCA) is a root of the
    range-rate ``(r1 - r2) . (v1 - v2)``, found with ``brentq`` on SGP4 itself, then miss distance,
    relative speed and the secondary's position in the primary's RTN frame.

Why no pair under ``D`` is lost (the argument the cell size and the pads rest on):

* every instant ``t*`` of ``[start, end]`` is within ``h/2`` of a grid time ``t_k`` (the grid runs
  from ``start`` to the first ``t_k >= end``);
* the relative speed of two objects never exceeds ``V1 + V2`` where ``Vi`` is object i's perigee
  speed (vis-viva, padded by :data:`SPEED_MARGIN`); so if ``|r1 - r2| < D`` at ``t*`` then
  ``|r1 - r2| < D + (V1 + V2) h / 2`` at ``t_k``; that reach is at most the cell edge of the grid the
  pair is met on (``D + V_slow h`` when both are slow, ``D + V_max h`` otherwise), so the two are in
  the same or adjacent cells (each axis differs by less than one edge);
* with relative acceleration at most ``A = A1 + A2`` (central gravity at the perigee radius,
  padded for J2 and drag), Taylor's remainder bounds the departure of the true relative position
  from ``dr + dv tau`` by ``A tau^2 / 2``; so such a pair also has a straight-line minimum over
  ``|tau| <= h/2`` below ``D + A h^2 / 8``, which is filter (b');
* a surviving (pair, step) opens the window ``[t_k - h/2, t_k + h/2]``; windows of consecutive
  steps merge, so ``t*`` lies inside a window, where the range-rate changes sign from - to + and the
  sign change is bracketed by sub-samples (minima of one pair are tens of minutes apart, windows
  are at most a few minutes long).

Beyond the chain:

* **persistent proximity** -- a pair within ``D`` for a whole step at an edge of the window has no
  range-rate root there; it is worked out on its own (:func:`pair_events`) and reported once, at its
  smallest distance, flagged (:data:`PERSISTENT_FLAGS`);
* **incremental screening** -- :func:`plan_increment` turns the recorded state of the last screening
  into the parts a new one must screen (the new slice of the horizon; the objects whose element set
  changed, on a coarser grid with the second-order bound (b'') of :func:`focus_block_candidates`),
  the events it keeps and the pairs it rechecks; :func:`combine` makes the open events of the lot.

Times are unix seconds (UTC); positions km, velocities km/s, as in :mod:`sda.orbit.frames`.

The package's modules, each one step of the above (this ``__init__`` re-exports what the jobs,
benchmarks, the simulator and the alerts use, so ``from sda.orbit import screening`` is the API):

* :mod:`.elements` -- ``Satrec`` objects from TLE lines, TLE lines from mean elements;
* :mod:`.bounds` -- the margins, each object's speed and acceleration bounds, the curvature pad, and
  filter (a), the altitude bands;
* :mod:`.grid` -- the time grid and the :class:`Part` s a screening is cut into;
* :mod:`.cells` -- filter (b)'s spatial join: cell keys and the sort-merge join of neighbouring cells;
* :mod:`.propagation` -- the catalogue as the grid needs it (bounds per object, the two grids' cells,
  the element sets shipped to executors) and its SGP4 propagation over a block of grid steps;
* :mod:`.candidates` -- (b) and (b') (and (b'') for a focus set) over a block of steps: candidate
  (pair, step)s;
* :mod:`.tca` -- one pair's range-rate roots and the approach at TCA (miss, speed, RTN, states);
* :mod:`.persistent` -- persistent proximity: a pair worked out whole, its flags and event id;
* :mod:`.refinement` -- filter (c): candidate steps to windows, refined or worked out whole;
* :mod:`.events` -- open events: their ids and columns, and the combination of kept and found ones;
* :mod:`.incremental` -- the recorded state, the code version, the plan of an incremental screening
  and the rechecks it names;
* :mod:`.blocks` -- one task of the candidates stage: a block screened, its rows, their summary;
* :mod:`.ephemeris` -- the catalogue's states on the focus grid, cached on disk for the next
  incremental screening;
* :mod:`.chain` -- the whole chain in one process (tests, benchmarks).
"""

from sda.orbit.screening.blocks import BLOCK_COLUMNS, BlockSummary, block_frame, screen_block, summarise
from sda.orbit.screening.bounds import (
    ACCEL_MARGIN,
    ALTITUDE_MARGIN_KM,
    SPEED_MARGIN,
    altitude_band_pair_count,
    altitude_band_pairs,
    bands_overlap,
)
from sda.orbit.screening.candidates import (
    BlockResult,
    block_candidates,
    focus_block_candidates,
    linear_min_distance,
    quadratic_min_distance,
)
from sda.orbit.screening.cells import neighbour_pairs
from sda.orbit.screening.chain import screen, screen_increment, screen_parts
from sda.orbit.screening.elements import satrecs_from_lines, tle_from_elements
from sda.orbit.screening.ephemeris import Ephemeris, worker_ephemeris
from sda.orbit.screening.events import EVENT_COLUMNS, combine, empty_events, event_id, event_key, event_keys
from sda.orbit.screening.grid import BLOCKS_PER_CORE, PART_SHIFT, Part, code_time, step_blocks, time_grid
from sda.orbit.screening.incremental import (
    FOCUS_STEP_FACTOR,
    FULL_IF_CHANGED_FRACTION,
    IncrementPlan,
    ScreeningState,
    code_version,
    focus_grid_start,
    plan_increment,
    recheck_pairs,
)
from sda.orbit.screening.persistent import (
    NO_EVENT,
    PERSISTENT_END,
    PERSISTENT_FLAGS,
    PERSISTENT_START,
    PERSISTENT_WHOLE,
    edge_within,
    is_persistent,
    pair_events,
    persistent_event_id,
)
from sda.orbit.screening.propagation import (
    PROPAGATION_CHUNK_STEPS,
    SLOW_SPEED_KM_S,
    CatalogueLines,
    Grids,
    ScreeningObjects,
    worker_objects,
)
from sda.orbit.screening.refinement import part_windows, refine_pairs, step_windows
from sda.orbit.screening.tca import APPROACH_COLUMNS, Approach, approach_frame, refine_window, rtn_components

__all__ = [
    "ACCEL_MARGIN", "ALTITUDE_MARGIN_KM", "APPROACH_COLUMNS", "BLOCKS_PER_CORE", "BLOCK_COLUMNS", "EVENT_COLUMNS",
    "FOCUS_STEP_FACTOR", "FULL_IF_CHANGED_FRACTION", "NO_EVENT", "PART_SHIFT", "PERSISTENT_END", "PERSISTENT_FLAGS",
    "PERSISTENT_START", "PERSISTENT_WHOLE", "PROPAGATION_CHUNK_STEPS", "SLOW_SPEED_KM_S", "SPEED_MARGIN",
    "Approach", "BlockResult", "BlockSummary", "CatalogueLines", "Ephemeris", "Grids", "IncrementPlan", "Part",
    "ScreeningObjects", "ScreeningState", "altitude_band_pair_count", "altitude_band_pairs", "approach_frame",
    "bands_overlap", "block_candidates", "block_frame", "code_time", "code_version", "combine", "edge_within",
    "empty_events", "event_id", "event_key", "event_keys", "focus_block_candidates", "focus_grid_start",
    "is_persistent", "linear_min_distance", "neighbour_pairs", "pair_events", "part_windows", "persistent_event_id",
    "plan_increment", "quadratic_min_distance", "recheck_pairs", "refine_pairs", "refine_window", "rtn_components",
    "satrecs_from_lines", "screen", "screen_block", "screen_increment", "screen_parts", "step_blocks",
    "step_windows", "summarise", "time_grid", "tle_from_elements", "worker_ephemeris", "worker_objects",
]
