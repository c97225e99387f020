"""Exact generalised least squares on a level-uniform tree, in O(number of nodes).

This is the constrained inference of Hay et al. ("Boosting the accuracy of differentially
private histograms through consistency", PVLDB 2010), in the general form of Qardaji et al.
("Understanding Hierarchical Methods for Differentially Private Histograms", PVLDB 2013,
section 3.3: weighted averaging then mean consistency) extended to

* unequal, per-level or per-node noise variances (any budget split, local-DP levels),
* any per-level branching factors and incomplete last blocks (n not a product),
* a measured, unmeasured or known (public) root.

The two passes are the exact Gaussian smoother on the tree.  Upward ("weighted averaging"),
every node gets its best estimate z_u from its own subtree and that estimate's variance w_u:
combine the node's noisy count y_u (variance v_u) with the sum S_u of its children's z,
whose variance is W_u = sum of the children's w:

    z_u = (y_u W_u + S_u v_u) / (W_u + v_u),      w_u = W_u v_u / (W_u + v_u).

Downward ("mean consistency"), the root keeps z_root (or the public total) and every child
receives a share of its parent's residual proportional to its variance:

    xhat_c = z_c + (w_c / W_u) (xhat_u - S_u).

The result equals the dense GLS estimate (A^T V^-1 A)^-1 A^T V^-1 y (tests check it).

Exact error of a range.  Given the true count t_u of a node and all measurements, the counts
of its children are Gaussian with mean z + (w / W)(t_u - S) and covariance
C_u = diag(w) - w w^T / W (the from-below estimates conditioned on their sum).  For a range
R, let Q_u be the part of R's estimate inside node u.  Then E[Q_u | t_u] is g_u t_u plus a
constant and Var[Q_u | t_u] = s_u, with, over u's children c,

    g_u = sum_c g_c w_c / W_u,       s_u = sum_c s_c + g^T C_u g,

fully covered nodes having g = 1, s = 0 and disjoint ones g = 0, s = 0.  Only the at most two
boundary nodes per level are partial, so Var(range) = s_root + g_root^2 P_root (P_root the
root's posterior variance, 0 when the total is public) costs O(depth) vectorised operations
per batch of queries, with prefix sums of w for the covered siblings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..strategies.trees import TreeStrategy

#: Largest padding (nodes beyond 4 n) a saved tree may claim: guards loading against a
#: corrupt branching that would allocate without bound.
MAX_PADDING = 1 << 22


def _as_level_array(value, size: int, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value, dtype=float), (size,)).astype(float, copy=True)
    if np.any(np.isnan(arr)):
        raise ParameterError(f"{name} contains NaN")
    return arr


def _level_view(value, size: int, name: str) -> np.ndarray:
    """A level's variances as a read-only array of ``size``: a broadcast view (no memory) of
    one variance per level, else a checked copy (error models only read them)."""
    if np.ndim(value) == 0:
        view = np.broadcast_to(np.asarray(value, dtype=float), (size,))
        if np.isnan(view[:1]).any():
            raise ParameterError(f"{name} contains NaN")
        return view
    return _as_level_array(value, size, name)


def family_sums(values: np.ndarray, size: int, b: int) -> np.ndarray:
    """Sums of consecutive groups of b of ``values`` (length size * b): for small b a sum of
    b strided slices, which numpy runs faster than a reduction over a short axis (equal up to
    the order of the additions; docs/inference.md)."""
    if b > 8:
        return values.reshape(size, b).sum(axis=1)
    out = values[0::b].copy()
    for k in range(1, b):
        out += values[k::b]
    return out


def _pad(values: np.ndarray, size: int) -> np.ndarray:
    if values.size == size:
        return values
    out = np.zeros(size, dtype=float)
    out[: values.size] = values
    return out


class TreeErrorModel:
    """The exact covariance of tree GLS, implicitly: data-independent (depends on variances).

    Attributes
    ----------
    from_below_variance : w per depth (variance of each node's subtree-only estimate).
    root_variance : the root's posterior variance (0 when the total is public).
    """

    def __init__(
        self,
        strategy: TreeStrategy,
        up_variances,
        child_variance_sums,
        root_variance,
        level_variances=None,
        known_total: bool = False,
    ):
        self.strategy = strategy
        self.from_below_variance = up_variances
        self._child_variance_sums = child_variance_sums
        self.root_variance = float(root_variance)
        #: The noise variances the model was built from (per depth; kept for :meth:`to_dict`).
        self.level_variances = level_variances
        self.known_total = bool(known_total)

    def to_dict(self) -> dict:
        """The tree and its per-depth noise variances: all :meth:`from_dict` needs (compact:
        one number per depth unless the variances differ between nodes)."""
        if self.level_variances is None:
            raise ParameterError("this tree error model does not know the noise variances it was built from")
        tree = self.strategy
        return {
            "kind": "tree",
            "n": tree.n,
            "branching": [int(b) for b in tree.branching],
            "measure_root": tree.measure_root,
            "known_total": self.known_total,
            "level_variances": [compact_variances(v) for v in self.level_variances],
        }

    @classmethod
    def from_dict(cls, data: dict) -> TreeErrorModel:
        """The error model described by :meth:`to_dict` (rebuilt exactly, O(number of nodes))."""
        tree = TreeStrategy(
            data["n"],
            list(data["branching"]),
            measure_root=bool(data["measure_root"]),
            known_total=bool(data["known_total"]),
        )
        padded_nodes = sum(size * b for size, b in zip(tree.level_sizes, tree.branching))
        if padded_nodes > 4 * tree.n + MAX_PADDING:
            raise ParameterError(
                f"the branching {list(tree.branching)} pads {tree.n} bins to {padded_nodes} nodes; "
                "a saved tree is never that wide"
            )
        variances = [
            None if v is None else np.asarray(v, dtype=float) if isinstance(v, list) else float(v)
            for v in data["level_variances"]
        ]
        return tree_error_model(tree, variances, known_total=bool(data["known_total"]))

    def range_variance(self, lo, hi) -> np.ndarray:
        """Exact variance of the estimated count of bins lo..hi (inclusive), vectorised.

        O(depth) numpy operations on arrays of the queries' size.
        """
        tree = self.strategy
        shape, left, right = flat_ranges(lo, hi, tree.n)
        g_left = np.ones(left.size)
        g_right = np.ones(left.size)
        s_left = np.zeros(left.size)
        s_right = np.zeros(left.size)
        for d in range(tree.depth, 0, -1):
            b = tree.branching[d - 1]
            parents = tree.level_sizes[d - 1]
            w = _pad(self.from_below_variance[d], parents * b)
            cum = np.concatenate([[0.0], np.cumsum(w)])
            big_w = self._child_variance_sums[d - 1]
            p_left, p_right = left // b, right // b
            split = left < right
            merge = split & (p_left == p_right)
            apart = split & ~merge
            w_l, w_r = w[left], w[right]
            # Left boundary node: itself (weight g_left) and, unless merging, its later siblings.
            after = np.where(apart, cum[p_left * b + b] - cum[left + 1], 0.0)
            between = np.where(merge, cum[right] - cum[left + 1], 0.0)
            before = np.where(apart, cum[right] - cum[p_right * b], 0.0)
            right_own = np.where(merge, g_right * w_r, 0.0)
            right_sq = np.where(merge, g_right**2 * w_r, 0.0)
            lin_left = g_left * w_l + after + between + right_own
            sq_left = g_left**2 * w_l + after + between + right_sq
            wp_left = big_w[p_left]
            new_g_left = _safe_div(lin_left, wp_left)
            new_s_left = s_left + np.where(merge, s_right, 0.0) + sq_left - _safe_div(lin_left**2, wp_left)
            lin_right = g_right * w_r + before
            sq_right = g_right**2 * w_r + before
            wp_right = big_w[p_right]
            new_g_right = np.where(apart, _safe_div(lin_right, wp_right), new_g_left)
            new_s_right = np.where(apart, s_right + sq_right - _safe_div(lin_right**2, wp_right), new_s_left)
            g_left, s_left, g_right, s_right = new_g_left, new_s_left, new_g_right, new_s_right
            left, right = p_left, p_right
        variance = s_left + g_left**2 * self.root_variance
        # Clear the rounding residue of exact zeros (e.g. the public total); never biases.
        return np.maximum(variance, 0.0).reshape(shape)

    def prefix_variances(self) -> PrefixVariances:
        """Var of every prefix, every suffix and every bin, from one top-down O(nodes) pass.

        Equal to ``range_variance(0, j)``, ``range_variance(j + 1, n - 1)`` and
        ``range_variance(j, j)`` for all j at once (see :func:`one_pass_variances`), without
        the O(n depth) cost of asking for n ranges.  Computed once per model and kept.
        """
        cached = getattr(self, "_prefix_variances", None)
        if cached is None:
            cached = one_pass_variances(self)
            self._prefix_variances = cached
        return cached

    def nested_variances(self, order) -> np.ndarray:
        """Exact variance of the estimated sum over the first k leaves of ``order`` (distinct leaf
        indices), for every k = 1..len(order): :meth:`query_variance` of the nested indicators
        without building them.  Its recursion is a sum over parents of (sq - lin^2 / W), the
        parents' g feeding the level above; adding one leaf changes g along one path only, so
        each step updates one parent a level: O(depth) a leaf, O(len(order) depth) in all."""
        tree = self.strategy
        order = np.asarray(order, dtype=np.int64).ravel()
        if order.size and (order.min() < 0 or order.max() >= tree.n or np.unique(order).size != order.size):
            raise ParameterError(f"order must hold distinct leaf indices in [0, {tree.n})")
        depth = tree.depth
        child_weights = {
            d: _pad(self.from_below_variance[d], tree.level_sizes[d - 1] * tree.branching[d - 1])
            for d in range(1, depth + 1)
        }
        g = {d: np.zeros(tree.level_sizes[d - 1] * tree.branching[d - 1]) for d in range(1, depth + 1)}
        lin = {d: np.zeros(tree.level_sizes[d - 1]) for d in range(1, depth + 1)}
        sq = {d: np.zeros(tree.level_sizes[d - 1]) for d in range(1, depth + 1)}
        root_g, total = 0.0, 0.0
        out = np.empty(order.size)

        def term(d: int, parent: int, big_w: float) -> float:  # a parent's sq - lin^2 / W (0 / 0 as 0)
            return sq[d][parent] - (lin[d][parent] ** 2 / big_w if big_w > 0 else 0.0)

        for k, leaf in enumerate(order):
            index, before, after = int(leaf), 0.0, 1.0
            for d in range(depth, 0, -1):  # cost: one parent a level
                w = child_weights[d][index]
                g[d][index] = after
                parent = index // tree.branching[d - 1]
                big_w = self._child_variance_sums[d - 1][parent]
                old = term(d, parent, big_w)
                lin[d][parent] += w * (after - before)
                sq[d][parent] += w * (after * after - before * before)
                total += term(d, parent, big_w) - old
                index = parent
                before = g[d - 1][index] if d > 1 else root_g
                after = lin[d][parent] / big_w if big_w > 0 else 0.0
            root_g = after
            out[k] = max(total + root_g * root_g * self.root_variance, 0.0)
        return out

    def query_variance(self, weights) -> np.ndarray:
        """Exact variance of the estimate of sum_i q_i x_i for each row q of ``weights``.

        The same recursion as :meth:`range_variance` run over every node (leaves start with
        g = q_i, s = 0): O(number of nodes) per query, vectorised over a (k, n) batch.
        """
        tree = self.strategy
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        if q.shape[-1] != tree.n:
            raise ParameterError(f"query weights must have {tree.n} entries per query")
        g = q
        s = np.zeros(q.shape[0])
        for d in range(tree.depth, 0, -1):
            b = tree.branching[d - 1]
            parents = tree.level_sizes[d - 1]
            w = _pad(self.from_below_variance[d], parents * b).reshape(parents, b)
            g_pad = np.zeros((q.shape[0], parents * b))
            g_pad[:, : g.shape[1]] = g
            g_blocks = g_pad.reshape(q.shape[0], parents, b)
            lin = (g_blocks * w).sum(axis=2)
            sq = (g_blocks**2 * w).sum(axis=2)
            big_w = self._child_variance_sums[d - 1]
            s = s + (sq - _safe_div(lin**2, big_w)).sum(axis=1)
            g = _safe_div(lin, big_w)
        out = s + g[:, 0] ** 2 * self.root_variance
        out = np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]


class TreeEstimate(TreeErrorModel):
    """The GLS estimate on a tree (``leaves``) together with its exact error model."""

    def __init__(
        self,
        strategy,
        up_estimates,
        up_variances,
        child_variance_sums,
        node_estimates,
        root_variance,
        level_variances=None,
        known_total: bool = False,
    ):
        super().__init__(strategy, up_variances, child_variance_sums, root_variance, level_variances, known_total)
        self.from_below = up_estimates
        self._nodes = node_estimates

    @property
    def leaves(self) -> np.ndarray:
        return self._nodes[-1]

    def node_estimate(self, depth: int) -> np.ndarray:
        """Consistent estimates of the real nodes at ``depth`` (0 = root)."""
        return self._nodes[depth]


#: Nodes per block of the top-down pass: a block's few state arrays stay in the CPU cache.
ONE_PASS_BLOCK = 1 << 15


@dataclass(frozen=True)
class PrefixVariances:
    """Exact variances of the tree GLS estimate, one entry per bin j (a tree of n bins).

    prefix : Var(x_0 + ... + x_j).
    rest : Var(x_{j+1} + ... + x_{n-1}) (0 for j = n - 1).
    bins : Var(x_j).
    total : Var(x_0 + ... + x_{n-1}) (0 when the total is public).
    """

    prefix: np.ndarray
    rest: np.ndarray
    bins: np.ndarray
    total: float


@dataclass
class _DescentState:
    """Per-node moments of the top-down pass over a block of nodes at one depth.

    For a node u with smoothed error e_u = x_u - xhat_u and A_u the error of the estimate of
    all bins left of u: ``before`` = Var A_u, ``cross`` = Cov(A_u, e_u), ``own`` = Var e_u,
    ``root_before`` = Cov(e_root, A_u), ``root_own`` = Cov(e_root, e_u).
    """

    before: np.ndarray
    cross: np.ndarray
    own: np.ndarray
    root_before: np.ndarray
    root_own: np.ndarray


def one_pass_variances(model: TreeErrorModel) -> PrefixVariances:
    """All prefix, suffix and bin variances of tree GLS in one top-down O(nodes) pass.

    The smoothed errors of tree GLS form a Gaussian tree (the Rauch-Tung-Striebel form of
    the smoother; Hay et al., PVLDB 2010; Qardaji et al., PVLDB 2013, section 3.3): the root
    error e_root has variance P_root and, below a node u with children c (from-below
    variances w_c, W_u their sum), e_c = (w_c / W_u) e_u + r_c, where r is independent of
    everything above u and across nodes, with covariance C_u = diag(w) - w w^T / W_u.
    Writing a_c = w_c / W_u and alpha_k = sum_{c<k} a_c, the moments of
    :class:`_DescentState` of child k follow from its parent's:

        before_k = before_u + alpha_k^2 own_u + 2 alpha_k cross_u + W_<k - W_<k^2 / W_u,
        cross_k  = a_k (cross_u + alpha_k own_u) - W_<k w_k / W_u,
        own_k    = a_k^2 own_u + w_k - w_k^2 / W_u,
        root_before_k = root_before_u + alpha_k root_own_u,   root_own_k = a_k root_own_u,

    (W_<k the sum of w over the siblings before k), and at a bin j
    Var(prefix_j) = before + 2 cross + own, Var(rest_j) = P_root + Var(prefix_j) -
    2 (root_before + root_own).  The pass runs in blocks of :data:`ONE_PASS_BLOCK` nodes so
    its temporaries stay in cache; O(number of nodes) time, O(n) memory for the result.
    """
    n = model.strategy.n
    if model.strategy.level_sizes[0] != 1:
        raise ParameterError("the one-pass variances need a tree with a single root")
    out = PrefixVariances(np.empty(n), np.empty(n), np.empty(n), float(max(model.root_variance, 0.0)))
    descend_to_bins(model, lambda first, state: _write_bins(first, state, model.root_variance, out))
    np.maximum(out.prefix, 0.0, out=out.prefix)
    np.maximum(out.rest, 0.0, out=out.rest)
    np.maximum(out.bins, 0.0, out=out.bins)
    out.rest[-1] = 0.0
    return out


def descend_to_bins(model: TreeErrorModel, sink) -> None:
    """Run the top-down pass of :func:`one_pass_variances`, handing the moments of the bins to
    ``sink(first, state)`` block by block, in bin order (first = the block's first bin).

    At most a few blocks of :data:`ONE_PASS_BLOCK` nodes are alive at a time: a sink that
    reduces its blocks (sums of variances) keeps the whole pass in O(depth x block) memory."""
    tree = model.strategy
    if tree.level_sizes[0] != 1:
        raise ParameterError("the one-pass variances need a tree with a single root")
    p_root = model.root_variance
    zero = np.zeros(1)
    root = _DescentState(zero, zero, np.array([p_root]), zero, np.array([p_root]))
    _descend(model, 0, 0, root, sink)


def _descend(model: TreeErrorModel, depth: int, first: int, state: _DescentState, sink) -> None:
    """Carry the moments of nodes first.. at ``depth`` down to the bins, block by block."""
    tree = model.strategy
    if depth == tree.depth:
        sink(first, state)
        return
    b = tree.branching[depth]
    parents = state.own.size
    if b > ONE_PASS_BLOCK:  # wide nodes (Flat: one root over n bins): their children in blocks
        for start in range(parents):
            parent = _DescentState(*(getattr(state, f)[start : start + 1] for f in _STATE_FIELDS))
            offset = 0.0  # sum of w over the siblings of earlier blocks
            for k0 in range(0, b, ONE_PASS_BLOCK):
                k1 = min(b, k0 + ONE_PASS_BLOCK)
                children, offset = _children(model, depth, first + start, parent, k0, k1, offset)
                if children.own.size:
                    _descend(model, depth + 1, (first + start) * b + k0, children, sink)
        return
    step = max(1, ONE_PASS_BLOCK // b)
    for start in range(0, parents, step):
        stop = min(parents, start + step)
        block = _DescentState(*(getattr(state, f)[start:stop] for f in _STATE_FIELDS))
        child_first = (first + start) * b
        children, _ = _children(model, depth, first + start, block, 0, b, 0.0)
        _descend(model, depth + 1, child_first, children, sink)


_STATE_FIELDS = ("before", "cross", "own", "root_before", "root_own")


def _children(
    model: TreeErrorModel, depth: int, first: int, parent: _DescentState, k0: int, k1: int, offset: float
) -> tuple[_DescentState, float]:
    """The moments of children k0..k1-1 of parents first.. at ``depth`` (the real ones only;
    k0 > 0 or k1 < b only for a single parent, whose earlier children's w sum to ``offset``),
    and the sum of w up to child k1 - 1 (the next block's offset)."""
    tree = model.strategy
    b = tree.branching[depth]
    count = parent.own.size
    width = k1 - k0
    size = tree.level_sizes[depth + 1]
    lo = first * b + k0
    real = max(0, min(size, lo + (count - 1) * b + width) - lo)
    flat = np.zeros(count * width)
    flat[:real] = np.asarray(model.from_below_variance[depth + 1], dtype=float)[lo : lo + real]
    w = flat.reshape(count, width)
    big_w = np.asarray(model._child_variance_sums[depth], dtype=float)[first : first + count, None]
    inverse = _safe_div(1.0, big_w)  # 0 where a parent's children are all exact
    w_before = np.cumsum(w, axis=1)  # cost: one pass over the block (the sums of earlier siblings)
    next_offset = offset + float(w_before[-1, -1]) if count == 1 and width else 0.0
    w_before -= w
    if offset:
        w_before += offset
    share = w * inverse
    alpha = w_before * inverse
    own_u, cross_u = parent.own[:, None], parent.cross[:, None]
    before = alpha * own_u
    before += 2 * cross_u
    before *= alpha
    before += parent.before[:, None]
    before += w_before * (1.0 - alpha)
    cross = share * (cross_u + alpha * own_u) - alpha * w
    own = share * share * own_u + w * (1.0 - share)
    root_before = parent.root_before[:, None] + alpha * parent.root_own[:, None]
    root_own = share * parent.root_own[:, None]
    moments = (before, cross, own, root_before, root_own)
    return _DescentState(*(m.ravel()[:real] for m in moments)), next_offset


def _write_bins(first: int, state: _DescentState, root_variance: float, out: PrefixVariances) -> None:
    stop = first + state.own.size
    prefix = state.before + 2 * state.cross + state.own
    out.prefix[first:stop] = prefix
    out.bins[first:stop] = state.own
    out.rest[first:stop] = root_variance + prefix - 2 * (state.root_before + state.root_own)


def bin_variances(model, n: int) -> np.ndarray:
    """Var of each of the n bins' estimates: the one-pass values for tree models, else n ranges."""
    if hasattr(model, "prefix_variances"):
        return model.prefix_variances().bins
    idx = np.arange(n)
    return np.asarray(model.range_variance(idx, idx), dtype=float)


def compact_variances(value):
    """A level's noise variance as JSON: None (unmeasured), one number when all nodes share
    it, else the list of per-node variances."""
    if value is None:
        return None
    arr = np.asarray(value, dtype=float).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        return None
    return float(arr[0]) if np.all(arr == arr[0]) else arr.tolist()


def flat_ranges(lo, hi, n: int):
    """Validated inclusive ranges as (original shape, flat lo copy, flat hi copy)."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
    left, right = lo.ravel().copy(), hi.ravel().copy()
    if left.size and (left.min() < 0 or right.max() >= n or np.any(left > right)):
        raise ParameterError(f"ranges must satisfy 0 <= lo <= hi < {n}")
    return lo.shape, left, right


def _safe_div(num, den):
    den = np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def tree_gls(strategy: TreeStrategy, level_values, level_variances, *, total=None) -> TreeEstimate:
    """Exact GLS estimate of the bins from noisy node counts of a level-uniform tree.

    Parameters
    ----------
    strategy : the tree.
    level_values : list over depths 0..h; each an array of the noisy counts of the real nodes
        at that depth, or None when the depth is not measured.  The leaves (depth h) must be
        measured unless the tree is a single node.
    level_variances : list over depths 0..h of the noise variance of each node (a scalar or
        an array over the level's nodes); None or inf for an unmeasured depth.
    total : the public total (known root), or None.

    Complexity O(number of nodes) time and memory.
    """
    h = strategy.depth
    if len(level_values) != h + 1 or len(level_variances) != h + 1:
        raise ParameterError(f"expected values and variances for {h + 1} depths")
    up_z: list = [None] * (h + 1)
    up_w: list = [None] * (h + 1)
    child_w: list = [None] * h
    child_z: list = [None] * h
    for d in range(h, -1, -1):
        size = strategy.level_sizes[d]
        y = level_values[d]
        v = level_variances[d]
        measured = y is not None and v is not None and np.all(np.isfinite(v))
        if measured:
            y = _as_level_array(y, size, f"values at depth {d}")
            v = _as_level_array(v, size, f"variances at depth {d}")
            if np.any(v < 0):
                raise ParameterError("noise variances must be non-negative")
        if d == h:
            if not measured:
                if total is not None and h == 0:
                    up_z[d], up_w[d] = np.array([float(total)]), np.zeros(1)
                    continue
                raise ParameterError("the leaves of the tree must be measured")
            up_z[d], up_w[d] = y, v
            continue
        b = strategy.branching[d]
        s = family_sums(_pad(up_z[d + 1], size * b), size, b)
        big_w = family_sums(_pad(up_w[d + 1], size * b), size, b)
        child_z[d], child_w[d] = s, big_w
        if measured:
            denom = big_w + v
            up_z[d] = np.where(denom > 0, _safe_div(y * big_w + s * v, denom), y)
            up_w[d] = _safe_div(big_w * v, denom)
        else:
            up_z[d], up_w[d] = s, big_w
    if total is not None:
        if strategy.level_sizes[0] != 1:
            raise ParameterError("a known total needs a tree with a single root")
        up_z[0] = np.array([float(total)])
        up_w[0] = np.zeros(1)
    nodes: list = [None] * (h + 1)
    nodes[0] = up_z[0].copy()
    for d in range(h):
        b = strategy.branching[d]
        size = strategy.level_sizes[d]
        residual = nodes[d] - child_z[d]
        share = _safe_div(_pad(up_w[d + 1], size * b).reshape(size, b), child_w[d][:, None])
        child = _pad(up_z[d + 1], size * b).reshape(size, b) + share * residual[:, None]
        nodes[d + 1] = child.ravel()[: strategy.level_sizes[d + 1]]
    return TreeEstimate(strategy, up_z, up_w, child_w, nodes, up_w[0][0], list(level_variances), total is not None)


def tree_error_model(strategy: TreeStrategy, level_variances, *, known_total: bool = False) -> TreeErrorModel:
    """The exact error model of tree GLS without any data (the variances suffice).

    Use it to compute expected errors before touching data; O(number of nodes).  Only the
    variance half of :func:`tree_gls`'s upward pass runs (the error of GLS does not depend
    on the values; Hay et al., PVLDB 2010): no estimate of zeros is built.
    """
    h = strategy.depth
    if len(level_variances) != h + 1:
        raise ParameterError(f"expected values and variances for {h + 1} depths")
    up_w: list = [None] * (h + 1)
    child_w: list = [None] * h
    for d in range(h, -1, -1):
        size = strategy.level_sizes[d]
        v = level_variances[d]
        measured = v is not None and np.all(np.isfinite(v))
        if measured:
            v = _level_view(v, size, f"variances at depth {d}")
            if np.any(v < 0):
                raise ParameterError("noise variances must be non-negative")
        if d == h:
            if not measured:
                if known_total and h == 0:
                    up_w[d] = np.zeros(1)
                    continue
                raise ParameterError("the leaves of the tree must be measured")
            up_w[d] = v
            continue
        b = strategy.branching[d]
        child_w[d] = family_sums(_pad(up_w[d + 1], size * b), size, b)
        up_w[d] = _safe_div(child_w[d] * v, child_w[d] + v) if measured else child_w[d]
    if known_total:
        if strategy.level_sizes[0] != 1:
            raise ParameterError("a known total needs a tree with a single root")
        up_w[0] = np.zeros(1)
    return TreeErrorModel(strategy, up_w, child_w, up_w[0][0], list(level_variances), known_total)
