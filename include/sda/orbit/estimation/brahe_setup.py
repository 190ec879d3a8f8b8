"""brahe, ready to use offline: its Earth-orientation and space-weather data are the ones in its wheel.

``brahe()`` imports the library and loads both once per process (brahe keeps them process-wide), from the
files its wheel ships (:func:`packaged_eop`, :func:`packaged_space_weather`; the EOP file holds IERS
Bulletin A predictions to mid-2027 and is held constant past its end). Nothing is downloaded: brahe's own
``initialize_eop()`` and ``initialize_sw()`` fetch fresh IERS and CelesTrak files into ``~/.cache/brahe``
when the cached ones are older than a week, so they are never called (a test runs ``brahe()`` with an empty
cache and checks that nothing was written there). The JPL ephemerides its Sun and Moon default to are never
used here either (callers choose its analytic ones).

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

    packaged_eop()
    packaged_space_weather()
    bh.set_precession_nutation_model(bh.PrecessionNutationModel.IAU2000B)
    return bh


def packaged_eop() -> None:
    """brahe's process-wide Earth orientation from the file in its wheel, interpolated, held past its end."""
    import brahe as bh

    bh.set_global_eop_provider_from_file_provider(bh.FileEOPProvider.from_default_standard(True, "Hold"))


def packaged_space_weather() -> None:
    """brahe's process-wide space weather from the file in its wheel."""
    import brahe as bh

    bh.set_global_space_weather_provider(bh.FileSpaceWeatherProvider.from_default_file())
