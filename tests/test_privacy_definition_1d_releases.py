"""Privacy of whole 1-D data-aware releases against the definition: a private choice (a
partition, boundaries, features, selected queries) followed by noisy counts, for every pair of
neighbouring datasets on 3-5 bins, max over every output of log P_x(o) / P_y(o) <= epsilon.

The pieces are tested elsewhere (DAWA's partition, tests/data_aware/test_partition.py; StructureFirst's
boundaries, tests/data_aware/test_structure_first.py; auto-data's features,
tests/data_aware/test_auto_data.py; MWEM's selection, tests/data_aware/test_mwem.py); here the whole
release, with the laws read from the mechanisms' own ``release`` run once per private choice
(tests/_helpers.py: :class:`Script`, exact exponential-mechanism
probabilities from the exponents the code passes, the noise as the code calibrates it):

* ``dawa``: the buckets' law sums over the cost noise (truncated at +-400, its tail mass
  accounted for), then the bucket hierarchy's noisy counts given the buckets;
* ``structure-first``: the boundaries' law (one exponential-mechanism draw over all
  partitions, sampled by backward choices), then the noisy counts of its bucket trees;
* ``auto-data``: the released features (noisy total, noisy number of non-empty bins, noisy
  mass of the heaviest bins) on a window of values, the selector's choice at each (a test
  selector that reaches the data-independent mechanism, DAWA and StructureFirst in the window;
  MWEM's joint law has no finite enumeration, see its test), then the chosen mechanism's law;
* ``mwem``: the transcript (noisy total, selected queries, measured answers) on a window of
  noise values; outputs are the released (selected queries, estimate).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import (
    STARTS_OF,
    Script,
    dawa_tail_mass,
    dawa_worst,
    grid_neighbours,
    joint_worst,
    output_probabilities,
    row_loss,
    split_selector,
    worst_over_neighbours,
)

import dprange.data_aware.auto_data as auto_data_module
import dprange.data_aware.partition as data_aware_module
import dprange.data_aware.steps as data_aware_steps
from dprange import DAWA
from dprange.data_aware.auto_data import AutoData
from dprange.data_aware.mwem import MWEM
from dprange.data_aware.selector import Selector, merge_cost, merge_penalty
from dprange.data_aware.structure_first import StructureFirst
from dprange.privacy.noise import NoiseSpec

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


def neighbours_1d(x, relation):
    return (y.ravel() for y in grid_neighbours(np.asarray(x).reshape(1, -1), relation))


def measured(rel):
    """[(spec, values)] of the measuring stage of a release run with zero noise (exact values)."""
    meas = rel._reduced[0] if getattr(rel, "_reduced", None) is not None else rel.measurements
    return [(m.noise, np.asarray(m.values, dtype=np.int64)) for m in meas.measurements]


# ----------------------------------------------------------------------------- DAWA
@pytest.mark.parametrize(
    "relation,second_stage,step,edge_bins",
    [
        ("add_remove", "greedy_h", "privtree", 0),
        ("replace", "greedy_h", "privtree", 0),
        ("add_remove", "greedy_h", "privtree", 2),
        ("replace", "greedy_h", "privtree", 2),
        ("add_remove", "greedy_h", "gibbs", 0),
        ("replace", "greedy_h", "gibbs", 0),
        ("add_remove", "greedy_h", "noisy-costs", 0),
        ("replace", "greedy_h", "noisy-costs", 0),
        ("add_remove", "best-hierarchy", "noisy-costs", 0),
    ],
)
def test_dawa_release_joint_law_is_epsilon_dp(monkeypatch, relation, second_stage, step, edge_bins):
    """DAWA on 4 bins (partition at 2, counts at 2 of epsilon 4): the joint law of (buckets,
    noisy bucket-hierarchy counts) over every neighbour is within epsilon (plus, for the
    noisy-costs partition, the tail of its truncated cost noise); twice the budget exceeds
    epsilon.  ``edge_bins`` 2: both halves split without a decision once the root splits."""
    epsilon = 4.0

    def build():
        return DAWA(ratio=0.5, partition=step, second_stage=second_stage, neighbours=relation, edge_bins=edge_bins)

    specs = data_aware_module.partition_noise(4, 2.0, 2 if relation == "replace" else 1)
    tail = dawa_tail_mass(3, [s.effective_scale for s in specs])
    bases = [np.array([1, 0, 0, 0]), np.array([2, 0, 0, 1]), np.array([0, 3, 1, 1])]
    worst, least = dawa_worst(monkeypatch, build, bases, epsilon, relation)
    assert least > 1e-6 and tail < 1e-15
    assert worst <= epsilon + math.log1p(tail / least) + 1e-9
    assert worst >= 0.5 * epsilon
    assert dawa_worst(monkeypatch, build, bases[1:2], 2 * epsilon, relation)[0] > epsilon


# ----------------------------------------------------------------------------- StructureFirst
def structure_first_outputs(script, mech, x, epsilon):
    """{starts: (log P_x(starts), [(spec, exact node counts)])} from StructureFirst's release."""
    out = {}
    for log_p, rel in script.enumerate(lambda: mech.release(x, epsilon, rng=0)):
        key = tuple(rel.parameters["starts"])
        assert key not in out
        out[key] = (log_p, measured(rel))
    assert math.fsum(math.exp(lp) for lp, _ in out.values()) == pytest.approx(1.0, abs=1e-12)
    return out


def structure_first_worst(script, mech, bases, epsilon):
    return worst_over_neighbours(
        lambda x: structure_first_outputs(script, mech, x, epsilon), bases, lambda x: neighbours_1d(x, mech.neighbours)
    )


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_structure_first_release_joint_law_is_epsilon_dp(monkeypatch, relation):
    """StructureFirst, 3 buckets on 5 bins (F = 1, boundaries at 0.5 of epsilon 2): the joint law
    of (boundaries, noisy node counts), every neighbour, is within the recorded epsilon; the
    boundaries depend on the data; twice the budget exceeds epsilon."""
    epsilon = 2.0
    script = Script(monkeypatch, [data_aware_steps])
    mech = StructureFirst(buckets=3, max_count=1, ratio=0.5, grid=1, neighbours=relation)
    bases = [np.array([1, 0, 0, 0, 1]), np.array([2, 1, 0, 0, 0]), np.array([0, 1, 1, 0, 1])]
    recorded = mech.release(bases[0], epsilon, rng=0).epsilon
    worst, structure = structure_first_worst(script, mech, bases, epsilon)
    assert recorded <= epsilon and worst <= recorded + 1e-12
    assert structure > 0.01
    assert worst >= 0.5 * epsilon * (1 - 1e-9)  # the counts spend half, exactly
    assert structure_first_worst(script, mech, bases[:1], 2 * epsilon)[0] > epsilon
    for small_grid in (0.5, 6.0):  # a small epsilon grid
        recorded = mech.release(bases[0], small_grid, rng=0).epsilon
        assert structure_first_worst(script, mech, bases[:2], small_grid)[0] <= recorded + 1e-12


@pytest.mark.slow
def test_enumerated_boundary_law_is_what_the_release_draws(monkeypatch):
    """StructureFirst's boundaries in 800 seeded releases match the enumerated law (4 sigma)."""
    mech = StructureFirst(buckets=3, max_count=1, ratio=0.5, grid=1)
    x = np.array([1, 0, 0, 1, 1])
    with monkeypatch.context() as patch:
        law = structure_first_outputs(Script(patch, [data_aware_steps]), mech, x, 8.0)
    source = np.random.default_rng(13)
    draws = 800
    seen: dict = {}
    for _ in range(draws):
        key = tuple(mech.release(x, 8.0, rng=source).parameters["starts"])
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(law)
    assert max(math.exp(lp) for lp, _ in law.values()) > 0.2  # the law is far from uniform
    for key, (log_p, _) in law.items():
        p = math.exp(log_p)
        assert abs(seen.get(key, 0) / draws - p) <= 4 * math.sqrt(p * (1 - p) / draws) + 1e-9


# ----------------------------------------------------------------------------- auto-data
CHOICES = ("structure-first", "dawa", "auto")


def window_selector() -> Selector:
    """A selector that names every CHOICES entry on 4 bins in the test's window: StructureFirst
    when the merge share is at most 0.5, else the data-independent mechanism when the heaviest
    bin holds at most half of N, else DAWA (the privacy argument holds for any selector:
    post-processing)."""
    return split_selector(("auto", "dawa", "structure-first"))


def auto_mech(relation: str) -> AutoData:
    mech = AutoData(feature_share=0.1, neighbours=relation)
    mech.selector = window_selector()
    return mech


def auto_inner_laws(monkeypatch, mech, x, epsilon):
    """({choice: law of the chosen mechanism's output given it}, feature specs): auto-data's
    own release run with the choice forced to each one (DAWA's partition law from
    output_probabilities, as above; the others enumerated by :class:`Script`)."""
    rest = mech.shares(epsilon)[3]
    laws, least = {}, 1.0
    for choice in CHOICES:
        with monkeypatch.context() as patch:
            patch.setattr(auto_data_module, "choose", lambda *args, c=choice: c)
            script = Script(patch, [data_aware_steps])
            if choice != "dawa":
                law = {}
                for log_p, rel in script.enumerate(lambda: mech.release(x, epsilon, rng=0)):
                    key = tuple(rel.parameters["chosen_parameters"].get("starts", ()))
                    assert key not in law
                    law[key] = (log_p, measured(rel))
                features = [spec for spec, _ in script.draws[: 3 if mech.neighbours == "add_remove" else 2]]
            else:
                inner = DAWA(bucket_workload=mech.tuned_for, neighbours=mech.neighbours)
                eps_partition, eps_measure = inner.budgets(rest)
                changed = 2 if mech.neighbours == "replace" else 1
                law = {}
                for key, p in output_probabilities(np.asarray(x), eps_partition, 1 / eps_measure, changed).items():
                    starts = np.array(STARTS_OF[key])
                    patch.setattr(DAWA, "partition", lambda self, counts, e1, e2, rng=None, s=starts: s)
                    rel = mech.release(x, epsilon, rng=0)
                    assert rel.parameters["chosen_parameters"]["buckets"] == list(STARTS_OF[key])
                    law[STARTS_OF[key]] = (math.log(p), measured(rel))
                    least = min(least, p)
        laws[choice] = law
    return laws, features, least


def feature_window(spec, true_x: int, true_y: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(values in the window around both true values, log P_x(value) - log P_y(value))."""
    values = np.arange(min(true_x, true_y) - window, max(true_x, true_y) + window + 1)
    return values, np.log(spec.pmf(values - true_x)) - np.log(spec.pmf(values - true_y))


def auto_worst(monkeypatch, mech, bases, epsilon, window=40):
    """(worst over the window of feature values, its upper bound max_features + max_choice,
    least probability of a DAWA partition seen, choices seen in the window)."""
    rest = mech.shares(epsilon)[3]
    worst, upper, least, seen = 0.0, 0.0, 1.0, set()
    for x in bases:
        laws_x, specs, least_x = auto_inner_laws(monkeypatch, mech, x, epsilon)
        for y in neighbours_1d(x, mech.neighbours):
            laws_y, _, least_y = auto_inner_laws(monkeypatch, mech, y, epsilon)
            least = min(least, least_x, least_y)
            inner = {c: joint_worst(laws_x[c], laws_y[c]) for c in CHOICES}
            if mech.neighbours == "add_remove":
                totals, f_total = feature_window(specs[0], int(x.sum()), int(y.sum()), window)
            else:
                totals, f_total = np.array([x.sum()]), np.zeros(1)
            penalty = merge_penalty(rest)
            merge, f_merge = feature_window(specs[-2], merge_cost(x, penalty), merge_cost(y, penalty), window)
            tops, f_top = feature_window(specs[-1], int(x.max()), int(y.max()), window)
            t, z, h = np.meshgrid(totals, merge, tops, indexing="ij")
            names = auto_data_module.choose_many(t, z, h, x.size, rest, mech.tuned_for, mech.selector)
            seen |= set(names)
            loss = np.array([inner[c] for c in names]).reshape(t.shape)
            features = np.abs(f_total[:, None, None] + f_merge[None, :, None] + f_top[None, None, :])
            worst = max(worst, float((features + loss).max()))
            upper = max(upper, sum(np.abs(f).max() for f in (f_total, f_merge, f_top)) + max(inner.values()))
    return worst, upper, least, seen


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.slow
def test_auto_data_release_joint_law_is_epsilon_dp(monkeypatch, relation):
    """auto-data on 4 bins at epsilon 9 (features 0.9, the rest to the chosen mechanism): the
    worst log-ratio over released features in a window of +-40 around the true values (every
    choice of the test selector is reached) and the chosen mechanism's outputs is at most
    epsilon, as is its upper bound over all feature values; twice the budget exceeds epsilon.
    (On 4 bins the heaviest bin is the top-mass feature: heavy_bins(4) = 1.)"""
    epsilon = 9.0
    mech = auto_mech(relation)
    bases = [np.array([1, 0, 0, 2]), np.array([0, 1, 1, 1])]
    worst, upper, least, seen = auto_worst(monkeypatch, mech, bases, epsilon)
    assert seen == set(CHOICES)
    changed = 2 if relation == "replace" else 1
    specs = data_aware_module.partition_noise(4, DAWA().budgets(mech.shares(epsilon)[3])[0], changed)
    tail = dawa_tail_mass(3, [s.effective_scale for s in specs])
    assert least > 1e-9 and tail < 1e-15
    assert worst <= upper <= epsilon + math.log1p(tail / least) + 1e-9
    assert worst >= 0.85 * epsilon
    assert auto_worst(monkeypatch, mech, bases[:1], 2 * epsilon, window=5)[0] > epsilon


# ----------------------------------------------------------------------------- MWEM
def mwem_outputs(monkeypatch, mech, x, epsilon, window, public_total=None):
    """{(selected queries, estimate bytes): log P_x} of MWEM's released output, summed over the
    transcripts whose noise lies in -window..window (exact probabilities, truncated)."""
    out: dict = {}
    with monkeypatch.context() as patch:
        script = Script(patch, [data_aware_steps], noise_window=window)
        runs = script.enumerate(lambda: mech.release(x, epsilon, rng=0, public_total=public_total))
    for log_p, rel in runs:
        key = (tuple(rel.parameters["selected"]), rel.estimate.tobytes())
        out[key] = np.logaddexp(out[key], log_p) if key in out else log_p
    return out


@pytest.mark.parametrize(
    "relation,rounds,public,complements,counts",
    [
        ("add_remove", 1, None, False, [1, 0, 2]),
        ("add_remove", 2, 4, False, [1, 0, 2]),
        ("replace", 2, None, False, [1, 0, 2]),
        ("add_remove", 1, None, True, [3, 4]),
    ],
)
def test_mwem_release_ratio_is_at_most_epsilon_on_every_common_output(
    monkeypatch, relation, rounds, public, complements, counts
):
    """MWEM on 3 bins (prefix ranges): P_x and P_y of every released output (selected queries,
    averaged estimate) whose transcripts lie in the noise window of both; 1 round with a
    noisy total, 2 rounds with a declared or replace-public total.  The ratio is at most the
    recorded epsilon, nearly attained; twice the budget exceeds epsilon.

    Why the window bounds the rest.  No window is the whole output space, on any domain or
    number of rounds: the answers' noise and the noisy total are unbounded.  An output's
    probability sums its transcripts' (total, selections, answers), so its log-ratio is at
    most the largest of theirs (mediant inequality), and a transcript's is the sum of its
    steps'.  A noise step's (|k - s| - |k|) / b is constant for |k| >= 1 >= |s| (a range count
    moves by at most 1): every noise value outside the window repeats one inside it.  A
    selection step depends on the noise only through the public state A (the total and the
    past answers), with exponents from the code's exact scores |q(A) - q(x)|, which differ
    between neighbours by at most 1 at every A (triangle inequality): at states the window
    does not reach, the step stays within 2 gamma by that inequality (and the selection's own
    test at a fixed state, tests/data_aware/test_mwem.py), not by enumeration.  With one round and
    a public total the only state is the uniform start, and the window attains the supremum
    over the whole output space (next test); with a noisy total or two rounds the states form
    a continuum (every total, every answer), which no finite enumeration covers."""
    epsilon, window = 1.5, 3
    mech = MWEM(rounds=rounds, total_share=0.3, passes=1, complements=complements, neighbours=relation)
    x = np.array(counts)
    total = None if public is None else int(x.sum()) + 1
    recorded = mech.release(x, epsilon, rng=0, public_total=total).epsilon
    law_x = mwem_outputs(monkeypatch, mech, x, epsilon, window, total)
    worst, common = 0.0, 0
    for y in neighbours_1d(x, relation):
        law_y = mwem_outputs(monkeypatch, mech, y, epsilon, window, total)
        shared = law_x.keys() & law_y.keys()
        common += len(shared)
        worst = max([worst] + [abs(law_x[k] - law_y[k]) for k in shared])
    assert common > 50
    assert worst <= recorded + 1e-9
    assert worst >= 0.6 * recorded
    doubled = mwem_outputs(monkeypatch, mech, x, 2 * epsilon, window, total)
    y = next(neighbours_1d(x, relation))
    other = mwem_outputs(monkeypatch, mech, y, 2 * epsilon, window, total)
    assert max(abs(doubled[k] - other[k]) for k in doubled.keys() & other.keys()) > epsilon


def mwem_selection_law(monkeypatch, mech, x, epsilon, public_total):
    """{selected query: (log P_x(selected), the answer's noise spec)} of a 1-round MWEM, from its
    release run once per selection with zero noise."""
    with monkeypatch.context() as patch:
        script = Script(patch, [data_aware_steps])
        runs = script.enumerate(lambda: (mech.release(x, epsilon, rng=0, public_total=public_total), script.draws))
    out = {}
    for log_p, (rel, draws) in runs:
        ((spec, _),) = draws
        out[rel.parameters["selected"][0]] = (log_p, spec)
    return out


@pytest.mark.parametrize("relation,counts,public", [("replace", [12, 0, 6], None), ("add_remove", [0, 6, 6], 3)])
def test_mwem_one_round_with_a_public_total_window_attains_the_whole_output_space(
    monkeypatch, relation, counts, public
):
    """1 round, public total: the selection sees the uniform start whatever the noise, so the
    supremum of log P_x(o) / P_y(o) over the whole (infinite) output space is at most
    max_r [log P_x(r) / P_y(r) + row_loss(spec, shift_r)] over neighbours and both directions
    (mediant inequality over an output's transcripts; row_loss is the maximum over every
    integer noise value).  That bound is at most the recorded epsilon and within 9% of it (the
    counts put the selection near its 2 gamma: the scores of the likely queries move against
    the chosen one's); the window of the test above (+-3) reaches it to 1e-9 (so the window
    holds the worst output of the whole space); at twice the budget it exceeds epsilon.  A
    selection spending twice its gamma passes the window test's two-round cases on their
    base counts; it fails here."""
    mech = MWEM(rounds=1, total_share=0.3, passes=1, complements=False, neighbours=relation)
    x = np.array(counts)

    def supremum(epsilon):
        law_x, sup = mwem_selection_law(monkeypatch, mech, x, epsilon, public), 0.0
        for y in neighbours_1d(x, relation):
            law_y = mwem_selection_law(monkeypatch, mech, y, epsilon, public)
            assert law_x.keys() == law_y.keys() == {0, 1, 2}
            for r, (log_p, spec) in law_x.items():
                log_q, spec_y = law_y[r]
                shift = int(np.cumsum(y)[r] - np.cumsum(x)[r])
                assert spec == spec_y and abs(shift) <= 1
                sup = max(sup, log_p - log_q + row_loss(spec, shift), log_q - log_p + row_loss(spec, -shift))
        return sup

    epsilon = 1.5
    recorded = mech.release(x, epsilon, rng=0, public_total=public).epsilon
    sup = supremum(epsilon)
    assert 0.91 * recorded <= sup <= recorded + 1e-9
    law_x, window = mwem_outputs(monkeypatch, mech, x, epsilon, 3, public), 0.0
    for y in neighbours_1d(x, relation):
        law_y = mwem_outputs(monkeypatch, mech, y, epsilon, 3, public)
        window = max([window] + [abs(law_x[k] - law_y[k]) for k in law_x.keys() & law_y.keys()])
    assert window == pytest.approx(sup, rel=1e-9)
    assert supremum(2 * epsilon) > epsilon


def test_row_loss_is_the_definition_on_a_window():
    """row_loss equals the maximum of log pmf(k) / pmf(k - s) over a wide window of k."""
    spec = NoiseSpec("discrete_laplace", 1.7)
    k = np.arange(-60, 61)
    for s in (-3, -1, 1, 2, 5):
        brute = float(np.max(np.log(spec.pmf(k)) - np.log(spec.pmf(k - s))))
        assert row_loss(spec, s) == pytest.approx(brute, rel=1e-12)
