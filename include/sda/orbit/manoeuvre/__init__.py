"""Manoeuvre detection: a window's passes tested against the object's fused prediction
(:mod:`.detection`), and the window fitted burn by burn (:mod:`.segments`). Built on
:mod:`sda.orbit.estimation`."""
