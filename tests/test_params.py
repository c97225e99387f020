"""The declarative parameters every mechanism class checks with one function (dprange._params):
declarations instead of written checks, one bind call, normalised values, checked copies."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from dprange import Flat, Hierarchical, Matrix, ParameterError, Wavelet
from dprange._params import replaced
from dprange.mechanisms import base as mechanisms_base

# ------------------------------------------------------------------ declarative parameters
CLASSES = [Flat, Hierarchical, Wavelet, Matrix]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_classes_declare_parameters_instead_of_writing_checks(cls):
    """No mechanism but Matrix (a cross-parameter rank check) has an __init__ of its own, and
    the signature users see is the declaration."""
    assert ("__init__" in vars(cls)) == (cls is Matrix)
    sig = inspect.signature(cls)
    assert list(sig.parameters) == [p.name for p in cls.PARAMS]
    for p in cls.PARAMS:
        assert p.doc and p.constraint.describe()
        if not p.required:  # every default meets its own constraint
            p.constraint.check(p.default, p.name)


def test_one_call_checks_every_parameter(monkeypatch):
    calls = []
    real = mechanisms_base.bind

    def spy(params, args, kwargs, owner):
        calls.append((owner, [p.name for p in params], dict(kwargs)))
        return real(params, args, kwargs, owner)

    monkeypatch.setattr(mechanisms_base, "bind", spy)
    Hierarchical(4, "geometric", measure_root=True, noise="gaussian")
    assert calls == [
        (
            "Hierarchical",
            ["branching", "budget", "measure_root", "neighbours", "noise", "inference", "inference_options"],
            {"measure_root": True, "noise": "gaussian"},
        )
    ]


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: Hierarchical(1), "branching must be an integer >= 2, got 1"),
        (lambda: Hierarchical([4, 1]), "every branching factor must be an integer >= 2, got 1"),
        (lambda: Hierarchical([]), "the branching list is empty"),
        (lambda: Hierarchical(2, "random"), "budget must be one of uniform, geometric or a list, got 'random'"),
        (lambda: Hierarchical(2, 0.5), "budget must be 'uniform', 'geometric' or a list of per-level budgets"),
        (lambda: Hierarchical(measure_root="no"), "measure_root must be True or False, got 'no'"),
        (lambda: Flat(neighbours="swap"), "neighbours must be one of add_remove, replace, got 'swap'"),
        (lambda: Flat(noise="normal"), "noise must be one of auto, discrete_laplace, laplace_float, gaussian"),
        (lambda: Wavelet(inference="lasso"), "inference must be one of gls, nnls, l1, got 'lasso'"),
        (lambda: Flat(inference_options={"alpah": 1}), r"unknown inference options \['alpah'\]"),
        (lambda: Flat(inference_options=0.9), "inference_options must be a dict"),
        (lambda: Flat(branching=4), "Flat has no parameter branching; its parameters are neighbours, noise"),
        (lambda: Flat("replace"), "Flat takes at most 0 positional parameters"),
        (lambda: Hierarchical(4, branching=4), "Hierarchical got branching twice"),
        (lambda: Matrix(), r"Matrix needs strategy \(the strategy A"),
        (lambda: Matrix(np.zeros((2, 2))), "the strategy matrix is zero"),
        (lambda: Matrix(np.eye(3), budget="uniform"), "Matrix has no parameter budget"),
    ],
)
def test_bad_parameters_are_parameter_errors(build, message):
    """Every one is a ParameterError; measure_root="no" used to be taken as True (the root
    measured), and positional or unknown arguments were bare TypeErrors."""
    with pytest.raises(ParameterError, match=message):
        build()


def test_values_are_normalised_once():
    mech = Hierarchical(np.array([4, 4]), (0.25, 0.75), measure_root=np.bool_(True))
    assert mech.branching == [4, 4] and type(mech.branching[0]) is int
    assert mech.budget == [0.25, 0.75] and mech.measure_root is True
    assert Hierarchical(16.0).branching == 16 and Flat(inference_options=None).inference_options == {}


def test_replaced_builds_a_checked_copy_and_leaves_the_original():
    mech = Hierarchical([4, 4], [0.5, 0.5], neighbours="replace")
    other = replaced(mech, inference="l1")
    assert other is not mech and mech.inference == "gls" and other.inference == "l1"
    assert repr(other) == repr(Hierarchical([4, 4], [0.5, 0.5], neighbours="replace", inference="l1"))
    with pytest.raises(ParameterError, match="inference must be one of"):
        replaced(mech, inference="bogus")
