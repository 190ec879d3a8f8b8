"""brahe, ready to use offline: its Earth-orientation and space-weather data are the ones in its wheel.

``brahe()`` imports the library and loads both once per process (brahe keeps them process-wide). Nothing
is downloaded: the JPL ephemerides its Sun and Moon default to are never used here (callers choose its
analytic ones)."""

from __future__ import annotations

import functools


@functools.cache
def brahe():
    import brahe as bh

    bh.initialize_eop()  # the wheel's own files: no download
    bh.initialize_sw()
    return bh
