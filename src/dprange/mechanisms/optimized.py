"""Optimized: the strategy optimised for the declared workload (the templates of McKenna, Miklau,
Hay and Machanavajjhala, PVLDB 2018, and the exact L2 optimum), and what ``auto`` ranks of it.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

from .._params import Custom, Integer, OneOf, Param
from .._validation import check_delta, check_epsilon, check_positive_int
from ..errors import ParameterError
from ..operators.base import check_relation
from ..optimize.cache import _load, _saved_terms, _store, _store_released_form, cache_dir, cache_path
from ..optimize.dense import DENSE_MAX_N, optimize_dense_template, optimize_signed
from ..optimize.l2_optimum import (
    L2_OPTIMUM_MAX_N,
    L2_REPLACE_MAX_N,
    check_l2_optimum_bins,
    l2_optimum,
    l2_optimum_seconds,
    l2_replace_optimum,
    strategy_trace,
)
from ..optimize.p_identity import (
    DENSE_TEMPLATES,
    IDENTITY_CHOICE,
    P_IDENTITY_NORMS,
    TEMPLATES,
    Gram,
    OptimizedStrategy,
    PIdentityStrategy,
    _warn_rejected_inverse,
    default_rows,
    eigen_design,
    identity_strategy,
    mean_error_as_released,
    optimize_p_identity,
    p_identity_matrix,
    p_identity_seconds,
    replace_objective,
    strategy_variance_terms,
)
from ..progress import announce
from ..registry import MECHANISMS, WORKLOADS, Citation
from ..strategies.matrix import DENSE_COVARIANCE_LIMIT, MatrixStrategy
from ..workloads.ranges import AllRange, Identity, Prefix, Workload, make_workload, not_a_workload
from .base import Mechanism


def _workload_or_name(value, name: str):
    if isinstance(value, Workload):
        return value
    if isinstance(value, str):
        WORKLOADS.lookup(value)
        return value
    raise not_a_workload(value, name)


class Optimized(Mechanism):
    """The matrix mechanism with a strategy optimised for ``workload`` (module doc).

    ``template="auto"`` optimises the p-Identity template with L1 columns when delta = 0; when
    delta > 0 it solves the exact L2 optimum (``l2-optimal``, n <= AUTO_CACHED_MAX_N), which
    under replace it compares with the L2 template optimised for replace; ``eigen`` gives the
    eigen-design.  The optimisation reads
    only the workload and n (public); its result is cached on disk and its time is reported in the release's provenance
    (``parameters["strategy"]["optimisation_seconds"]``).  At every template the identity is measured instead
    where its exact error as released at the release's epsilon, delta, relation and noise is at most the
    optimised strategy's (:meth:`released_strategy`; ``parameters["strategy"]["measured"]``).
    """

    name = "optimized"

    PARAMS = (
        Param(
            "workload",
            Custom(_workload_or_name, "a workload name or a dprange.workloads.Workload"),
            "the queries the strategy is optimised for",
            default="all-range",
            positional=True,
        ),
        Param(
            "template",
            OneOf(TEMPLATES),
            "p-identity (L1 columns, Laplace: epsilon-DP, McKenna et al. 2018; under replace optimised with the "
            "public total), p-identity-l2 (its L2 analogue, Gaussian; under replace optimised with the "
            "public total, B >= 0), eigen ((epsilon, delta), Li and Miklau 2012), l2-optimal (the exact "
            "optimum over strategies with L2 columns, (epsilon, delta); n <= 4096; under replace the "
            "optimum for the pairwise sensitivity and the public total up to 256 bins), dense (any non-negative "
            "strategy with L1 columns, from the p-identity optimum; n <= 512), dense-signed (entries of "
            "either sign, from the dense optimum), or auto (p-identity when "
            "delta = 0, dense where its error is 1% lower; when delta > 0 l2-optimal, under replace "
            "p-identity-l2 where its error is lower)",
            default="auto",
        ),
        Param(
            "rows",
            Integer(0),
            "p, the extra rows of p-identity, at most n (0: n/16 for L1, n/4 for L2, at most 128)",
            default=0,
        ),
        Param(
            "restarts",
            Integer(1),
            "starts of the p-identity optimisation: a banded one (L1), then uniform random ones",
            default=1,
        ),
        *Mechanism.PARAMS,
    )
    workload: Workload | str
    template: str
    rows: int
    restarts: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._delta = 0.0
        self._epsilon: float | None = None
        self._strategies: dict = {}
        self._released: dict = {}
        self._loaded: dict = {}  # (n, template, replace): (cache file, arrays) read by cache_state, for _build
        self._built: dict = {}  # (n, resolved template): the strategies built for that choice

    # The template "auto" follows delta, and the choice between the optimised strategy and the
    # identity follows epsilon and delta: remember those of the current design / measurement.
    def design(self, n: int, epsilon, *, delta=0.0):
        self._follow(epsilon, delta)
        return super().design(n, epsilon, delta=delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        self._follow(epsilon, delta)
        return super().measure(counts, epsilon, delta=delta, rng=rng)

    def strategy_at(self, n: int, epsilon, delta=0.0):
        """The strategy measured at (epsilon, delta): template auto builds the one for delta
        only (not the epsilon-DP template first, as :meth:`strategy` before any design would)."""
        self._follow(epsilon, delta)
        return self.strategy(n)

    def _follow(self, epsilon, delta) -> None:
        self._epsilon, self._delta = check_epsilon(epsilon), check_delta(delta)

    def resolved_template(self, delta: float | None = None) -> str:
        if self.template != "auto":
            return self.template
        return "p-identity-l2" if (self._delta if delta is None else delta) > 0 else "p-identity"

    def workload_on(self, n: int) -> Workload:
        if isinstance(self.workload, Workload):
            if self.workload.n != n:
                raise ParameterError(f"the strategy is optimised for {self.workload.n} bins but the data have {n}")
            return self.workload
        return make_workload(self.workload, n)

    def strategy(self, n: int) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy measured on n bins: after a design or measurement at (epsilon, delta),
        the optimised strategy or the identity, whichever has the lower exact error as
        released (:meth:`released_strategy`); before any, the optimised strategy."""
        optimised = self.optimised_strategy(n)
        if self._epsilon is None:
            return optimised
        return self.released_strategy(optimised, self._epsilon, self._delta)

    def released_strategy(self, optimised, epsilon: float, delta: float) -> OptimizedStrategy | PIdentityStrategy:
        """``optimised`` or the identity, whichever has the lower exact mean error on the
        workload as released at (epsilon, delta) under this relation and noise; a tie (an
        optimum B = 0) measures the identity without B's empty rows.  The comparison is in the
        strategies as measured: an optimised strategy is quantised with K = 2^k (about 2^16),
        its noise per unit of sensitivity about the continuous one (2 / epsilon^2 for Laplace),
        where the identity is measured at K = 1 with the discrete noise of sensitivity 1
        (discrete Laplace: 1.84 at epsilon 1, 0.0137 at 5); an optimum whose trace is only
        slightly below the identity's then has the higher error.  Each error is
        v (trace(G S) - [public total] w^T G w / 1^T w) / m (:func:`mean_error_as_released`),
        v from the mechanism's own calibration.  Reads only public facts (the workload's Gram
        matrix, epsilon, delta, the relation, the noise); the epsilon-free optimisation and its
        cache are unchanged.  The strategy returned says what was measured in ``describe()``:
        ``measured`` ("optimised" or "identity") and ``mean_error_as_released`` of both."""
        key = (optimised.n, optimised.template, float(epsilon), float(delta))
        if key not in self._released:
            workload = self.workload_on(optimised.n)
            gram = Gram(workload)
            identity = identity_strategy(optimised.n, optimised.template, optimised.seconds, optimised.cached)
            identity.stored = optimised.stored
            identity.built_with = optimised.built_with  # the optimised strategies it was compared with
            identity.optimised_for = optimised.optimised_for
            errors = {
                label: self._error_as_released(strategy, gram, workload.m, epsilon, delta)
                for label, strategy in (("optimised", optimised), (IDENTITY_CHOICE, identity))
            }
            chosen = identity if errors[IDENTITY_CHOICE] <= errors["optimised"] else copy.copy(optimised)
            chosen.choice = {
                "measured": IDENTITY_CHOICE if chosen is identity else "optimised",
                "mean_error_as_released": errors,
            }
            self._released[key] = chosen
        return self._released[key]

    def _error_as_released(self, strategy, gram: Gram, queries: int, epsilon: float, delta: float) -> float:
        (spec,) = self.noise_specs(strategy, epsilon, delta)
        known_total = self.neighbours == "replace"
        terms = getattr(strategy, "variance_terms", None) or strategy_variance_terms(strategy, gram)
        return mean_error_as_released(spec.variance, [terms], [queries], known_total)

    def optimised_strategy(self, n: int) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy optimised for the workload on n bins (epsilon-free; cached in memory
        and on disk), as quantised for measurement."""
        n = check_positive_int(n, "n")
        if n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(
                f"optimised strategies are built for n <= {DENSE_COVARIANCE_LIMIT} bins, not {n}; "
                "use the hierarchical or wavelet mechanism"
            )
        template = self.resolved_template()
        key = (n, template)
        if key not in self._strategies:
            workload = self.workload_on(n)
            if self._optimum_alone(n, template):
                strategy = self._build(workload, "l2-optimal")
            else:
                strategy = self._build(workload, template)
                if self.template == "auto" and template == "p-identity-l2" and n <= AUTO_CACHED_MAX_N:
                    assert isinstance(strategy, PIdentityStrategy)
                    strategy = self._auto_l2(workload, strategy)
            if self.template == "auto" and template == "p-identity" and self._auto_dense(workload, template):
                dense = self._build(workload, "dense")  # epsilon-DP: the dense template where clearly lower
                strategy = dense if dense.trace < AUTO_DENSE_GAIN * strategy.trace else strategy
            strategy.check_rank(known_total=self.neighbours == "replace")
            self._strategies[key] = strategy
        return self._strategies[key]

    def _optimum_alone(self, n: int, template: str) -> bool:
        """Template auto with delta > 0 up to AUTO_CACHED_MAX_N bins under add/remove: the
        exact L2 optimum alone.  The L2 template is a point of its program, so its trace is
        never below the optimum's by more than the solver's gap (1e-6, 1e-4 above 1024 bins),
        and building it would cost more than the optimum for nothing (docs/optimized.md,
        ``template="auto"``).  Under replace the template is
        optimised for another loss and both are built and compared (:meth:`_auto_l2`)."""
        return (
            self.template == "auto"
            and template == "p-identity-l2"
            and self.neighbours == "add_remove"
            and n <= AUTO_CACHED_MAX_N
        )

    def _auto_l2(
        self, workload: Workload, template_strategy: PIdentityStrategy
    ) -> OptimizedStrategy | PIdentityStrategy:
        """Template auto with delta > 0 under replace (n <= AUTO_CACHED_MAX_N; add/remove takes
        the optimum alone, :meth:`_optimum_alone`): up to L2_REPLACE_MAX_N the replace program's
        optimum, the least error under replace, as it is.  Above: the
        L2 template is optimised for replace, the optimum for add/remove; compared by
        :func:`replace_objective` (their traces are of different losses; which wins where:
        docs/optimized.md, "The L2 template under replace")."""
        n = workload.n
        optimum = self._build(workload, "l2-optimal")
        if self.replace_program(n, "l2-optimal"):
            return optimum
        assert isinstance(optimum, OptimizedStrategy)
        gram = workload.gram()
        template_matrix = p_identity_matrix(template_strategy.theta, 2)
        lower = replace_objective(optimum.unquantised, gram) < replace_objective(template_matrix, gram)
        return optimum if lower else template_strategy

    def extra_rows(self, n: int, template: str) -> int:
        """p of the p-Identity template (and of the dense template's p-Identity start) on n
        bins: ``rows``, or the default where it is 0.  ``rows`` above n is refused: [I; B] has
        at most n useful extra rows (B B^T of rank <= n), and a step costs O(n p^2)."""
        base = "p-identity" if template in DENSE_TEMPLATES else template
        if self.rows > n and base in P_IDENTITY_NORMS:
            raise ParameterError(
                f"rows={self.rows} is more than the {n} bins the strategy is optimised for: the p-Identity "
                f"template has at most {n} useful extra rows, and each optimisation step costs O(n rows^2); "
                f"give rows <= {n}, or rows=0 for the default ({default_rows(n, base)} here: n/16 with L1 "
                "columns, n/4 with L2 columns, at most 128)"
            )
        return self.rows or default_rows(n, base)

    def _cached_arrays(self, workload: Workload, template: str, replace: bool) -> tuple[Path, dict | None]:
        """(the cache file of ``template`` for ``workload`` (this mechanism's on its n bins),
        optimised for replace neighbours or not (:meth:`replace_program`), its arrays if it
        loads and fits, :func:`_load`); a file read by :meth:`cache_state` is not read again,
        nor an explicit workload's Gram matrix hashed again for its name."""
        if (workload.n, template, replace) in self._loaded:
            return self._loaded.pop((workload.n, template, replace))
        key = f"{template}-replace" if replace else template
        path = cache_path(workload, key, self.extra_rows(workload.n, template), self.restarts)
        # B >= 0: the L1 p-Identity template, and both p-Identity templates under replace
        nonnegative = template in P_IDENTITY_NORMS and (P_IDENTITY_NORMS[template] == 1 or replace)
        matrix = "theta" if template in P_IDENTITY_NORMS else "strategy"
        return path, _load(path, matrix, workload.n, nonnegative=nonnegative)

    def replace_program(self, n: int, template: str) -> bool:
        """Whether ``template`` on n bins is optimised for replace neighbours: l2-optimal up to
        L2_REPLACE_MAX_N bins solves the replace program
        (:func:`dprange.optimize.l2_optimum.l2_replace_optimum`: the L2 optimum for the pairwise
        sensitivity and the public total), p-identity and p-identity-l2 (any n) minimise the
        loss with the public total (:func:`p_identity_loss` with ``known_total``) over B >= 0:
        the replace sensitivity of non-negative unit columns is 2 - 2 min_ij sum_r min(a_ri,
        a_rj) (L1) or sqrt(2 - 2 min_ij a_i^T a_j) (L2), 2 or sqrt(2) wherever two bins share
        no row, as far-apart bins do, so it is not in the loss.  Above, and for every other
        template, the add/remove loss.  Its own cache key (the strategy depends on the relation)."""
        if self.neighbours != "replace":
            return False
        return template in P_IDENTITY_NORMS or (template == "l2-optimal" and n <= L2_REPLACE_MAX_N)

    def cache_state(self, workload: Workload, template: str) -> str:
        """Whether the strategy of ``template`` for ``workload`` is in the disk cache:
        "cached" (the file loads and fits, :func:`_load`; its arrays are kept, so that building
        the strategy reads it once), "damaged" (a file that does not: it would be optimised
        again) or "absent"."""
        replace = self.replace_program(workload.n, template)
        path, saved = self._cached_arrays(workload, template, replace)
        if saved is None:
            return "damaged" if path.exists() else "absent"
        self._loaded[workload.n, template, replace] = (path, saved)
        return "cached"

    def _build(
        self, workload: Workload, template: str, *, replace: bool | None = None
    ) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy of ``template`` (read from the disk cache or optimised), kept with the
        others built for the same choice (template auto compares two; the dense templates
        start from others), which its ``describe()`` reports (``also_built``).  ``replace``:
        optimised for replace neighbours (default :meth:`replace_program`)."""
        if replace is None:
            replace = self.replace_program(workload.n, template)
        strategy = self._obtain(workload, template, replace)
        strategy.optimised_for = "replace" if replace else "add_remove"
        built = self._built.setdefault((workload.n, self.resolved_template()), [])
        if all(other.template != template for other in built):
            built.append(strategy)
        strategy.built_with = built
        return strategy

    def _obtain(self, workload: Workload, template: str, replace: bool) -> OptimizedStrategy | PIdentityStrategy:
        n = workload.n
        p = self.extra_rows(n, template)
        path, saved = self._cached_arrays(workload, template, replace)
        if saved is not None:
            seconds, trace = float(saved["seconds"]), float(saved["trace"])
            if template in P_IDENTITY_NORMS:
                return PIdentityStrategy(saved["theta"], template, seconds, True, trace)
            dense = OptimizedStrategy(saved["strategy"], template, seconds, True, trace)
            adopted = "gram_inverse" in saved and dense.block.adopt_gram_inverse(saved["gram_inverse"])
            if adopted:
                dense.variance_terms = _saved_terms(saved)
            elif "gram_inverse" in saved:
                _warn_rejected_inverse(path, "it is computed again and the file rewritten")
            # complete: its inverse adopted, or none of this matrix would be (uncertified, or
            # ill-conditioned); else written before they were kept, or holding another's inverse
            if not ("variance_terms" in saved and (adopted or not dense.block.gram_inverse_checks_out())):
                _store_released_form(path, saved, dense, Gram(workload))
            return dense
        self._announce(workload, template, p, replace)
        start = time.perf_counter()
        strategy: OptimizedStrategy | PIdentityStrategy
        if template in DENSE_TEMPLATES:
            matrix, trace = self._optimize_dense(workload, DENSE_TEMPLATES[template])
            seconds = time.perf_counter() - start
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        elif template in P_IDENTITY_NORMS:
            norm = P_IDENTITY_NORMS[template]
            theta, trace = optimize_p_identity(
                Gram(workload), p, restarts=self.restarts, norm=norm, known_total=replace
            )
            seconds = time.perf_counter() - start
            strategy, arrays = PIdentityStrategy(theta, template, seconds, False, trace), {"theta": theta}
        elif template == "l2-optimal":
            check_l2_optimum_bins(n)
            solve = l2_replace_optimum if replace else l2_optimum
            matrix, trace = solve(workload.gram())[:2]  # an n x n eigendecomposition a step, O(n^3)
            seconds = time.perf_counter() - start
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        else:
            gram = workload.gram()
            matrix = eigen_design(gram)
            seconds = time.perf_counter() - start
            trace = strategy_trace(matrix, gram)  # columns of L2 norm <= 1, the largest 1     O(n^3)
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        arrays = {**arrays, "seconds": np.array(seconds), "trace": np.array(trace)}
        if isinstance(strategy, OptimizedStrategy):
            strategy.stored = _store_released_form(path, arrays, strategy, Gram(workload))
        else:
            strategy.stored = _store(path, arrays)
        return strategy

    def _announce(self, workload: Workload, template: str, p: int, replace: bool) -> None:
        """One line on stderr before an optimisation estimated to take ANNOUNCE_SECONDS of CPU
        or more (:func:`optimisation_seconds`): what is optimised, about how long, and where
        it is cached (so that it happens once)."""
        seconds = optimisation_seconds(template, workload.n, p, self.restarts, replace)
        if seconds is not None and seconds >= ANNOUNCE_SECONDS:
            announce(
                f"optimising a strategy for {workload.n} bins ({workload.name}, {template}); about "
                f"{seconds:.2g} s of CPU, once: it is cached in {cache_dir()}"
            )

    def _optimize_dense(self, workload: Workload, signed: bool) -> tuple[np.ndarray, float]:
        """The dense template (:mod:`dprange.optimize.dense`) from the (cached) p-Identity
        optimum, or the signed one from the (cached) dense optimum."""
        if workload.n > DENSE_MAX_N:
            raise ParameterError(
                f"the dense template is built for n <= {DENSE_MAX_N} bins, not {workload.n}; use template='p-identity'"
            )
        gram = workload.gram()
        if signed:  # from the (cached) non-negative optimum
            dense = self._build(workload, "dense")
            assert isinstance(dense, MatrixStrategy)
            return optimize_signed(gram, dense.explicit() / dense.factor)
        start = self._build(workload, "p-identity", replace=False)  # the dense templates' loss is add/remove's
        assert isinstance(start, PIdentityStrategy)
        matrix, trace, _ = optimize_dense_template(gram, start.theta, restarts=self.restarts)
        return matrix, trace

    def _auto_dense(self, workload: Workload, template: str) -> bool:
        """``auto`` (delta = 0) also builds the dense template for n <= AUTO_DENSE_MAX_N, or up
        to DENSE_MAX_N when it is cached (its optimisation is O(n^3) a step); not where the
        p-Identity strategy is optimised for replace neighbours (the dense template's loss is
        add/remove's: their traces are not comparable)."""
        n = workload.n
        if self.replace_program(n, template):
            return False
        return n <= AUTO_DENSE_MAX_N or (n <= DENSE_MAX_N and self.cache_state(workload, "dense") == "cached")

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)

    def parameters(self) -> dict:
        workload = self.workload
        if isinstance(workload, Workload):  # the standard ones by name, others as described
            workload = workload.name if type(workload) in (AllRange, Prefix, Identity) else repr(workload)
        return {
            "workload": workload,
            "template": self.template,
            "rows": self.rows,
            "restarts": self.restarts,
            **super().parameters(),
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters().items())
        return f"Optimized({args})"


#: An optimisation estimated to take this many CPU seconds or more says so before it starts
#: (:meth:`Optimized._announce`); on a shared machine the wall time can be many times longer.
ANNOUNCE_SECONDS = 1.0


def optimisation_seconds(template: str, n: int, p: int, restarts: int = 1, replace: bool = False) -> float | None:
    """About how many CPU seconds optimising ``template`` on n bins takes (p extra rows), from
    the problem size: :func:`p_identity_seconds` or :func:`l2_optimum_seconds` (replace
    neighbours: twice, a rough allowance for the public total's extra terms); None for the
    templates without a model (the dense ones and the eigen design)."""
    if template in P_IDENTITY_NORMS:
        seconds = p_identity_seconds(n, p, norm=P_IDENTITY_NORMS[template], restarts=restarts)
    elif template == "l2-optimal":
        seconds = l2_optimum_seconds(n)
    else:
        return None
    return 2.0 * seconds if replace else seconds


#: Largest n for which ``auto`` optimises a strategy when none is cached (about a second on a
#: busy machine; docs/optimized.md, "Figures by module"); above it only a cached strategy is
#: ranked.  The fast templates have their own limit (:func:`auto_optimise_limit`).
AUTO_OPTIMIZE_MAX_N = 128


#: Largest n for which ``auto`` optimises the p-Identity template (epsilon-DP, either relation)
#: and the exact L2 optimum ((epsilon, delta), add/remove) when none is cached: a few seconds
#: cold at this size (timings and gains: docs/optimized.md, "Figures by module"); the L2
#: template, slower, keeps AUTO_OPTIMIZE_MAX_N.
AUTO_OPTIMIZE_FAST_MAX_N = 1024


def auto_optimise_limit(template: str, neighbours: str) -> int:
    """The largest n for which ``auto`` optimises ``template`` when it is not cached:
    AUTO_OPTIMIZE_FAST_MAX_N for p-identity and, under add/remove, l2-optimal (the replace
    program is slower), AUTO_OPTIMIZE_MAX_N for the others."""
    if template not in TEMPLATES:
        raise ParameterError(f"template must be one of {', '.join(TEMPLATES)}, not {template!r}")
    check_relation(neighbours)
    fast = template == "p-identity" or (template == "l2-optimal" and neighbours == "add_remove")
    return AUTO_OPTIMIZE_FAST_MAX_N if fast else AUTO_OPTIMIZE_MAX_N


#: ``auto`` (delta = 0) keeps the dense template only where its trace is below this fraction of
#: the p-Identity strategy's: its release goes through the dense covariance (O(n^3)) where
#: p-Identity's is O(n p^2), and its gains measured so far stay below this (docs/optimized.md,
#: "The dense L1 template").
AUTO_DENSE_GAIN = 0.99


#: Largest n for which ``auto`` (delta = 0) optimises the dense template when it is not cached
#: (O(n^3) a step; timings: docs/optimized.md, "Figures by module").
AUTO_DENSE_MAX_N = 64


#: Largest n for which ``auto`` ranks a cached L2 optimum ((epsilon, delta)), and for which
#: template auto builds it: every n it is solved for.  Its release goes through the dense
#: covariance, O(n^2) once the strategy and its inverse are cached (docs/optimized.md, "The
#: dense release from the cache").
AUTO_CACHED_MAX_N = L2_OPTIMUM_MAX_N


def auto_candidates(workload: Workload, delta: float, *, neighbours: str, noise: str) -> list[Optimized]:
    """The optimised mechanisms ``select`` ranks for ``workload`` (it keeps the one of least
    exact error): p-Identity (L1) when delta = 0; when delta > 0 the exact L2 optimum, and under
    replace its L2 template too (under add/remove the template is a point of the optimum's
    program, as for template auto, :meth:`Optimized._optimum_alone`).  Each for n up to
    :func:`auto_optimise_limit`, or, when its strategy is already in the disk cache, up to
    DENSE_COVARIANCE_LIMIT (p-Identity) or AUTO_CACHED_MAX_N (L2 optimum)."""
    return auto_pool(workload, delta, neighbours=neighbours, noise=noise)[0]


def auto_pool(workload: Workload, delta: float, *, neighbours: str, noise: str):
    """(the candidates of :func:`auto_candidates`, [(mechanism, reason)] for those it leaves out
    only because their strategy is not in the disk cache yet: ``select`` lists them as excluded)."""
    n = workload.n
    if delta == 0:
        templates: tuple[str, ...] = ("p-identity",)
    else:
        templates = ("l2-optimal",) if neighbours == "add_remove" else ("p-identity-l2", "l2-optimal")
    ranked, not_cached = [], []
    for template in templates:
        mech = Optimized(workload, template=template, neighbours=neighbours, noise=noise)
        dense_limit = min(DENSE_COVARIANCE_LIMIT, AUTO_CACHED_MAX_N)
        limit = DENSE_COVARIANCE_LIMIT if template in P_IDENTITY_NORMS else dense_limit
        if n > limit:
            continue
        optimise_limit = auto_optimise_limit(template, neighbours)
        state = mech.cache_state(workload, template) if n > optimise_limit else "cached"
        if state != "cached":  # a damaged file is not cached: ranking it would optimise here
            reason = NOT_CACHED_REASON if state == "absent" else DAMAGED_CACHE_REASON
            not_cached.append((mech, reason.format(n=n, limit=optimise_limit)))
            continue
        ranked.append(mech)
    return ranked, not_cached


#: Why ``auto`` did not rank an optimised strategy (:func:`auto_pool`).
NOT_CACHED_REASON = (
    "no cached strategy for {n} bins (auto optimises only up to {limit} bins; about 16 s at 4096); "
    "name it (mechanism='optimized', --mechanisms optimized) to optimise and cache it, then auto ranks it"
)


#: Why ``auto`` did not rank an optimised strategy whose cache file does not load or fit.
DAMAGED_CACHE_REASON = (
    "the cached strategy for {n} bins is damaged (unreadable, or not what an optimisation writes) and auto "
    "optimises only up to {limit} bins; name it (mechanism='optimized', --mechanisms optimized) to optimise "
    "it again and replace the file, then auto ranks it"
)


def auto_candidate(workload: Workload, delta: float, *, neighbours: str, noise: str) -> Optimized | None:
    """The first of :func:`auto_candidates`, or None."""
    found = auto_candidates(workload, delta, neighbours=neighbours, noise=noise)
    return found[0] if found else None


def _no_candidates(n, *, neighbours, noise, fast) -> list:
    """``auto`` ranks the optimised mechanism with its workload (:func:`auto_candidates`, added
    by :func:`dprange.analysis.select`), not from n alone."""
    return []


MECHANISMS.add(
    Optimized,
    summary="the matrix mechanism with a strategy optimised for the workload (p-Identity with L1 columns "
    "for epsilon-DP, L2 columns or the exact L2 optimum for (epsilon, delta)), cached on disk",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
    auto=True,
    candidates=_no_candidates,
)
