"""Random bytes for :class:`dprange.privacy.samplers.SecureRandom`: a ChaCha20 keystream keyed from the OS.

ChaCha20 (Bernstein, "ChaCha, a variant of Salsa20", SASC 2008; RFC 8439) is a stream cipher
whose keystream under a uniformly random 256-bit key is computationally indistinguishable
from uniform bytes, the standard construction of a cryptographically secure generator (the
Linux kernel's ``getrandom`` is built the same way).  The key is 32 bytes of ``os.urandom``;
the stream is encrypting zeros with the ``cryptography`` package (OpenSSL), several times
faster than reading ``os.urandom`` directly (docs/privacy.md, "Figures by module").

Rekeying: after 2^36 bytes (the 32-bit block counter, started at 0, covers 2^38), and in a
forked child process (a copy of the parent's state would otherwise repeat its stream).
Without ``cryptography`` every byte comes from ``os.urandom`` (same distribution, slower).
"""

from __future__ import annotations

import os

import numpy as np

_REKEY_BYTES = 1 << 36  # well inside ChaCha20's 2^32 blocks of 64 bytes per (key, nonce)


_CHUNK = 1 << 20  # bytes encrypted per call: a reused zero block bounds the scratch memory


_ZEROS = np.zeros(_CHUNK, dtype=np.uint8)


def _cipher_factory():
    """``key, nonce -> encryptor`` of ChaCha20, or None when ``cryptography`` is missing."""
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms  # noqa: PLC0415 - ~20 ms, first use
    except ImportError:  # pragma: no cover - cryptography is a core dependency
        return None

    def make(key: bytes, nonce: bytes):
        return Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()

    return make


class Keystream:
    """Uniform random bytes: ChaCha20 under an ``os.urandom`` key (see module doc).

    ``key`` (32 bytes) fixes the stream: reproducible, hence predictable; for tests only.
    """

    def __init__(self, key: bytes | None = None):
        if key is not None and len(key) != 32:
            raise ValueError("a keystream key has 32 bytes")
        self._fixed_key = key
        self._factory = _cipher_factory()
        self._encryptor = None
        self._pid = -1
        self._used = 0
        self._keys = 0  # keys (nonces, for a fixed key) used so far

    @property
    def backend(self) -> str:
        return "chacha20" if self._factory is not None else "os.urandom"

    def _rekey(self) -> None:
        assert self._factory is not None
        if self._fixed_key is None:
            key, nonce = os.urandom(32), os.urandom(12)
        else:  # a fixed key moves on to the next nonce: the stream never repeats
            key, nonce = self._fixed_key, self._keys.to_bytes(12, "little")
        self._encryptor = self._factory(key, bytes(4) + nonce)  # block counter 0, then the nonce
        self._pid, self._used, self._keys = os.getpid(), 0, self._keys + 1

    def read(self, count: int) -> np.ndarray:
        """``count`` uniform random bytes as a uint8 array."""
        if self._factory is None:
            return np.frombuffer(os.urandom(count), dtype=np.uint8)
        if (
            self._encryptor is None
            or self._used + count > _REKEY_BYTES
            or (self._fixed_key is None and os.getpid() != self._pid)
        ):
            self._rekey()
        out = np.empty(count, dtype=np.uint8)
        encryptor = self._encryptor
        assert encryptor is not None
        for start in range(0, count, _CHUNK):  # cost: ~0.6 ns per byte
            stop = min(start + _CHUNK, count)
            encryptor.update_into(_ZEROS[: stop - start], out[start:stop])
        self._used += count
        return out
