"""bench/accuracy.py's statistics of covariance realism: squared Mahalanobis distances ``d^2`` of 3-D position
errors under the covariance that was stated for them.

A covariance is realistic when the true errors are drawn from it: then ``d^2`` follows the chi-square
distribution with 3 degrees of freedom (mean 3, median 2.366, 95 % of it at most 7.815, the 95 % ellipsoid).

* :func:`d2_figures`: count, mean and median ``d^2`` and the share inside the 95 % ellipsoid;
* :func:`chi2_test`: one goodness-of-fit test of a ``d^2`` sample against chi-square(3): the Cramer-von Mises
  test (:func:`scipy.stats.cramervonmises`; the distribution fully specified, nothing fitted to the sample),
  passed at the 5 % level when its p-value is at least 0.05. It tests the whole shape: a sample too wide, too
  narrow or of the wrong shape with the right mean all fail it;
* :func:`hourly_test`: the test as NASA CARA's covariance-realism assessments apply it, over time: at each time
  (here each hour from the run's end to 24 h later) the sample of ``d^2`` across the objects of a group is
  tested, and the share of the times that pass is the figure (a realistic covariance passes about 95 % of
  them). A sample of fewer than :data:`MIN_OBJECTS` values is not tested: the test cannot tell a realistic
  covariance from a poor one with so few.
"""

from __future__ import annotations

import numpy as np

CHI2_3_MEAN = 3.0
CHI2_3_MEDIAN = 2.3659738843753377  # the median of chi-square with 3 degrees of freedom
CHI2_3_95 = 7.814727903251178  # its 95 % quantile: d^2 on the 95 % ellipsoid
TEST_LEVEL = 0.05
MIN_OBJECTS = 20
TEST = "Cramer-von Mises goodness of fit to chi-square(3) (scipy.stats.cramervonmises), passed when p >= 0.05"
REFERENCE = {"distribution": "chi-square, 3 degrees of freedom", "mean_d2": CHI2_3_MEAN,
             "median_d2": round(CHI2_3_MEDIAN, 3), "inside95": 0.95, "ellipsoid95_d2": round(CHI2_3_95, 3),
             "test": TEST, "min_objects_tested": MIN_OBJECTS}


def _finite(values) -> np.ndarray:
    v = np.asarray(values, float).ravel()
    return v[np.isfinite(v)]


def d2_figures(d2) -> dict:
    """``count`` of the finite values, their ``mean_d2``, ``median_d2`` and ``inside95`` (share at most
    :data:`CHI2_3_95`); None figures when there is none."""
    v = _finite(d2)
    if not v.size:
        return {"count": 0, "mean_d2": None, "median_d2": None, "inside95": None}
    return {"count": int(v.size), "mean_d2": round(float(v.mean()), 3), "median_d2": round(float(np.median(v)), 3),
            "inside95": round(float(np.mean(v <= CHI2_3_95)), 4)}


def chi2_test(d2, min_objects: int = MIN_OBJECTS) -> dict:
    """The Cramer-von Mises test of the finite values against chi-square(3): ``n``, ``p`` (rounded), ``passes``
    (p >= :data:`TEST_LEVEL`); ``p`` and ``passes`` None, with a ``note``, under ``min_objects`` values."""
    from scipy import stats

    v = _finite(d2)
    if v.size < min_objects:
        return {"n": int(v.size), "p": None, "passes": None, "note": f"fewer than {min_objects} values: not tested"}
    p = float(stats.cramervonmises(v, stats.chi2(3).cdf).pvalue)
    return {"n": int(v.size), "p": round(p, 4), "passes": bool(p >= TEST_LEVEL)}


def hourly_test(d2_by_time, min_objects: int = MIN_OBJECTS) -> dict:
    """``d2_by_time`` [objects, times]: :func:`chi2_test` of each time's column; ``pass_share`` the share of the
    tested times that pass, ``p_values`` per time (None where untested). A group of fewer than ``min_objects``
    objects is not tested (``pass_share`` None and a ``note``)."""
    d2 = np.asarray(d2_by_time, float)
    if d2.size == 0:
        d2 = d2.reshape(0, 0)
    objects, times = d2.shape
    if objects < min_objects:
        return {"objects": int(objects), "times": int(times), "tested": 0, "passed": 0, "pass_share": None,
                "p_values": [], "note": f"fewer than {min_objects} objects: not tested"}
    tests = [chi2_test(d2[:, k], min_objects) for k in range(times)]
    tested = [t for t in tests if t["passes"] is not None]
    passed = sum(t["passes"] for t in tested)
    return {"objects": int(objects), "times": int(times), "tested": len(tested), "passed": int(passed),
            "pass_share": round(passed / len(tested), 4) if tested else None,
            "p_values": [t["p"] for t in tests]}


def mahalanobis_d2(error, covariance) -> np.ndarray:
    """``e^T C^-1 e`` of errors [..., 3] under covariances [..., 3, 3] (one unit system)."""
    e = np.asarray(error, float)
    c = np.asarray(covariance, float)
    return np.einsum("...i,...i->...", e, np.linalg.solve(c, e[..., None])[..., 0])
