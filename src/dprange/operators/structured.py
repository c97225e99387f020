"""Structured operators: identity, prefix sums, total, tree and Haar levels, weighted and stacked
blocks, and Kronecker products, each with its Gram matrix and exact sensitivity in closed form.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import ParameterError
from .base import (
    DEFINITION_LIMIT,
    EXACT_CANDIDATES_LIMIT,
    FLOAT_EXACT_LIMIT,
    Gram,
    Operator,
    Sum,
    _exact_number,
    check_norm,
    check_relation,
)


class Identity(Operator):
    """I_n: one query per bin."""

    def __init__(self, n: int):
        super().__init__((n, n))
        self.n = int(n)

    def _apply(self, X):
        return np.array(X, dtype=float, copy=True)

    def _apply_adjoint(self, Y):
        return np.array(Y, dtype=float, copy=True)

    def answers(self, x):
        return np.array(x, copy=True)

    def gram(self) -> Operator:
        return Identity(self.n)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove 1; replace 2 (bins i and j change by -1 and +1) for n >= 2, else 0."""
        check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 2 if self.n >= 2 else 0


class Prefix(Operator):
    """Prefix sums: row r is x_0 + ... + x_r (n x n lower-triangular ones)."""

    def __init__(self, n: int):
        super().__init__((n, n))
        self.n = int(n)

    def _apply(self, X):
        return np.cumsum(X, axis=0)

    def _apply_adjoint(self, Y):
        return np.cumsum(Y[::-1], axis=0)[::-1]

    def sensitivity_power(self, norm, neighbours):
        """Bin i lies in rows i..n-1.  add/remove: column 0 has n ones -> n.  replace: a_i - a_j
        (i < j) is 1 on rows i..j-1 -> j - i, at most n - 1 (for both norms)."""
        check_norm(norm)
        return self.n if check_relation(neighbours) == "add_remove" else self.n - 1


class Total(Operator):
    """The total: one row of ones."""

    def __init__(self, n: int):
        super().__init__((1, n))
        self.n = int(n)

    def _apply(self, X):
        return X.sum(axis=0, keepdims=True)

    def _apply_adjoint(self, Y):
        return np.repeat(Y.reshape(1, -1), self.n, axis=0)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove 1; replace 0 (moving a record keeps the total)."""
        check_norm(norm)
        return 1 if check_relation(neighbours) == "add_remove" else 0


class TreeLevel(Operator):
    """The node counts of one depth of a level-uniform tree (``tree``: a
    :class:`~dprange.strategies.trees.TreeStrategy`): row j sums the bins of node j.  Hierarchical
    histograms (Hay, Rastogi, Miklau and Suciu, "Boosting the accuracy of differentially
    private histograms through consistency", PVLDB 2010) stack these levels."""

    def __init__(self, tree, depth: int):
        if not 0 <= depth <= tree.depth:
            raise ParameterError(f"depth must be 0..{tree.depth}, got {depth}")
        super().__init__((tree.level_sizes[depth], tree.n))
        self.tree = tree
        self.depth = int(depth)
        self.block = tree.block_sizes[depth]

    def _sum_blocks(self, X):
        rows = self.shape[0]
        pad = rows * self.block - X.shape[0]
        if pad:
            X = np.concatenate([X, np.zeros((pad,) + X.shape[1:], dtype=X.dtype)], axis=0)
        return X.reshape((rows, self.block) + X.shape[1:]).sum(axis=1)

    def _apply(self, X):
        return self._sum_blocks(X).astype(float)

    def _apply_adjoint(self, Y):
        return np.repeat(Y, self.block, axis=0)[: self.tree.n]

    def answers(self, x):
        return self._sum_blocks(np.asarray(x))

    def gram(self) -> Operator:
        return Gram(self)

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """One node per column: add/remove 1; replace 2 when the level has two real nodes."""
        check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 2 if self.shape[0] >= 2 else 0


class HaarLevel(Operator):
    """One level of Haar differences of a :class:`~dprange.strategies.trees.HaarStrategy`
    (Privelet: Xiao, Wang and Gehrke, "Differential privacy via wavelet transforms", ICDE
    2010): level 0 is the total of the padded domain; level k >= 1 holds, for each of the
    2^(k-1) nodes at depth k - 1 of the binary tree over N = 2^h padded bins, the count of its
    left half minus that of its right half."""

    def __init__(self, haar, level: int):
        if not 0 <= level <= haar.height:
            raise ParameterError(f"level must be 0..{haar.height}, got {level}")
        rows = 1 if level == 0 else 2 ** (level - 1)
        super().__init__((rows, haar.n))
        self.haar = haar
        self.level = int(level)
        self.half = haar.size // (2 * rows)  # leaves in each half of a node (level >= 1)

    def _pad(self, X):
        pad = self.haar.size - X.shape[0]
        if pad:
            X = np.concatenate([X, np.zeros((pad,) + X.shape[1:], dtype=X.dtype)], axis=0)
        return X

    def _differences(self, X):
        if self.level == 0:
            return X.sum(axis=0, keepdims=True)
        halves = self._pad(X).reshape((self.shape[0], 2, self.half) + X.shape[1:]).sum(axis=2)
        return halves[:, 0] - halves[:, 1]

    def _apply(self, X):
        return self._differences(X).astype(float)

    def _apply_adjoint(self, Y):
        if self.level == 0:
            return np.repeat(Y.reshape(1, -1), self.haar.n, axis=0)
        signed = np.stack([Y, -Y], axis=1)  # rows x 2 x k
        return np.repeat(signed.reshape((-1,) + Y.shape[1:]), self.half, axis=0)[: self.haar.n]

    def answers(self, x):
        return self._differences(np.asarray(x))

    def column_power(self, norm):
        return 1

    def sensitivity_power(self, norm, neighbours):
        """add/remove: each bin lies in one node, with sign +-1: 1.  replace: the total does
        not change (0); at level k >= 1 a record moving between the halves of one node changes
        its difference by 2 (2^p), and such a pair exists among the real bins since the first
        node's right half starts at 2^(h-k) <= 2^(h-1) < n; pairs in different nodes give
        1 + 1 = 2 <= 2^p."""
        p = check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return 1
        return 0 if self.level == 0 else 2**p


class Weighted(Operator):
    """diag(row_weights) A: a scalar or one weight per row.  A scalar weight w scales the
    sensitivity power by |w|^p exactly (``Fraction`` weights stay exact)."""

    def __init__(self, op: Operator, row_weights):
        super().__init__(op.shape)
        self.op = op
        self._row_weights: Any = None
        self.weight: Any
        if isinstance(row_weights, (int, float, Fraction, np.number)):
            self.weight = row_weights
        elif np.ndim(row_weights) == 0:
            self.weight = float(row_weights)
        else:
            self.weight = None
            self._row_weights = np.asarray(row_weights, dtype=float)
            if self._row_weights.shape != (op.shape[0],):
                raise ParameterError(f"expected {op.shape[0]} row weights, got {self._row_weights.shape}")

    @property
    def row_weights(self):
        """The weights as floats: a scalar, or one per row."""
        return float(self.weight) if self.weight is not None else self._row_weights

    def _scale(self, Y):
        return Y * (self.row_weights if self.weight is not None else self._row_weights.reshape(-1, 1))

    def _apply(self, X):
        return self._scale(self.op._apply(X))

    def _apply_adjoint(self, Y):
        return self.op._apply_adjoint(self._scale(Y))

    def column_power(self, norm):
        inner = self.op.column_power(norm)
        if inner is None or self.weight is None:
            return None
        power = abs(self.weight) ** norm
        return power if inner == 1 else power * inner

    def sensitivity_power(self, norm, neighbours):
        p = check_norm(norm)
        if self.weight is not None:
            return abs(self.weight) ** p * self.op.sensitivity_power(p, neighbours)
        return super().sensitivity_power(p, neighbours)


def _unweighted(op: Operator) -> tuple[Operator, Any]:
    """(inner operator, scalar weight) of a scalar-weighted operator; (op, 1) otherwise."""
    if isinstance(op, Weighted) and op.weight is not None:
        inner, w = _unweighted(op.op)
        return inner, op.weight * w
    return op, 1


class VStack(Operator):
    """Blocks stacked vertically (same number of columns).  Products concatenate / add the
    blocks' products; the levels of one tree are evaluated in one O(n) pass."""

    def __init__(self, blocks):
        self.blocks = list(blocks)
        if not self.blocks:
            raise ParameterError("a stack needs at least one block")
        n = self.blocks[0].shape[1]
        if any(b.shape[1] != n for b in self.blocks):
            raise ParameterError("every block of a stack must have the same number of columns")
        self.splits = np.cumsum([b.shape[0] for b in self.blocks])[:-1]
        super().__init__((sum(b.shape[0] for b in self.blocks), n))

    def _apply(self, X):
        return np.concatenate([b._apply(X) for b in self.blocks], axis=0)

    def _apply_adjoint(self, Y):
        parts = np.split(Y, self.splits, axis=0)
        return sum(b._apply_adjoint(part) for b, part in zip(self.blocks, parts))

    def _matvec(self, x):
        return np.concatenate([np.asarray(a, dtype=float) for a in block_answers(self.blocks, np.asarray(x))])

    def gram(self) -> Operator:
        return Sum([b.gram() for b in self.blocks])

    def column_power(self, norm):
        powers = [b.column_power(norm) for b in self.blocks]
        return None if any(v is None for v in powers) else sum(powers)

    def sensitivity_power(self, norm, neighbours):
        """Closed forms for scalar-weighted levels of one tree or of one Haar transform, exact
        sums of uniform column powers under add/remove, else the definition.

        Tree levels (replace): bins 0 and n - 1 lie in different nodes at every level with
        two or more real nodes, so the pair attains every level's maximum at once and the
        result is the sum of the levels' values.  Haar levels (replace): a pair whose lowest
        common ancestor is at depth k leaves levels <= k unchanged, changes one difference of
        level k + 1 by 2 and two differences of every lower level by 1, so the result is
        max_k [2^p w_{k+1}^p + 2 sum_{l > k+1} w_l^p]; every k < h has such a pair among the
        real bins.
        """
        p = check_norm(norm)
        check_relation(neighbours)
        if neighbours == "add_remove":
            uniform = self.column_power(p)
            if uniform is not None:
                return uniform
        inner = [_unweighted(b) for b in self.blocks]
        ops = [op for op, _ in inner]
        if len(inner) == 1:  # one block: Delta(w A) = |w| Delta(A) under both relations (its own, cached)
            return abs(inner[0][1]) ** p * ops[0].sensitivity_power(p, neighbours)
        if all(isinstance(op, TreeLevel) for op in ops) and _one_shape(ops, "tree", "depth"):
            return sum(abs(w) ** p * op.sensitivity_power(p, neighbours) for op, w in inner)
        if all(isinstance(op, HaarLevel) for op in ops) and _one_shape(ops, "haar", "level"):
            weights = {op.level: abs(w) ** p for op, w in inner}
            height = ops[0].haar.height
            best: Any = 0
            for k in range(height):
                below = sum(2 * weights.get(level, 0) for level in range(k + 2, height + 1))
                best = max(best, 2**p * weights.get(k + 1, 0) + below)
            return best
        return super().sensitivity_power(p, neighbours)


def _one_shape(ops, owner: str, index: str) -> bool:
    """Whether the operators are distinct levels of one tree (or one Haar transform)."""
    first = getattr(ops[0], owner)
    levels = [getattr(op, index) for op in ops]
    return all(getattr(op, owner) is first for op in ops) and len(set(levels)) == len(levels)


class Kron(Operator):
    """A_1 (x) A_2 (x) ... (x) A_k on x reshaped to (n_1, ..., n_k) in C order: each factor
    is applied along its own axis, so the product is never formed (cost sum_j m_1..m_j
    n_j..n_k, about the size of the data times the factors' costs)."""

    def __init__(self, factors):
        self.factors = list(factors)
        if not self.factors:
            raise ParameterError("a Kronecker product needs at least one factor")
        super().__init__((math.prod(f.shape[0] for f in self.factors), math.prod(f.shape[1] for f in self.factors)))
        #: The replace L2 sensitivity power, computed once (:meth:`_replace_l2_power`, O(N^2)).
        self._replace_l2: Any = None

    def _along_axes(self, X, adjoint: bool):
        k = X.shape[1]
        dims_in = [f.shape[1] if not adjoint else f.shape[0] for f in self.factors]
        current = X.reshape(dims_in + [k])
        for axis, factor in enumerate(self.factors):
            moved = np.moveaxis(current, axis, 0)
            rest = moved.shape[1:]
            flat = moved.reshape(moved.shape[0], -1)
            out = factor._apply_adjoint(flat) if adjoint else factor._apply(flat)
            current = np.moveaxis(out.reshape((out.shape[0],) + rest), 0, axis)
        return current.reshape(-1, k)

    def _apply(self, X):
        return self._along_axes(X, adjoint=False)

    def _apply_adjoint(self, Y):
        return self._along_axes(Y, adjoint=True)

    def gram(self) -> Operator:
        return Kron([f.gram() for f in self.factors])

    def design_digest(self) -> str | None:
        """The factors' digests combined, where every factor has one."""
        parts = [f.design_digest() for f in self.factors]
        if any(part is None for part in parts):
            return None
        return hashlib.sha256(
            " ".join(f"{f.shape}:{part}" for f, part in zip(self.factors, parts)).encode()
        ).hexdigest()

    def column_power(self, norm):
        powers = [f.column_power(norm) for f in self.factors]
        return None if any(v is None for v in powers) else math.prod(powers)

    def sensitivity_power(self, norm, neighbours):
        """add/remove: ||a (x) b||_p^p = ||a||_p^p ||b||_p^p, so the product of the factors'
        max column powers.  replace, p = 2: from the factors' Gram matrices,
        ||a_i (x) b_k - a_j (x) b_l||^2 = |a_i|^2 |b_k|^2 + |a_j|^2 |b_l|^2 - 2 (a_i.a_j)(b_k.b_l),
        maximised over all pairs without forming the product's rows (O(N^2) for N columns;
        equal pairs give 0).  replace, p = 1: no closed form is derived; the definition on
        the dense product.  Both need at most :data:`DEFINITION_LIMIT` columns."""
        p = check_norm(norm)
        if check_relation(neighbours) == "add_remove":
            return math.prod(f.sensitivity_power(p, "add_remove") for f in self.factors)
        if p == 2 and self.shape[1] <= DEFINITION_LIMIT:
            if self._replace_l2 is None:  # a calibration asks for it more than once
                self._replace_l2 = self._replace_l2_power()
            return self._replace_l2
        return super().sensitivity_power(p, neighbours)

    def _replace_l2_power(self):
        grams = [np.asarray(f.gram().dense(), dtype=float) for f in self.factors]
        count, block = _pair_distance_blocks(grams)
        maxima = [float(block(i).max()) for i in range(count)]  # O(N^2) in all
        best = max([0.0, *maxima])
        if not all(np.all(g == np.round(g)) for g in grams):
            return best
        # Integer factors: every value above is at most 4 D (D the largest squared column norm
        # of the product; |a_i . a_j| <= |a_i| |a_j|), exact in floats below 2^53.  Above it
        # (L2 strategies quantised at 2^16 on two axes) the float maximum can be rounded down,
        # so the pairs within the rounding error of it are evaluated again in integers.
        largest = math.prod(int(np.diag(g).max()) for g in grams)
        if 4 * largest < FLOAT_EXACT_LIMIT:
            return _exact_number(best)
        return self._exact_replace_l2_power(grams, block, maxima, best, largest)

    def _exact_replace_l2_power(self, grams, block, maxima: list[float], best: float, largest: int) -> int:
        """The exact maximum of ||a_i (x) b_k - a_j (x) b_l||^2 (Python integers) over the pairs
        whose float value is within twice the rounding error of the float maximum ``best`` (one of them
        attains the exact maximum); an integer upper bound where there are too many such pairs
        to evaluate.  ``block(i)`` and ``maxima`` are the float pass's (:func:`_pair_distance_blocks`):
        only the blocks whose maximum reaches the threshold are computed again."""
        # Each value is a sum of three products of len(grams) integers: relative error at most
        # (len(grams) + 2) 2^-53 of each product, whose absolute values sum to at most 4 D.
        error = (len(grams) + 3) * 4.0 * largest * 2.0**-52
        candidates: list[tuple[int, int, int, int]] = []
        for i, block_max in enumerate(maxima):
            if block_max < best - 2.0 * error:
                continue
            j, k, m = np.nonzero(block(i) >= best - 2.0 * error)
            candidates.extend(zip(itertools.repeat(i), j.tolist(), k.tolist(), m.tolist()))
            if len(candidates) > EXACT_CANDIDATES_LIMIT:
                return math.ceil(Fraction(best) + Fraction(error))
        exact_grams = [[[int(v) for v in row] for row in g] for g in grams]
        shape = [g.shape[0] for g in grams[1:]]

        def entry(k: int, m: int) -> int:  # (G_2 (x) ... (x) G_d)_{km} in integers
            ks, ms = np.unravel_index(k, shape), np.unravel_index(m, shape)
            return math.prod(g[a][b] for g, a, b in zip(exact_grams[1:], ks, ms))

        g1 = exact_grams[0]
        return max(
            g1[i][i] * entry(k, k) + g1[j][j] * entry(m, m) - 2 * g1[i][j] * entry(k, m) for i, j, k, m in candidates
        )


def _pair_distance_blocks(grams):
    """(rows of the first factor, ``block(i)``): the squared distances between column (i, k)
    and every column (j, l) of the Kronecker product whose factors have Gram matrices
    ``grams``, as an array [j, k, l], from the factors' Gram matrices (O(N^2) over all i)."""
    first, rest = grams[0], grams[1:]
    other = np.ones((1, 1))
    for g in rest:
        other = np.kron(other, g)
    d_first, d_other = np.diag(first), np.diag(other)

    def block(i: int) -> np.ndarray:
        # rows j of the first factor, columns (k, l) of the other factors
        return (
            d_first[i] * d_other[None, :, None]
            + d_first[:, None, None] * d_other[None, None, :]
            - 2.0 * first[i][:, None, None] * other[None, :, :]
        )

    return first.shape[0], block


def block_answers(blocks, x) -> list[np.ndarray]:
    """Exact answers of every block to x, one array per block: the levels of one tree in one
    O(n) pass (:meth:`TreeStrategy.level_sums`), the levels of one Haar transform in one pass
    (:meth:`HaarStrategy.coefficients`), other blocks by their own products.  Integer x gives
    integer answers for integer blocks (measurement adds integer noise to them)."""
    x = np.asarray(x)
    trees = {id(b.tree): b.tree for b in blocks if isinstance(b, TreeLevel)}
    haars = {id(b.haar): b.haar for b in blocks if isinstance(b, HaarLevel)}
    tree_levels = {key: tree.level_sums(x) for key, tree in trees.items() if _count(blocks, TreeLevel, key) > 1}
    haar_levels = {key: haar.coefficients(x) for key, haar in haars.items() if _count(blocks, HaarLevel, key) > 1}
    out = []
    for b in blocks:
        if isinstance(b, TreeLevel) and id(b.tree) in tree_levels:
            out.append(tree_levels[id(b.tree)][b.depth])
        elif isinstance(b, HaarLevel) and id(b.haar) in haar_levels:
            out.append(haar_levels[id(b.haar)][b.level])
        else:
            out.append(b.answers(x))
    return out


def _count(blocks, kind, key) -> int:
    owner = "tree" if kind is TreeLevel else "haar"
    return sum(1 for b in blocks if isinstance(b, kind) and id(getattr(b, owner)) == key)


def exact_fraction(value) -> Fraction:
    """A sensitivity power as a Fraction (exact for int, Fraction and float)."""
    return value if isinstance(value, Fraction) else Fraction(value)
