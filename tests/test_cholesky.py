"""dprange.cholesky: a well-conditioned Cholesky certifies only what it should."""

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
