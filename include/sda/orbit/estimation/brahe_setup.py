"""brahe, ready to use offline: its Earth-orientation and space-weather data are the ones in its wheel.

``brahe()`` imports the library and loads both once per process (brahe keeps them process-wide). Nothing
is downloaded: the JPL ephemerides its Sun and Moon default to are never used here (callers choose its
analytic ones).

**Precession-nutation: IAU 2000B**, set process-wide here, for the estimator and the simulator alike. The
numerical propagator rotates to the Earth-fixed frame at every force evaluation, and with brahe's default
(IAU 2006/2000A, 1,365 luni-solar and planetary terms) that rotation is four fifths of a propagation's cost.
IAU 2000B (77 terms) agrees with it to about a milliarcsecond (IERS Conventions 2010, section 5.5.1):
measured here over 30 hours, positions of LEO, MEO and GEO orbits 2 mm apart at most, with propagations
4.5-5 times faster (``tests/include/orbit/estimation/test_brahe_setup.py`` checks the agreement)."""

from __future__ import annotations

import functools


@functools.cache
def brahe():
    import brahe as bh

    bh.initialize_eop()  # the wheel's own files: no download
    bh.initialize_sw()
    bh.set_precession_nutation_model(bh.PrecessionNutationModel.IAU2000B)
    return bh
