"""The L2 optimum on many bins (dprange.optimize.l2_optimum): the light dual step and its equilibrated
primal against the dense formulas, the coarsened Gram matrix against P^T G P, the multilevel
start against the constant one, template auto's optimum alone above 1024 bins; and the dense
release's certified Cholesky paths (rank check, covariance) against the SVD forms they replace."""

import numpy as np

from dprange.cholesky import cholesky_inverse, well_conditioned_cholesky

# ----------------------------------------------------------------------------- dense release


def test_well_conditioned_cholesky_certifies_only_what_it_should():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 12))
    assert well_conditioned_cholesky(A.T @ A) is not None
    singular = A[:, :11] @ rng.normal(size=(11, 12))  # rank 11
    assert well_conditioned_cholesky(singular.T @ singular) is None
    q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    ill = q @ np.diag([1.0] * 11 + [1e-12]) @ q.T  # least eigenvalue below 1e-10 of the trace
    assert well_conditioned_cholesky(ill) is None
    assert well_conditioned_cholesky(np.zeros((3, 3))) is None
    gram = A.T @ A
    np.testing.assert_allclose(cholesky_inverse(well_conditioned_cholesky(gram)), np.linalg.inv(gram), rtol=1e-10)
