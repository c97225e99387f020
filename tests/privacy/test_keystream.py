"""dprange.privacy._keystream: the secure source is ChaCha20 keyed from the OS (RFC 8439 keystream)
and never repeats; without cryptography it reads os.urandom."""

import os

import numpy as np
import pytest

from dprange.privacy._keystream import Keystream
from dprange.privacy.noise import noise_variance
from dprange.privacy.samplers import SecureRandom, sample_discrete_laplace


def test_keystream_is_chacha20_keyed_from_the_os_and_never_repeats():
    """Two default streams differ; a fixed key reproduces the RFC 8439 keystream of ChaCha20
    (section 2.4.2 test vector's key, counter 0, zero nonce: first block known) and moves to a
    new nonce on rekeying; a forked child rekeys."""
    a, b = Keystream(), Keystream()
    assert a.backend == "chacha20"
    assert not np.array_equal(a.read(64), b.read(64))
    key = bytes(32)
    first = Keystream(key).read(64).tobytes()
    # RFC 8439 appendix A.1, test vector 1: all-zero key and nonce, block counter 0
    assert first.hex().startswith("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7")
    stream = Keystream(key)
    stream.read(16)
    stream._used = 1 << 36  # as after 64 GiB: the next read rekeys
    assert stream.read(64).tobytes() != first
    if hasattr(os, "fork"):
        parent = Keystream()
        parent.read(8)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.write(write, parent.read(32).tobytes())
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 32) != parent.read(32).tobytes()


def test_without_cryptography_the_stream_reads_os_urandom(monkeypatch):
    from dprange.privacy import _keystream

    monkeypatch.setattr(_keystream, "_cipher_factory", lambda: None)
    stream = Keystream()
    assert stream.backend == "os.urandom"
    assert stream.read(1000).dtype == np.uint8 and not np.array_equal(stream.read(64), stream.read(64))
    source = SecureRandom()
    assert source._stream.backend == "os.urandom"
    draws = sample_discrete_laplace(2.0, 20_000, source)
    assert draws.var() == pytest.approx(float(noise_variance("discrete_laplace", 2.0)), rel=0.08)
