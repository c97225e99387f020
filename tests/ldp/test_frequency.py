"""dprange.ldp.frequency: collect() in batches equals one batch and holds at most a batch of
reports."""

import numpy as np

from dprange.ldp import OUE


def test_collect_in_batches_equals_one_batch_and_bounds_memory():
    """collect() = randomise + add per batch: the same aggregate as one big batch from the same
    stream when the batch is a multiple of the encoder's block, and it never holds more than a
    batch of reports."""
    oue = OUE(4096, 1.0)  # encoder block: 2^22 / 4096 = 1024 users
    values = np.random.default_rng(0).integers(0, 4096, 4096)
    whole = oue.aggregator().add(oue.randomize(values, np.random.default_rng(1)))
    batched = oue.collect(values, np.random.default_rng(1), batch_users=1024)
    assert batched.n == whole.n == 4096
    np.testing.assert_array_equal(batched.summary, whole.summary)
    seen = []
    original = oue.randomize
    oue.randomize = lambda v, rng=None: seen.append(v.size) or original(v, rng)
    many = np.random.default_rng(0).integers(0, 4096, 40000)
    assert oue.collect(many, 2).n == 40000
    assert seen == [32768, 40000 - 32768]  # 16 MB of 512-byte reports per batch
