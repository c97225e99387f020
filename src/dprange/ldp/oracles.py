"""Local-DP frequency oracles: client randomisers and server aggregators.

Cormode, Kulkarni, Srivastava, "Answering Range Queries Under Local Differential Privacy",
PVLDB 2019 (section 3), after Wang et al. (USENIX Security 2017).  Every user holds
one value v in {0..D-1} and sends a randomised report; the aggregator sums reports and
returns unbiased estimates of the fraction f_z of users holding each z.

* ``GRR`` (k-ary randomised response): report v w.p. p = e^eps / (e^eps + D - 1), else one
  of the other D - 1 values uniformly (run in its mixture form, see "Exact randomisation").
  Best for small D.
* ``OUE`` (optimised unary encoding): a D-bit vector; v's bit is 1 w.p. 1/2, every other
  bit w.p. q = 1 / (e^eps + 1).  Estimate (the paper prints a sign typo; corrected):
  f_z = (C_z / N - q) / (1/2 - q).
* ``OLH`` (optimised local hashing): a random hash h: [D] -> [g], g ~ e^eps + 1, and GRR of
  h(v) over [g]; the aggregator counts the users whose report equals h(z).  See "OLH hash
  families" below: by default the hash is drawn from an exactly pairwise-balanced public
  pool, so aggregation costs O(N + pool) instead of O(N D) and stays exactly unbiased.
* ``HRR`` (Hadamard randomised response): the domain is padded to D' = 2^k; a user samples a
  row j of the Hadamard matrix and sends j and the sign (-1)^popcount(j & v), flipped w.p.
  1 / (1 + e^eps).  Frequencies come back by a fast Walsh-Hadamard transform.

OLH hash families.  The estimator f_z = (C_z / N - 1/g) / (p - 1/g) is unbiased exactly when a
user holding v != z supports z with probability 1/g, i.e. when her hash collides v and z with
probability exactly 1/g (then P = p/g + (1 - 1/g)(1 - p)/(g - 1) = 1/g); privacy never depends on
the hash (for a fixed hash the client is GRR over [g]).

* ``hash="linear"`` (the default when g is prime and g^(d+1) <= 2^23): the pool is every
  a in GF(g)^d, g^d >= D, and h_a(x) = sum_i a_i x_i mod g over the base-g digits of x.  For
  x != y some digit differs and a . (x - y) = 0 for exactly g^(d-1) of the g^d vectors a: every
  pair collides with probability exactly 1/g, so the estimator is exactly unbiased and the
  variance formula below exact (a pool of public hash functions per user is Wang et al.'s own
  suggestion; this one is balanced for every pair, not only in expectation).  The default g is
  the prime next to e^eps + 1 (below or above) with the smaller variance factor
  (e^eps - 1 + g)^2 / ((e^eps - 1)^2 (g - 1)): g = 3 at eps = 1 costs 2% variance against the
  real optimum 3.72.  Aggregation: a (pool x g) table of report counts, then
  C_z = sum_a table[a, h_a(z)] by a digit-wise transform in O(d g^(d+2)) (g^2 <= D) or directly
  in O(g^d D) (timing: docs/ldp.md).
* ``hash="mod-p"``: h_s(x) = ((a x + b) mod P) mod g, P = 2^31 - 1, (a, b) from a per-user
  62-bit seed (exact in expectation over the seed; aggregation O(N D)); the default where the
  linear pool does not fit (g not prime when given, or a large g: eps above ~4.3 at
  D = 2^16, above ~5.5 at D = 1024), with g = round(e^eps) + 1.  ``hash_pool=k`` is its documented fast
  variant: users pick one of k public hash functions, so aggregation costs O(k D + N).  The
  estimate is unbiased over the random draw of the pool; for a fixed pool, item z carries the
  bias g/(g-1) sum_{v != z} f_v (c_vz - 1/g), where c_vz is the pool's collision rate of v and
  z (standard deviation sqrt((1/g)(1 - 1/g)/k) per pair).  Use k in the thousands: at D = 1024,
  eps = 1 and uniform data, the exact expected sum of all estimates is 0.92 for our k = 4096
  pool (per item -8e-5, against a standard deviation of 1.9e-3 at N = 10^6).  Pool indices
  are mixed by SplitMix64 so that the pool behaves like k independent draws of the family.

OUE coins.  OUE draws one coin per bit, D per user, so the coin width dominates its cost.  A coin
of ``coin_bits`` = 16 bits (32 or 62 where 16 bits would lower epsilon by more than a relative
2^-10: epsilon below ~0.06 or above ~10; see ``oue_coin_bits``) is compared with Q = ceil(2^bits /
(1 + L)): q' = Q / 2^bits >= 1/(1 + L) rounds the lie probability up, so (1 - q')/q' <= L <= e^eps
and epsilon is never exceeded; ``realised_epsilon`` is the exact ln((1 - q')/q') (eps = 1:
0.99995).  16-bit coins read fewer random bytes than 62-bit ones (speed: docs/privacy.md, "Local DP
randomisers").  Reports hold D bits per user (8 GB for 10^6 users at D = 2^16): ``collect``
randomises and aggregates in batches of 16 MB of reports.

Exact randomisation.  The clients draw only uniform integers U on [0, 2^62) (``integers``
with a scalar bound, as the central samplers of :mod:`dprange.privacy.samplers`) and compare them with
integer thresholds, so every probability the code realises is a rational P / 2^62 known
exactly (``coins_below`` draws U's 32 high bits, and its 30 low bits only where the high bits
tie with the threshold's).

* GRR and OLH run k-ary randomised response (k = D, or g) in its mixture form: keep the truth
  if U < T, else report a uniform value of [k].  Then p' = t + (1 - t)/k and q' = (1 - t)/k
  with t = T / 2^62: the family of "keep w.p. p, else one of the k - 1 others", with
  p' >= q' by construction.  T is the largest integer with
  p'/q' = (1 + (k - 1) t)/(1 - t) <= L, where L <= e^epsilon is a rigorous rational lower
  bound (``exp_lower_bound``).
* OUE sets each bit if its coin is below Q, then redraws the user's own bit as a coin below
  half its range (exactly 1/2); HRR flips the sign if U < Q.  Q is the smallest integer with
  (1 - q')/q' <= L, q' = Q / 2^62 (OUE: Q / 2^coin_bits).

Every oracle checks its worst ratio of output probabilities over two inputs,
``privacy_ratio()``, against L in exact rational arithmetic when it is built, so its privacy
holds exactly for the distribution the code samples, as for the central samplers after
Canonne, Kamath and Steinke (NeurIPS 2020).  Float comparisons ``random() < p`` would realise p
on a 2^-53 grid and could overspend epsilon by a relative ~2^-53 / q (floating point breaking a
privacy proof, as in Mironov, CCS 2012; docs/privacy.md, "Local DP randomisers").  The properties ``p``, ``q`` and
``slope`` are the realised probabilities (``exact_p``, ``exact_q`` as Fractions), so the
estimators and variances are those of what is sampled.  An epsilon so small that the
thresholds carry no information (T = 0, or Q = 2^61: about epsilon < k 2^-62) is refused
with a ParameterError.

Largest epsilon.  Each oracle refuses an epsilon at which its randomiser could no longer be
run faithfully: the probability of a "lie" (q, or 1 - p for GRR) must stay >= 2^-32, so that
62-bit integer thresholds realise it to a relative 2^-30 and e^epsilon never overflows
(OUE, HRR: epsilon <= ln(2^32 - 1) ~ 22.18; GRR: epsilon <= ln((D - 1)(2^32 - 1))); OLH's hash
range g = round(e^eps) + 1 must stay <= 2^16, so that ((a x + b) mod P) mod g is uniform on [g]
to a relative g / P <= 2^-15 (epsilon <= ln(65535) ~ 11.09).  Larger epsilons give no
meaningful local privacy anyway; ``max_epsilon()`` reports each oracle's bound.

Variances.  dprange estimates the fractions of the N users actually present (like the
central mechanisms, which estimate the actual histogram), so the exact variance of an
estimate is a sum over users of Bernoulli variances: with c = p - q (OUE: 1/2 - q),

    Var(f_z) = [f_z p (1 - p) + (1 - f_z) q (1 - q)] / (N c^2)          (GRR, OUE, OLH*)
    Var(f_z) = [1 / (2p - 1)^2 - f_z] / N                               (HRR)

(*OLH with q = 1/g, exact for a universal hash family).  Cormode et al. write HRR's as
V_F + (1 - f^2)/N for users drawn at random from a distribution; for a fixed population the
f^2 becomes f, as here.  ``variance(n)`` returns the f = 0 part (what inference weights use);
``variance(n, f)`` the exact value.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np

from .._validation import check_positive_int
from ..errors import ParameterError, ReportError
from ..privacy.samplers import resolve_rng
from ..registry import FREQUENCY_ORACLES, Citation
from .coins import (
    COIN_BITS,
    MERSENNE,
    MIN_LIE_PROBABILITY,
    OLH_MAX_G,
    ONE,
    PROBABILITY_BITS,
    check_values,
    coins_below,
    exp_lower_bound,
    keep_threshold,
    lie_threshold,
    oue_coin_bits,
    randomised_response,
    small_coins,
)
from .frequency import FrequencyOracle
from .hashing import (
    _checked,
    _splitmix64,
    best_prime_g,
    fwht,
    linear_hash,
    linear_pool_size,
    linear_support_counts,
    parity,
)
from .reports import Reports


class GRR(FrequencyOracle):
    """k-ary randomised response (see module doc)."""

    name = "grr"
    fields = ("value",)

    def max_epsilon(self) -> float:
        # 1 - p = (D - 1) / (e^eps + D - 1) >= 2^-32
        return math.log(self.domain_size - 1) + math.log(1.0 / MIN_LIE_PROBABILITY - 1.0)

    @property
    def keep_threshold(self) -> int:
        """T: a user keeps her value if her coin is below T, else reports a uniform value of [D]."""
        return keep_threshold(self.epsilon, self.domain_size)

    @property
    def exact_p(self) -> Fraction:
        return Fraction(self.keep_threshold, ONE) + self.exact_q

    @property
    def exact_q(self) -> Fraction:
        return Fraction(ONE - self.keep_threshold, ONE * self.domain_size)

    def _min_epsilon_hint(self) -> float:
        return 2.0 * self.domain_size * 2.0**-PROBABILITY_BITS

    def randomize(self, values, rng=None) -> Reports:
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        return self._reports({"value": randomised_response(v, self.domain_size, self.keep_threshold, source)}, v.size)

    def summarize(self, reports):
        return np.bincount(_checked(reports.data["value"], self.domain_size), minlength=self.domain_size).astype(float)

    def output_distribution(self, value):
        out = np.full(self.domain_size, self.q)
        out[value] = self.p
        return out


class OUE(FrequencyOracle):
    """Optimised unary encoding (see module doc, "OUE coins").  Encoding costs O(N D) coins of
    ``coin_bits`` bits; reports hold D bits per user (aggregate big collections in batches:
    :meth:`FrequencyOracle.collect`)."""

    name = "oue"
    fields = ("bits",)
    chunk = 1 << 16

    def __init__(self, domain_size, epsilon, coin_bits=None):
        if coin_bits is not None and coin_bits not in COIN_BITS:
            raise ParameterError(f"OUE coin_bits must be one of {', '.join(map(str, COIN_BITS))}, got {coin_bits!r}")
        self._given_bits = coin_bits
        super().__init__(domain_size, epsilon)

    @property
    def coin_bits(self) -> int:
        """Bits per coin: the narrowest of 16, 32 whose rounding of q up to a multiple of
        2^-bits lowers epsilon by at most a relative 2^-10 (``oue_coin_bits``), else 62."""
        if self._given_bits is not None:
            return self._given_bits
        return oue_coin_bits(self.epsilon)

    @property
    def lie_threshold(self) -> int:
        """Q: the bit of a value one does not hold is set if its coin (on [0, 2^coin_bits)) is
        below Q = ceil(2^coin_bits / (1 + L)), so (1 - q')/q' <= L <= e^epsilon."""
        if self.coin_bits == PROBABILITY_BITS:
            return lie_threshold(self.epsilon)
        return math.ceil((1 << self.coin_bits) / (1 + exp_lower_bound(self.epsilon)))

    @property
    def own_threshold(self) -> int:
        """One's own bit is set if its coin is below 2^(coin_bits - 1): exactly 1/2."""
        return 1 << (self.coin_bits - 1)

    @property
    def exact_p(self) -> Fraction:
        return Fraction(self.own_threshold, 1 << self.coin_bits)

    @property
    def exact_q(self) -> Fraction:
        return Fraction(self.lie_threshold, 1 << self.coin_bits)

    def params(self):
        return {"coin_bits": self.coin_bits}

    def privacy_ratio(self) -> Fraction:
        """Inputs a, b differ in two bits' laws: the worst output sets a's bit and clears b's,
        p'(1 - q') / (q'(1 - p')) (or the inverse, when q' > p'; never here)."""
        p, q = self.exact_p, self.exact_q
        ratio = p * (1 - q) / (q * (1 - p))
        return max(ratio, 1 / ratio)

    def _coins_below(self, source, shape, threshold: int) -> np.ndarray:
        if self.coin_bits == PROBABILITY_BITS:
            return coins_below(source, shape, threshold)
        return small_coins(source, shape, self.coin_bits) < threshold

    def randomize(self, values, rng=None) -> Reports:
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        rows = max(1, self.chunk * 64 // self.domain_size)
        packed = []
        for start in range(0, v.size, rows):  # every bit w.p. q', then each user's own bit afresh w.p. 1/2
            part = v[start : start + rows]
            bits = self._coins_below(source, (part.size, self.domain_size), self.lie_threshold)
            bits[np.arange(part.size), part] = self._coins_below(source, part.size, self.own_threshold)
            packed.append(np.packbits(bits, axis=1))
        width = (self.domain_size + 7) // 8
        data = np.concatenate(packed) if packed else np.zeros((0, width), dtype=np.uint8)
        return self._reports({"bits": data}, v.size)

    def report_bytes(self) -> int:
        return (self.domain_size + 7) // 8

    def summarize(self, reports):
        bits = np.asarray(reports.data["bits"])
        if bits.dtype != np.uint8:
            raise ReportError(f"OUE reports must hold packed bytes (uint8), got {bits.dtype}")
        if bits.ndim != 2 or bits.shape[1] != (self.domain_size + 7) // 8 or bits.shape[0] != reports.n:
            raise ReportError("OUE reports have the wrong shape for this domain")
        total = np.zeros(self.domain_size, dtype=np.int64)
        rows = max(1, (1 << 23) // self.domain_size)  # unpacked blocks of ~8 MB, whatever D is
        for start in range(0, bits.shape[0], rows):
            unpacked = np.unpackbits(bits[start : start + rows], axis=1, count=self.domain_size)
            total += unpacked.sum(axis=0, dtype=np.int64)
        return total.astype(float)


class OLH(FrequencyOracle):
    """Optimised local hashing (see module doc, "OLH hash families")."""

    name = "olh"
    fields = ("seed", "value")

    def __init__(self, domain_size, epsilon, g=None, hash_pool=None, hash=None):
        self._given_g = g if isinstance(g, (int, np.integer)) and not isinstance(g, bool) else None
        super().__init__(domain_size, epsilon)
        if self.domain_size >= MERSENNE:  # x and x + P would always collide, and a x could overflow
            raise ParameterError(f"OLH supports domains of fewer than 2^31 - 1 values, got {self.domain_size}")
        if hash not in (None, "linear", "mod-p"):
            raise ParameterError(f"OLH hash must be 'linear' or 'mod-p', got {hash!r}")
        if hash == "linear" and hash_pool is not None:
            raise ParameterError("OLH's linear hash family has its own pool; leave hash_pool unset or use hash='mod-p'")
        self.hash_pool = None if hash_pool is None else check_positive_int(hash_pool, "hash_pool")
        self._given_hash = hash
        if g is not None:
            self.g = check_positive_int(g, "g", minimum=2)
        elif hash != "mod-p" and hash_pool is None:
            self.g = best_prime_g(self.epsilon)
            if hash is None and linear_pool_size(self.domain_size, self.g) is None:
                self.g = int(round(math.exp(self.epsilon))) + 1  # too large for the linear pool
        else:
            self.g = int(round(math.exp(self.epsilon))) + 1
        if self.g > OLH_MAX_G:
            raise ParameterError(
                f"OLH supports a hash range g <= {OLH_MAX_G}, got {self.g}; the hash would no longer be uniform on [g]"
            )
        pool = linear_pool_size(self.domain_size, self.g) if hash_pool is None and hash != "mod-p" else None
        if hash == "linear" and pool is None:
            raise ParameterError(
                f"OLH's linear hash family needs a prime g with g^(d+1) <= 2^23 (g^d >= D = {self.domain_size}), "
                f"got g = {self.g}; use hash='mod-p'"
            )
        self.hash_family = "linear" if pool is not None else "mod-p"
        if pool is not None:
            self.hash_pool, self.digits = pool, round(math.log(pool, self.g))
        super()._configure()

    def _configure(self) -> None:
        """Deferred to the end of ``__init__``: the thresholds need g."""

    def _min_epsilon_hint(self) -> float:
        return 2.0 * self.g * 2.0**-PROBABILITY_BITS

    def max_epsilon(self) -> float:
        # the default g = round(e^eps) + 1 <= 2^16; with a given g, GRR's bound over [g]
        if self._given_g is None:
            return math.log(OLH_MAX_G - 1)
        return math.log(max(self._given_g, 2) - 1) + math.log(1.0 / MIN_LIE_PROBABILITY - 1.0)

    def _limit_reason(self) -> str:
        return (
            f"its hash range g = round(e^epsilon) + 1 must stay <= {OLH_MAX_G} for the hash to be uniform; "
            "use GRR or OUE for a larger epsilon"
        )

    def params(self):
        if self.hash_family == "linear":
            return {"g": self.g, "hash": "linear"}
        return {"g": self.g, "hash_pool": self.hash_pool}

    @property
    def keep_threshold(self) -> int:
        """T: a user reports her hashed value if her coin is below T, else a uniform value of [g]."""
        return keep_threshold(self.epsilon, self.g)

    @property
    def exact_p(self) -> Fraction:
        """P(report = h(v)) for a user holding v."""
        return Fraction(self.keep_threshold, ONE) + Fraction(ONE - self.keep_threshold, ONE * self.g)

    @property
    def exact_q(self) -> Fraction:
        """P(report = h(z)) for a user holding v != z, over a uniform draw of a universal hash:
        p'/g + (1 - 1/g)(1 - t)/g = 1/g."""
        return Fraction(1, self.g)

    def privacy_ratio(self) -> Fraction:
        """For a fixed hash, GRR over [g]: p' / ((1 - t)/g) when h(a) != h(b)."""
        return self.exact_p / Fraction(ONE - self.keep_threshold, ONE * self.g)

    def _hash_params(self, seeds):
        """(a, b) of h(x) = ((a x + b) mod P) mod g from 62-bit seeds (or pool indices)."""
        mixed = _splitmix64(seeds)
        a = (mixed % np.uint64(MERSENNE - 1)).astype(np.int64) + 1
        b = ((mixed >> np.uint64(31)) % np.uint64(MERSENNE)).astype(np.int64)
        return a, b

    def hash(self, seeds, x):
        """h_s(x), elementwise over broadcast seeds and x: ((a_s x + b_s) mod P) mod g, or for
        the linear family sum_i a_i x_i mod g over the base-g digits of s and x."""
        if self.hash_family == "linear":
            return linear_hash(np.asarray(seeds, dtype=np.int64), np.asarray(x, dtype=np.int64), self.g, self.digits)
        a, b = self._hash_params(seeds)
        return ((a * np.asarray(x, dtype=np.int64) + b) % MERSENNE) % self.g

    def randomize(self, values, rng=None) -> Reports:
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        top = self.hash_pool if self.hash_pool is not None else 1 << 62
        seeds = source.integers(0, top, v.size).astype(np.int64)
        hashed = self.hash(seeds, v)
        reported = randomised_response(hashed, self.g, self.keep_threshold, source)
        return self._reports({"seed": seeds, "value": reported}, v.size)

    def hash_table(self, seeds, items) -> np.ndarray:
        """h_s(x) for every seed (rows) and item (columns), as uint32: O(len(seeds) len(items)).

        The Mersenne reduction (x mod P = (x & P) + (x >> 31), twice, then one subtraction)
        replaces 64-bit division; the final mod g runs on 32-bit integers."""
        if self.hash_family == "linear":
            return self.hash(np.asarray(seeds)[:, None], np.asarray(items)[None, :]).astype(np.uint32)
        a, b = self._hash_params(seeds)
        h = a[:, None] * np.asarray(items, dtype=np.int64)[None, :]
        h += b[:, None]
        h = (h & MERSENNE) + (h >> 31)
        h = (h & MERSENNE) + (h >> 31)
        h = h.astype(np.uint32)
        h[h >= MERSENNE] -= np.uint32(MERSENNE)
        h %= np.uint32(self.g)
        return h

    def summarize(self, reports):
        """Support counts C_z = #{users u : h_u(z) = y_u}.

        Per-user hashes: O(N D) work, vectorised over blocks of (users x items) of ~2^20
        entries and spread over two threads (numpy releases the GIL).  Hash pool of size k:
        a (k x g) table of report counts, then C_z = sum_j table[j, h_j(z)]: O(k D + N)."""
        seeds = np.asarray(reports.data["seed"])
        if seeds.dtype.kind not in "iu":
            raise ReportError("OLH hash seeds must be integers")
        seeds = seeds.astype(np.int64)
        y = _checked(reports.data["value"], self.g)
        items = np.arange(self.domain_size, dtype=np.int64)
        if self.hash_pool is not None:
            if seeds.size and seeds.min() < 0:
                raise ReportError("OLH hash seeds must be non-negative")
            if seeds.size and seeds.max() >= self.hash_pool:
                raise ReportError("OLH report names a hash outside the pool")
            table = np.bincount(seeds * self.g + y, minlength=self.hash_pool * self.g).reshape(self.hash_pool, self.g)
            if self.hash_family == "linear" and self.g * self.g <= self.domain_size:  # O(d g^(d+2)) < O(d g^d D)
                return linear_support_counts(table, self.g, self.digits)[: self.domain_size]
            counts = np.zeros(self.domain_size)
            rows = max(1, (1 << 20) // self.domain_size)
            for start in range(0, self.hash_pool, rows):  # blocks of pool entries, not single ones
                pool = np.arange(start, min(start + rows, self.hash_pool))
                h = self.hash_table(pool, items).astype(np.int64)
                counts += np.take_along_axis(table[pool], h, axis=1).sum(axis=0)
            return counts
        if seeds.size and seeds.min() < 0:
            raise ReportError("OLH hash seeds must be non-negative")
        rows = max(1, (1 << 20) // self.domain_size)
        y32 = y.astype(np.uint32)

        def block(start):
            h = self.hash_table(seeds[start : start + rows], items)
            return np.count_nonzero(h == y32[start : start + rows, None], axis=0)

        starts = range(0, seeds.size, rows)
        if len(starts) < 4:
            return sum((block(s) for s in starts), np.zeros(self.domain_size, dtype=np.int64)).astype(float)
        with ThreadPoolExecutor(max_workers=2) as executor:
            return sum(executor.map(block, starts), np.zeros(self.domain_size, dtype=np.int64)).astype(float)

    def output_distribution(self, value):
        """Exact P(report = (hash h, y)) averaged over a uniformly drawn hash from a pool."""
        pool = self.hash_pool or 16
        out = np.zeros((pool, self.g))
        for j in range(pool):
            h = int(self.hash(np.array([j]), np.array([value]))[0])
            out[j] = (1 - self.p) / (self.g - 1)
            out[j, h] = self.p
        return out.ravel() / pool


class HRR(FrequencyOracle):
    """Hadamard randomised response (see module doc)."""

    name = "hrr"
    fields = ("row", "sign")

    def __init__(self, domain_size, epsilon):
        super().__init__(domain_size, epsilon)
        self.size = 1 << max(1, (self.domain_size - 1).bit_length())

    @property
    def lie_threshold(self) -> int:
        """Q: the sign is flipped if the user's coin is below Q."""
        return lie_threshold(self.epsilon)

    @property
    def exact_p(self) -> Fraction:
        return 1 - self.exact_q

    @property
    def exact_q(self) -> Fraction:
        return Fraction(self.lie_threshold, ONE)

    @property
    def estimate_size(self):
        return self.size

    def variance(self, n, frequencies=None):
        f = np.zeros(self.size) if frequencies is None else np.resize(np.asarray(frequencies, dtype=float), self.size)
        return (1.0 / self.slope**2 - f) / n  # slope = 2p' - 1

    def randomize(self, values, rng=None, signs=None) -> Reports:
        """Reports for values (or signed unit vectors: ``signs`` +-1 per user, for HaarHRR)."""
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        rows = source.integers(0, self.size, v.size).astype(np.int64)
        bit = parity(rows & v)
        sign = 1 - 2 * bit
        if signs is not None:
            sign = sign * np.asarray(signs, dtype=np.int64)
        flip = coins_below(source, v.size, self.lie_threshold)
        sign = np.where(flip, -sign, sign)
        return self._reports({"row": rows, "sign": sign.astype(np.int8)}, v.size)

    def summarize(self, reports):
        rows = _checked(reports.data["row"], self.size)
        sign = np.asarray(reports.data["sign"])
        if sign.dtype.kind != "i" or sign.shape != rows.shape or not np.all(np.abs(sign) == 1):
            raise ReportError("HRR reports need one sign of +-1 per row index")
        return np.bincount(rows, weights=sign.astype(float), minlength=self.size)

    def estimate_from(self, summary, n):
        return fwht(summary) / (n * self.slope)

    def output_distribution(self, value):
        out = np.zeros((self.size, 2))
        for j in range(self.size):
            s = 1 - 2 * int(bin(j & value).count("1") % 2)
            out[j, 0 if s == 1 else 1] = self.p / self.size
            out[j, 1 if s == 1 else 0] = self.q / self.size
        return out.ravel()


# ------------------------------------------------------------------ the registry
WANG_2017 = Citation(
    "Wang, Blocki, Li and Jha",
    "Locally Differentially Private Protocols for Frequency Estimation",
    "USENIX Security 2017",
)


FREQUENCY_ORACLES.add(
    GRR,
    summary="k-ary randomised response (Warner, JASA 1965): the true value or a uniform other, best for small domains",
    citation=Citation(
        "Kairouz, Oh and Viswanath", "Extremal Mechanisms for Local Differential Privacy", "NeurIPS 2014"
    ),
)


FREQUENCY_ORACLES.add(
    OUE,
    summary="optimised unary encoding: one randomised bit per value (D bits per report)",
    citation=WANG_2017,
)


FREQUENCY_ORACLES.add(
    OLH,
    summary="optimised local hashing: randomised response of a random hash of the value (O(log D) bits per report)",
    citation=WANG_2017,
)


FREQUENCY_ORACLES.add(
    HRR,
    summary="Hadamard randomised response: one signed Hadamard coefficient per report",
    citation=Citation(
        "Cormode, Kulkarni and Srivastava",
        "Answering Range Queries Under Local Differential Privacy",
        "PVLDB 2019",
    ),
)


def make_oracle(name: str, domain_size: int, epsilon: float, **kwargs) -> FrequencyOracle:
    """The registered oracle called ``name`` (:data:`dprange.registry.FREQUENCY_ORACLES`)."""
    return FREQUENCY_ORACLES.lookup(name).build(domain_size, epsilon, **kwargs)
