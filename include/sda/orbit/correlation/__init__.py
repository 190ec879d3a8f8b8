"""Observation-to-object association: which catalogued object (if any) each observation sees.

* :mod:`.correlate` -- the correlator (:func:`correlate_frame`): candidates, gate, decision;
* :mod:`.gate` -- predicted measurements and residuals (on the estimator's measurement models,
  :mod:`sda.orbit.estimation.measurements`) and the gate statistic with its chi-square thresholds;
* :mod:`.association` -- one candidate per element set, the spatial prefilter, one object per radar frame;
* :mod:`.tracks` -- fused orbits as the correlator's predictions;
* :mod:`.columns` -- what the correlator reads and writes, and the reasons an observation stays uncorrelated.

The names other packages use are re-exported here.
"""

from sda.orbit.correlation.columns import (
    OBSERVATION_COLUMNS,
    REASON_INCOMPLETE,
    REASON_NO_CANDIDATE,
    REASON_NOT_PROPAGATED,
    REASON_UNDECIDED,
    REASON_UNKNOWN_KIND,
    RESIDUAL_COLUMNS,
    RESIDUALS,
    RESULT_COLUMNS,
)
from sda.orbit.correlation.correlate import (
    AMBIGUITY_LIKELIHOOD_RATIO,
    BLOCK_ELEMENTS,
    BUCKET_S,
    COMMIT_LIKELIHOOD_RATIO,
    PREDICTION_SIGMA_M,
    PREDICTION_SIGMA_RANGE_RATE_MS,
    PREFILTER_SIGMAS,
    REPORT_GATES,
    correlate_frame,
    prediction_model,
)
from sda.orbit.correlation.gate import GATE_D2, GATE_TAIL, chi2_quantile, chi2_tail

__all__ = [
    "OBSERVATION_COLUMNS", "REASON_INCOMPLETE", "REASON_NO_CANDIDATE", "REASON_NOT_PROPAGATED", "REASON_UNDECIDED",
    "REASON_UNKNOWN_KIND", "RESIDUAL_COLUMNS", "RESIDUALS", "RESULT_COLUMNS", "AMBIGUITY_LIKELIHOOD_RATIO",
    "BLOCK_ELEMENTS", "BUCKET_S", "COMMIT_LIKELIHOOD_RATIO", "PREDICTION_SIGMA_M", "PREDICTION_SIGMA_RANGE_RATE_MS",
    "PREFILTER_SIGMAS", "REPORT_GATES", "correlate_frame", "prediction_model", "GATE_D2", "GATE_TAIL",
    "chi2_quantile", "chi2_tail",
]
