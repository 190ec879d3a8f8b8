"""Orbit mathematics, free of Spark and Airflow: plain numpy / sgp4 / brahe functions that the jobs call
inside pandas UDFs. The packages, from the bottom up (each imports only those below it; pyproject's
import-linter contracts check it):

* foundations: time and frames (:mod:`.times`, :mod:`.frames`, Earth orientation :mod:`.eop`,
  :mod:`.inertial`), sensors and their noise (:mod:`.sensors`), the catalogue's uncertainty model
  (:mod:`.uncertainty`), element sets in and out (:mod:`.catalog` reads TLE/OMM and generates synthetic
  catalogues, :mod:`.ndm` writes OMM/OEM), the probability of collision (:mod:`.pc`);
* :mod:`.estimation` -- orbit determination: measurement models, the estimator's force model and
  transition matrix, batch least squares, process noise, priors, initial orbit determination; beside it
  :mod:`.pair_covariance`, a pair's relative covariance with its shared density-forecast error taken out
  (CARA's DCP cross-correlation) and the probabilities on it;
* :mod:`.correlation` -- which object each observation sees (the gate uses the estimation's
  measurement models; fused orbits predict where they are usable);
* :mod:`.screening` -- conjunction screening, and its products from fused orbits (element sets fitted
  to a fused trajectory, approaches refined on the fused orbits);
* :mod:`.manoeuvre` -- manoeuvre detection and the burn-by-burn fit of a window;
* :mod:`.fusion` -- the fuse stage's per-object work: arc windows fitted and chained;
* :mod:`.acquisition` -- new objects from uncorrelated observations: tracklets, initial orbits, linking.
"""
