"""Internals of the sensor simulator; the command line and API are :mod:`sda.sim.simulate`.

* :mod:`sda.sim.common`: shared constants and time/hash helpers
* :mod:`sda.sim.truth`: ground-truth rows, landing-file records, the truth and summary files
* :mod:`sda.sim.objects`: the observed objects (catalogue load/generate, subsample, injected pair)
* :mod:`sda.sim.conjunction`: the injected near-collision pair
* :mod:`sda.sim.observe`: geometry (what each sensor sees when) and measurement noise
* :mod:`sda.sim.formats`: wire formats of radar/optical/ISL records and the landing files
* :mod:`sda.sim.disorder`: duplicates, re-processed, late, malformed, impossible, unknown sensors
"""
