"""sda.orbit.pair_covariance against hand-built cases: the shared density error written as one common random
variable (x_i = a_i + sigma_i z g_i, so x1 - x2 = a1 - a2 + z (sigma1 g1 - sigma2 g2)), the Pc integrated by
tests.cdm_reference's quadrature, and the miss probability of an isotropic Gaussian from the non-central
chi-square distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sda.orbit.pair_covariance import Dcp, miss_probability, pair_covariance, pc2d_pair
from sda.orbit.pc import pc2d_foster_rtn
from tests.cdm_reference import pc2d

# object 1: R = x, T = y, N = z. Object 2 moves along +z: R = x, N = r x v / |r x v| = -y, T = N x R = +z.
R1, V1 = np.array([7.0e6, 0.0, 0.0]), np.array([0.0, 7.5e3, 0.0])
R2, V2 = np.array([7.0e6 + 300.0, 0.0, 0.0]), np.array([0.0, 0.0, 7.5e3])
M1 = np.eye(3)
M2 = np.column_stack([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
# each object's own error without the density term (RTN, m^2), and its density terms (RTN, m and m/s)
A1 = np.diag([40.0, 900.0, 25.0])
A2 = np.diag([100.0, 2500.0, 64.0])
G1 = np.array([-2.0, 400.0, 1.0, -0.4, 0.002, 0.0])
G2 = np.array([-3.0, 650.0, -2.0, -0.7, 0.003, 0.0])
S1, S2 = 0.25, 0.3


def _own(a, sigma, g):
    """An object's 6x6 RTN covariance holding its density term sigma^2 g g^T."""
    cov = np.zeros((6, 6))
    cov[:3, :3] = a
    cov[3:, 3:] = np.eye(3) * 1e-4
    return cov + sigma ** 2 * np.outer(g, g)


def test_pair_covariance_is_the_common_variable_model():
    pair = pair_covariance(R1, V1, _own(A1, S1, G1), R2, V2, _own(A2, S2, G2), Dcp(S1, G1), Dcp(S2, G2))
    shared = S1 * (M1 @ G1[:3]) - S2 * (M2 @ G2[:3])
    expected = M1 @ A1 @ M1.T + M2 @ A2 @ M2.T + np.outer(shared, shared)
    assert pair.corrected
    np.testing.assert_allclose(pair.cov, expected, rtol=1e-12, atol=1e-9)
    # by hand, entry (y, y): y is object 1's T and object 2's -N, so 900 + 64 + (0.25 * 400 - 0.3 * 2)^2
    assert pair.cov[1, 1] == pytest.approx(900.0 + 64.0 + (0.25 * 400.0 - 0.3 * 2.0) ** 2, rel=1e-12)


def test_without_both_terms_the_sum():
    c1, c2 = _own(A1, S1, G1), _own(A2, S2, G2)
    for d1, d2 in ((Dcp(S1, G1), None), (None, Dcp(S2, G2)), (None, None)):
        pair = pair_covariance(R1, V1, c1, R2, V2, c2, d1, d2)
        assert not pair.corrected
        np.testing.assert_allclose(pair.cov, M1 @ c1[:3, :3] @ M1.T + M2 @ c2[:3, :3] @ M2.T, rtol=1e-12)
        ours = pc2d_pair(R1, V1, c1, R2, V2, c2, 20.0, d1, d2)
        plain = pc2d_foster_rtn(R1, V1, c1, R2, V2, c2, 20.0)
        assert ours.pc == pytest.approx(plain.pc, rel=1e-12)


def test_pc_on_the_pair_covariance_against_quadrature():
    c1, c2 = _own(A1, S1, G1), _own(A2, S2, G2)
    shared = S1 * (M1 @ G1[:3]) - S2 * (M2 @ G2[:3])
    expected_cov = M1 @ A1 @ M1.T + M2 @ A2 @ M2.T + np.outer(shared, shared)
    expected = pc2d(R1, V1, expected_cov, R2, V2, np.zeros((3, 3)), 20.0)
    got = pc2d_pair(R1, V1, c1, R2, V2, c2, 20.0, Dcp(S1, G1), Dcp(S2, G2))
    assert got.valid and got.pc == pytest.approx(expected, rel=1e-6)
    # and it is not the uncorrected Pc: the shared along-track error is most of each object's
    plain = pc2d(R1, V1, M1 @ c1[:3, :3] @ M1.T, R2, V2, M2 @ c2[:3, :3] @ M2.T, 20.0)
    assert abs(got.pc / plain - 1.0) > 0.1


def test_not_positive_semidefinite_falls_back_to_the_sum():
    """Covariances without their density terms (as an external sender might write) and large sensitivities:
    subtracting the cross term would leave a negative variance; the sum is used and the result says why."""
    c1, c2 = _own(A1, 0.0, G1), _own(A2, 0.0, G2)
    pair = pair_covariance(R1, V1, c1, R2, V2, c2, Dcp(S1, G1 * 10), Dcp(S2, -G2 * 10))
    assert not pair.corrected and "positive semi-definite" in pair.reason
    np.testing.assert_allclose(pair.cov, M1 @ c1[:3, :3] @ M1.T + M2 @ c2[:3, :3] @ M2.T, rtol=1e-12)


@pytest.mark.parametrize("radius, sigma", [(1000.0, 400.0), (1000.0, 2000.0), (500.0, 100.0), (5000.0, 3000.0)])
def test_miss_probability_of_an_isotropic_gaussian(radius, sigma):
    """Relative covariance sigma^2 I (half from each object: isotropic, so any frame), miss 300 m across the
    relative velocity: P(|x| < R) = P(ncx2(2, 300^2/sigma^2) < R^2/sigma^2)."""
    cov = np.eye(6) * sigma ** 2 / 2.0
    got = miss_probability(R1, V1, cov, R2, V2, cov, radius)
    expected = stats.ncx2.cdf(radius ** 2 / sigma ** 2, 2, 300.0 ** 2 / sigma ** 2)
    assert got == pytest.approx(expected, rel=1e-7)


def test_miss_probability_uses_the_pair_covariance():
    c1, c2 = _own(A1, S1, G1), _own(A2, S2, G2)
    shared = S1 * (M1 @ G1[:3]) - S2 * (M2 @ G2[:3])
    expected_cov = M1 @ A1 @ M1.T + M2 @ A2 @ M2.T + np.outer(shared, shared)
    expected = pc2d(R1, V1, expected_cov, R2, V2, np.zeros((3, 3)), 350.0)
    assert miss_probability(R1, V1, c1, R2, V2, c2, 350.0, Dcp(S1, G1), Dcp(S2, G2)) == pytest.approx(
        expected, rel=1e-6)


def test_no_miss_probability_without_relative_motion():
    cov = np.eye(6) * 100.0
    assert miss_probability(R1, V1, cov, R1 + np.array([300.0, 0.0, 0.0]), V1, cov, 1000.0) is None
