"""The fuse stage's per-object work (:mod:`.arcs`): one fused orbit per (object, event-time arc
window), chained from the catalogue's prior or the previous window's fit, burn by burn
(:mod:`sda.orbit.manoeuvre`), with the screening's element set fitted to it
(:mod:`sda.orbit.screening.fitted_elements`)."""
