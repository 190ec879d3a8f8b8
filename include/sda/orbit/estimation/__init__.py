"""Orbit determination: each object's orbit fitted to its radar, optical and ISL observations.

Three parts, each behind a small interface (docs: ../shared/STYLE.md, "Orbit determination"):

* :mod:`~sda.orbit.estimation.measurements`: one measurement model per sensor kind (predict, noise, residual
  with angles wrapped, analytic Jacobian) in the pipeline's frames;
* :mod:`~sda.orbit.estimation.dynamics`: the estimator's own numerical force model (not the simulator's: the
  module says what differs) with its transition matrix and drag sensitivity at any times;
* :mod:`~sda.orbit.estimation.estimator`: batch weighted least squares with a prior, outlier editing and a
  solved-for ballistic coefficient: :func:`fit` (one object's observations, a pandas DataFrame in the
  silver envelope's columns, and a :class:`Prior`) -> :class:`OdResult` (the gold record).

:func:`prior_from_tle` makes the catalogue element set a prior; :func:`predict` / :func:`ephemeris`
carry a result to any times with a covariance that grows with drag and force-model error
(:mod:`~sda.orbit.estimation.predict`), and :func:`prior_from_result` makes it the next arc's prior.

Pure maths (numpy, brahe, sgp4): no Spark; the stage that runs it per object is a grouped pandas UDF.
"""

from sda.orbit.estimation.estimator import OdConfig, OdResult, Prior, fit
from sda.orbit.estimation.measurements import MODELS, registry_sigmas
from sda.orbit.estimation.predict import Prediction, ProcessNoise, ephemeris, predict, prior_from_result
from sda.orbit.estimation.prior import prior_from_tle

__all__ = ["OdConfig", "OdResult", "Prior", "fit", "MODELS", "registry_sigmas", "Prediction", "ProcessNoise",
           "ephemeris", "predict", "prior_from_result", "prior_from_tle"]
