"""Orbit mathematics, free of Spark and Airflow: time and reference frames (:mod:`.frames`, Earth
orientation :mod:`.eop`), element sets (:mod:`.catalog` reads TLE/OMM, :mod:`.catgen` generates a
catalogue), sensors (:mod:`.sensors`), the uncertainty model (:mod:`.uncertainty`), correlation of an
observation with its object (:mod:`.correlation`, its predicted measurements :mod:`.measurements`, its
candidates, prefilter and per-radar-frame assignment :mod:`.association`), conjunction screening
(:mod:`.screening`) and the probability of collision (:mod:`.pc`). Plain numpy/sgp4 functions: the jobs
call them inside pandas UDFs."""
