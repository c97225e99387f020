"""A table-driven campaign of bad command-line inputs across every subcommand.

Every case must end with exit status 2, exactly one line "dprange: error: ..." on stderr,
no traceback, and no output left behind: the case runs in an empty working folder (where
the default outputs would go) that must still be empty afterwards, and the folder of input
files must be unchanged.  Most cases run in-process (``dprange.cli.main``); the cases of the
core install (no pandas, no pyarrow) run in one subprocess whose wrapper blocks both
modules before calling ``main``; a few cases run as real console processes.

A case may carry an xfail(strict=True) mark naming a fix that has not landed yet, so that it
flips (and must be unmarked) when the fix lands; none does today.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from dprange.cli import main
from dprange.ldp.range_protocols import Flat, HaarHRR, HierarchicalHistogram

#: Library wording a command-line user cannot act on (keywords, class methods).
PYTHON_WORDING = re.compile(r"\b\w+=(True|False)\b|\bDomain\.\w+|\bepsilon=\.\.\.")


# ------------------------------------------------------------------------------ input files
def _jsonl(header, rows):
    return "\n".join([json.dumps(header)] + [json.dumps(r) for r in rows]) + "\n"


def _flat_jsonl(oracle, domain_size, values, **overrides):
    """A valid JSON-lines report file of the flat protocol, as (header dict, rows)."""
    reports = Flat(domain_size, oracle, epsilon=1.0).randomize(values, 7)
    lines = reports.jsonl_text().splitlines()
    header = json.loads(lines[0])
    return header, [json.loads(line) for line in lines[1:]]


def make_files(folder) -> dict:
    """Every input file of the campaign, written into ``folder``; returns name -> path."""
    rng = np.random.default_rng(3)
    files = {}

    def put(name, content):
        path = folder / name
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
        files[name] = str(path)

    values = rng.integers(0, 100, 60)
    put(
        "good.csv",
        "x,name,flag\n" + "".join(f"{v},p{i},{'true' if v % 2 else 'false'}\n" for i, v in enumerate(values)),
    )
    put("real.csv", "x\n" + "".join(f"{v:.4f}\n" for v in rng.random(40)))
    put("nonnumeric.csv", "x\n1\n2\nabc\n4\n")
    put("booleans.csv", "x\ntrue\nfalse\ntrue\n")
    put("empty.csv", "")
    put("header_only.csv", "x\n")
    put("blank_lines.csv", "\n\n\n")
    put("trailing_commas.csv", "x\n1,\n2,\n3,\n")
    put("missing.csv", "x\n1\n\n3\n")
    put("nan.csv", "x\n1\nnan\n3\n")
    put("inf.csv", "x\n1\ninf\n3\n")
    put("negative.csv", "x\n1\n-5\n3\n")
    put("fractional.csv", "x\n1\n2.5\n3\n")
    put("huge_value.csv", "x\n1\n1e308\n3\n")
    put("bom_nonnumeric.csv", "\ufeffx\n1\nabc\n".encode("utf-8"))
    put("latin1.csv", "x,caf\u00e9\n1,\u00e9\n".encode("latin-1"))
    put("utf16.csv", "x\n1\n2\n".encode("utf-16"))
    put("garbage.csv", bytes(rng.integers(128, 256, 400, dtype=np.uint8)))
    put("nul_bytes.csv", b"x\n1\x00\x00\n2\n")
    put("nul_line_late.csv", b"x\n" + b"1\n" * 40_000 + b"\x00\x00\n2\n")  # past the 64 KiB sniffed
    put("ragged_rows.csv", "x,y\n1,2\n3\n4,5,6\n")
    put("short_row.csv", "x,y\n1,2\n3\n")
    put("long_row.csv", "x,y\n1,2\n4,5,6\n")
    put("mixed_trailing_commas.csv", "x,y\n1,2,\n3,4\n")
    put("only_commas.csv", ",,,\n,,,\n")
    put("csv_named.parquet", "x\n1\n2\n")
    put("garbage.parquet", b"PAR1" + bytes(range(200)) + b"PAR1")
    put("duplicate_columns.csv", "x,x\n1,2\n3,4\n")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(pa.table({"x": [1.0, 2.0, 3.0]}), buffer)
        put("parquet_named.csv", buffer.getvalue())
        buffer = io.BytesIO()
        pq.write_table(pa.table({"s": ["a", "b"]}), buffer)
        put("strings.parquet", buffer.getvalue())
    except ImportError:  # the core install: the Parquet cases are then skipped
        pass
    os.mkdir(folder / "a_folder")
    files["a_folder"] = str(folder / "a_folder")
    files["absent"] = str(folder / "absent.csv")

    # .npy histograms for ldp simulate
    def npy(name, array):
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        put(name, buffer.getvalue())

    npy("hist_good.npy", np.array([5, 0, 3, 9, 1, 1, 0, 2]))
    npy("hist_strings.npy", np.array(["a", "b", "c"]))
    npy("hist_2d.npy", np.ones((4, 4), dtype=np.int64))
    npy("hist_empty.npy", np.zeros(0, dtype=np.int64))
    npy("hist_one_bin.npy", np.array([7]))
    npy("hist_fractional.npy", np.array([5.7, 1.0, 2.0, 3.0]))
    npy("hist_negative.npy", np.array([5, -1, 2, 3]))
    npy("hist_nan.npy", np.array([5.0, np.nan, 2.0, 3.0]))
    npy("hist_inf.npy", np.array([5.0, np.inf, 2.0, 3.0]))
    npy("hist_zeros.npy", np.zeros(8, dtype=np.int64))
    npy("hist_bool.npy", np.array([True, False, True]))
    npy("hist_complex.npy", np.array([1 + 1j, 2, 3]))
    npy("hist_scalar.npy", np.array(5))
    npy("hist_huge_float.npy", np.array([1e300, 1.0, 2.0, 3.0]))
    put(
        "hist_pickled.npy",
        b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"
        + b" " * 40
        + b"\n"
        + b"\x80\x04junk",
    )
    put("hist_garbage.npy", b"not a numpy file at all")
    buffer = io.BytesIO()
    np.savez(buffer, a=np.arange(4))
    put("hist_archive.npy", buffer.getvalue())

    # local-DP reports: valid ones, then tampered copies
    users = rng.integers(0, 16, 50)
    good = HierarchicalHistogram(16, 4, "oue", epsilon=1.0).randomize(users, 1)
    put("rep_good.npz", good.to_bytes())
    put("rep_good.jsonl", good.jsonl_text())
    put("rep_other_eps.npz", HierarchicalHistogram(16, 4, "oue", epsilon=2.0).randomize(users, 2).to_bytes())
    put("rep_haar.npz", HaarHRR(16, epsilon=1.0).randomize(users, 3).to_bytes())
    put("rep_junk.npz", b"junk")
    put("rep_empty.npz", b"")
    put("rep_zip_junk.npz", b"PK\x03\x04 broken archive")
    buffer = io.BytesIO()
    np.savez(buffer, something=np.arange(3))
    put("rep_no_meta.npz", buffer.getvalue())
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.frombuffer(b"{not json", dtype=np.uint8))
    put("rep_bad_meta.npz", buffer.getvalue())
    flat_oue = Flat(10, "oue", epsilon=1.0).randomize(rng.integers(0, 10, 20), 4)
    flat_oue.parts[1].data["bits"] = flat_oue.parts[1].data["bits"].astype(np.int64)
    put("rep_bits_int64.npz", flat_oue.to_bytes())
    flat_oue = Flat(10, "oue", epsilon=1.0).randomize(rng.integers(0, 10, 20), 4)
    flat_oue.parts[1].data["n"] = np.array(["x"])
    put("rep_n_string.npz", flat_oue.to_bytes())
    flat_oue = Flat(10, "oue", epsilon=1.0).randomize(np.arange(20) % 10, 4)
    flat_oue.parts[1].data["n"] = np.array(20)  # the user count as a 0-d array, not 1-d
    put("rep_n_0d.npz", flat_oue.to_bytes())
    unsampled = HierarchicalHistogram(16, 4, "oue", epsilon=1.0).randomize(users, 6)
    unsampled.header = {**unsampled.header, "level_probabilities": [0.0, 1.0]}  # level 1 holds reports
    put("rep_unsampled_level.npz", unsampled.to_bytes())
    put("rep_unsampled_level.jsonl", unsampled.jsonl_text())
    flat_hrr = Flat(16, "hrr", epsilon=1.0).randomize(rng.integers(0, 16, 20), 5)
    flat_hrr.parts[1].data["sign"] = flat_hrr.parts[1].data["sign"].astype(float) * 0.5
    put("rep_sign_half.npz", flat_hrr.to_bytes())
    flat_hrr = Flat(16, "hrr", epsilon=1.0).randomize(rng.integers(0, 16, 20), 5)
    flat_hrr.parts[1].data["sign"] = flat_hrr.parts[1].data["sign"] > 0
    put("rep_sign_bool.npz", flat_hrr.to_bytes())

    header, rows = _flat_jsonl("oue", 10, rng.integers(0, 10, 6))
    put("oue_good.jsonl", _jsonl(header, rows))
    put("oue_byte_256.jsonl", _jsonl(header, rows[:-1] + [[1, [256, 0]]]))
    put("oue_byte_negative.jsonl", _jsonl(header, rows[:-1] + [[1, [-1, 0]]]))
    put("oue_byte_float.jsonl", _jsonl(header, rows[:-1] + [[1, [1.5, 0]]]))
    put("oue_byte_bool.jsonl", _jsonl(header, rows[:-1] + [[1, [True, 0]]]))
    put("oue_byte_string.jsonl", _jsonl(header, rows[:-1] + [[1, ["a", 0]]]))
    put("oue_too_few_bytes.jsonl", _jsonl(header, rows[:-1] + [[1, [3]]]))
    put("oue_too_many_bytes.jsonl", _jsonl(header, rows[:-1] + [[1, [3, 0, 0]]]))
    put("oue_ragged.jsonl", _jsonl(header, rows[:-1] + [[1, [3, [0]]]]))
    put("oue_level_bool.jsonl", _jsonl(header, rows[:-1] + [[True, [3, 0]]]))
    put("oue_level_unknown.jsonl", _jsonl(header, rows[:-1] + [[7, [3, 0]]]))
    put("oue_row_not_list.jsonl", _jsonl(header, rows[:-1] + [{"level": 1}]))
    put("oue_row_empty.jsonl", _jsonl(header, rows[:-1] + [[]]))
    put("oue_row_long.jsonl", _jsonl(header, rows[:-1] + [[1, [3, 0], 5]]))
    put("oue_bad_json_line.jsonl", _jsonl(header, rows) + "[1, [3,\n")
    put("oue_no_users.jsonl", _jsonl(header, []))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["epsilon"] = 800.0
    tampered["levels"]["1"]["epsilon"] = 800.0
    put("oue_eps_800.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["epsilon"] = -1.0
    tampered["levels"]["1"]["epsilon"] = -1.0
    put("oue_eps_negative.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["domain_size"] = "abc"
    put("oue_domain_string.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["domain_size"] = -1
    put("oue_domain_negative.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["domain_size"] = 10**30
    put("oue_domain_huge.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["protocol"] = "bogus"
    put("oue_protocol_unknown.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["oracle"] = "xyz"
    put("oue_oracle_unknown.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"]["level_probabilities"] = [2.0]
    put("oue_level_probabilities.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"] = ["not", "an", "object"]
    put("oue_protocol_list.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["protocol"] = "ldp-flat"
    put("oue_protocol_string.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    del tampered["fields"]
    put("oue_no_fields.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["levels"] = []
    put("oue_levels_list.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    tampered["levels"]["1"]["domain_size"] = 3
    put("oue_level_domain.jsonl", _jsonl(tampered, rows))
    tampered = json.loads(json.dumps(header))
    del tampered["protocol"]["epsilon"]
    put("oue_no_epsilon.jsonl", _jsonl(tampered, rows))
    put("header_list.jsonl", "[1, 2, 3]\n[1, [3, 0]]\n")
    put("header_bad_json.jsonl", "{not json\n")
    put("only_brace.jsonl", "{\n")

    header, rows = _flat_jsonl("hrr", 16, rng.integers(0, 16, 6))
    put("hrr_good.jsonl", _jsonl(header, rows))
    put("hrr_sign_bool.jsonl", _jsonl(header, rows[:-1] + [[1, 3, True]]))
    put("hrr_sign_two.jsonl", _jsonl(header, rows[:-1] + [[1, 3, 2]]))
    put("hrr_sign_zero.jsonl", _jsonl(header, rows[:-1] + [[1, 3, 0]]))
    put("hrr_sign_float.jsonl", _jsonl(header, rows[:-1] + [[1, 3, 1.0]]))
    put("hrr_row_outside.jsonl", _jsonl(header, rows[:-1] + [[1, 16, 1]]))
    put("hrr_row_negative.jsonl", _jsonl(header, rows[:-1] + [[1, -1, 1]]))
    put("hrr_row_bool.jsonl", _jsonl(header, rows[:-1] + [[1, False, 1]]))
    put("hrr_row_huge.jsonl", _jsonl(header, rows[:-1] + [[1, 10**30, 1]]))
    header, rows = _flat_jsonl("grr", 10, rng.integers(0, 10, 6))
    put("grr_value_outside.jsonl", _jsonl(header, rows[:-1] + [[1, 10]]))
    put("grr_value_negative.jsonl", _jsonl(header, rows[:-1] + [[1, -2]]))
    put("grr_value_float.jsonl", _jsonl(header, rows[:-1] + [[1, 2.0]]))
    put("grr_value_null.jsonl", _jsonl(header, rows[:-1] + [[1, None]]))
    header, rows = _flat_jsonl("olh", 10, rng.integers(0, 10, 6))
    put("olh_seed_negative.jsonl", _jsonl(header, rows[:-1] + [[1, -5, 0]]))
    put("olh_value_outside.jsonl", _jsonl(header, rows[:-1] + [[1, 5, 99]]))
    put("olh_seed_string.jsonl", _jsonl(header, rows[:-1] + [[1, "s", 0]]))
    return files


# ------------------------------------------------------------------------------ the table
CASES = []


def case(case_id, args, expect=None, xfail=None, core=False):
    """One bad input: argv (with {file} placeholders and ``OUT`` for the outputs), an expected
    piece of the message, and the other branch's fix it waits for (xfail)."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    CASES.append(pytest.param(args, expect, id=case_id, marks=marks))


def with_option(base, option, value=None):
    """``base`` with ``option`` set to ``value`` (replacing it if present, removing it if value is None)."""
    args = list(base)
    if option in args:
        i = args.index(option)
        del args[i : i + 2]
    if value is not None:
        args += [option, value]
    return args


def without(base, *options):
    args = list(base)
    for option in options:
        if option in args:
            i = args.index(option)
            takes_value = i + 1 < len(args) and not args[i + 1].startswith("-")
            del args[i : i + (2 if takes_value else 1)]
    return args


REL = [
    "release",
    "{good.csv}",
    "-c",
    "x",
    "--lo",
    "0",
    "--hi",
    "100",
    "--integers",
    "-e",
    "1",
    "--seed",
    "1",
    "-o",
    "r.json",
    "-m",
    "hierarchical",
]
REL_BINS = without(REL, "--integers") + ["--bins", "16"]
ERR = ["error", "--n", "64", "-e", "1"]
DEMO = ["demo", "-e", "1", "-o", "demo-out"]
ENC = ["ldp", "encode", "{good.csv}", "-c", "x", "--lo", "0", "--hi", "127", "-e", "1", "--seed", "1", "-o", "rep.npz"]
AGG = ["ldp", "aggregate", "{rep_good.npz}", "-o", "agg.json"]
SIM = ["ldp", "simulate", "{hist_good.npy}", "-e", "1", "--seed", "0", "-o", "sim.json"]

BAD_EPSILON = ["0", "-1", "-0.0", "nan", "inf", "-inf", "1e400", "abc", "", "0x1p3", "1,5"]
BAD_DELTA = ["-0.1", "1", "1.5", "nan", "inf", "x"]
BAD_ALPHA = ["0", "1", "-0.5", "2", "nan", "inf", "x", "1e-400"]
BAD_COUNT = ["0", "-1", "x", "1.5", "", "99999999999", "16777217", "10" * 40]
BAD_SEED = ["-1", "x", "1.5", "-99999999999999999999"]

# --- release: every numeric option ------------------------------------------------------
for v in BAD_EPSILON:
    case(f"release-epsilon-{v!r}", with_option(REL, "-e", v), None)
for v in BAD_DELTA:
    case(f"release-delta-{v!r}", with_option(REL, "--delta", v), None)
for v in BAD_ALPHA:
    case(f"release-alpha-{v!r}", with_option(REL, "--alpha", v), "alpha")
for v in BAD_COUNT:
    case(f"release-bins-{v!r}", with_option(REL_BINS, "--bins", v), "bins")
for v in BAD_SEED:
    case(f"release-seed-{v!r}", with_option(REL, "--seed", v), "seed")
for v in ["0", "1", "-2", "x", "", ",", "4.5", "4,0", "4,1", "1000000000000", "4,x", "99999999999999999999999"]:
    case(f"release-branching-{v!r}", with_option(REL, "--branching", v), "branching")
for v in [
    "0.5,0.5,0.5",
    "x",
    "",
    "nan,nan",
    "-1,2",
    "1e308,1e308",
    ",".join(["0.001"] * 1000),
    "uniform,geometric",
    "inf",
    "0.5;0.5",
]:
    case(f"release-budget-{v[:20]!r}", with_option(REL, "--budget", v), "budget")
for lo, hi in [
    ("5", "4"),
    ("10", "0"),
    ("nan", "10"),
    ("0", "inf"),
    ("-inf", "0"),
    ("x", "1"),
    ("0.5", "10"),
    ("0", "1e12"),
    ("-1e300", "1e300"),
    ("0", "10.5"),
]:
    case(f"release-integers-bounds-{lo}-{hi}", with_option(with_option(REL, "--lo", lo), "--hi", hi), None)
for lo, hi in [
    ("5", "5"),
    ("10", "0"),
    ("nan", "10"),
    ("0", "inf"),
    ("-inf", "0"),
    ("x", "1"),
    ("0", "nan"),
    ("-1e308", "1e308"),
    ("-inf", "inf"),
]:
    case(f"release-interval-bounds-{lo}-{hi}", with_option(with_option(REL_BINS, "--lo", lo), "--hi", hi), None)
case("release-no-lo", without(REL, "--lo"), "--lo")
case("release-no-hi", without(REL, "--hi"), "--hi")
case("release-no-bins-no-integers", without(REL, "--integers"), "--bins")
case("release-bins-and-integers", REL + ["--bins", "8"], "--integers")
# --- release: choices, flags and usage ---------------------------------------------------
for option in ["--mechanism", "--workload", "--neighbours", "--noise", "--inference"]:
    for v in ["bogus", "", "HIERARCHICAL"]:
        case(f"release-choice{option}-{v!r}", with_option(REL, option, v), "Invalid value")
for inference in ("nnls", "l1"):
    for mechanism in ("hierarchical", "wavelet"):  # Flat still measures the one leaf
        case(
            f"release-one-public-bin-{mechanism}-{inference}",
            with_option(with_option(REL_BINS, "--bins", "1"), "-m", mechanism)
            + ["--neighbours", "replace", "--inference", inference],
            "nothing to fit",
        )
case("release-gaussian-without-delta", with_option(REL, "--noise", "gaussian"), "--delta")
case("release-replace-drop-missing", REL + ["--neighbours", "replace", "--drop-missing"], "--drop-missing cannot")
case(
    "release-replace-drop-missing-clean-data",
    with_option(REL, "--neighbours", "replace") + ["--drop-missing"],
    "public total",
)
case("release-unknown-option", REL + ["--bogus"], "No such option")
case("release-unknown-short-option", REL + ["-Z"], "No such option")
case("release-extra-argument", REL + ["extra.csv"], "unexpected extra argument")
case("release-no-input", ["release", "-c", "x", "-e", "1"], "Missing argument")
case("release-no-column", without(REL, "-c"), "Missing option")
case("release-no-epsilon", without(REL, "-e"), "Missing option")
case("release-option-without-value", REL + ["--lo"], "requires an argument")
case("release-flag-with-value", REL + ["--clip=yes"], None)
case("unknown-command", ["bogus"], "No such command")
case("no-command", [], "no command given")
case("ldp-no-command", ["ldp"], "no command given")
case("ldp-unknown-command", ["ldp", "bogus"], "No such command")
case("release-mechanism-auto-bad-epsilon", with_option(with_option(REL, "-m", "auto"), "-e", "0"), "epsilon")
case("release-no-root-huge-branching", REL + ["--no-root", "--branching", "10000000000"], "branching")
# --- release: outputs ---------------------------------------------------------------------
case("release-output-empty", with_option(REL, "-o", ""), "--output is empty")
case("release-output-space", with_option(REL, "-o", "  "), "--output is empty")
case("release-output-folder", with_option(REL, "-o", "{a_folder}"), "folder")
case("release-output-trailing-slash", with_option(REL, "-o", "sub/"), "folder")
case("release-output-inside-file", with_option(REL, "-o", "{good.csv}/r.json"), "is a file")
case("release-output-nested-inside-file", with_option(REL, "-o", "{good.csv}/a/b/r.json"), "is a file")
case("release-output-is-input", with_option(REL, "-o", "{good.csv}"), "is the input file")
case("release-plot-is-input", ["release", "{booleans.csv}"] + REL[2:] + ["--plot", "{booleans.csv}"], None)
case("encode-output-is-input", with_option(ENC, "-o", "{good.csv}"), "is the input file")
case("aggregate-output-is-input", with_option(AGG, "-o", "{rep_good.npz}"), "is the input file")
case("simulate-output-is-input", with_option(SIM, "-o", "{hist_good.npy}"), "is the input file")
case("release-plot-bad-suffix", REL + ["--plot", "cdf.xyz"], ".png")
case("release-plot-pdf", REL + ["--plot", "cdf.pdf"], ".png")
case("release-plot-no-suffix", REL + ["--plot", "cdf"], ".png")
case("release-plot-empty", REL + ["--plot", ""], "--plot is empty")
case("release-plot-folder", REL + ["--plot", "{a_folder}"], "folder")
case("release-plot-inside-file", REL + ["--plot", "{good.csv}/c.png"], "is a file")
case("release-plot-same-as-output", with_option(REL, "-o", "same.png") + ["--plot", "same.png"], "same file")
case(
    "release-plot-fails-later",
    with_option(with_option(REL, "-e", "0.001"), "--seed", "0")  # seed 0: noisy total < 0
    + ["--plot", "sub/c.png", "--mechanism", "flat"],
    "total is not positive",
)
case("release-bad-alpha-with-plot", REL + ["--alpha", "0", "--plot", "c.png"], "alpha")
case("release-bad-data-after-outputs-checked", with_option(REL, "--hi", "10") + ["--plot", "c.png"], "outside")
# --- release: data files -----------------------------------------------------------------
DATA_CASES = [
    ("nonnumeric.csv", "not numeric", None),
    ("booleans.csv", None, None),
    ("empty.csv", None, None),
    ("blank_lines.csv", None, None),
    ("missing.csv", "--drop-missing", None),
    ("nan.csv", "--drop-missing", None),
    ("inf.csv", "--clip", None),
    ("negative.csv", "--clip", None),
    ("fractional.csv", "--bins", None),
    ("huge_value.csv", "--clip", None),
    ("bom_nonnumeric.csv", "not numeric", None),
    ("latin1.csv", None, None),
    ("utf16.csv", None, None),
    ("garbage.csv", None, None),
    ("nul_bytes.csv", None, None),
    ("nul_line_late.csv", "NUL bytes", None),
    ("ragged_rows.csv", "row 3 has 1 field(s)", None),
    ("short_row.csv", "has 1 field(s) but the header names 2", None),
    ("long_row.csv", "has 3 field(s) but the header names 2", None),
    ("mixed_trailing_commas.csv", "trailing comma", None),
    ("only_commas.csv", None, None),
    ("csv_named.parquet", "Parquet", None),
    ("garbage.parquet", "Parquet", None),
    ("parquet_named.csv", None, None),
    ("strings.parquet", None, None),
    ("duplicate_columns.csv", "appears 2 times", None),
    ("a_folder", "folder", None),
    ("absent", "does not exist", None),
]
for name, expect, fix in DATA_CASES:
    column = "s" if name == "strings.parquet" else "x"
    case(f"release-data-{name}", ["release", "{" + name + "}"] + with_option(REL[2:], "-c", column), expect, fix)
for name in ["good.csv", "real.csv"]:
    case(
        f"release-data-{name}-missing-column",
        ["release", "{" + name + "}"] + with_option(REL[2:], "-c", "nope"),
        "not found",
    )
case("release-data-nonnumeric-redacted", ["release", "{nonnumeric.csv}"] + REL[2:] + ["--redact"], "not numeric")
case("encode-data-nonnumeric-redacted", ["ldp", "encode", "{nonnumeric.csv}"] + ENC[3:] + ["--redact"], "not numeric")
case("aggregate-redacted", ["ldp", "aggregate", "{oue_byte_256.jsonl}", "--redact", "-o", "a.json"], "0..255")
case("simulate-redacted", SIM + ["--redact", "--scale", "0"], "--scale")
case("release-data-string-column", with_option(REL, "-c", "name"), "not numeric")
case("release-data-boolean-column", with_option(REL, "-c", "flag"), None)
case("release-data-real-on-integers", ["release", "{real.csv}"] + with_option(REL[2:], "--hi", "1"), "--bins")
case("release-data-clip-then-missing", ["release", "{missing.csv}"] + REL[2:] + ["--clip"], "--drop-missing")

# --- error ----------------------------------------------------------------------------------
for v in BAD_EPSILON:
    case(f"error-epsilon-{v!r}", with_option(ERR, "-e", v), None)
for v in BAD_DELTA:
    case(f"error-delta-{v!r}", with_option(ERR, "--delta", v), None)
for v in BAD_COUNT:
    case(f"error-n-{v!r}", with_option(ERR, "--n", v), "n")
for v in ["0", "-5", "x", "100000000000"]:
    case(f"error-queries-{v!r}", ERR + ["-w", "random-ranges", "--queries", v], "queries")
for v in ["", ",", "h1", "h0", "hx", "bogus", "h1000000000000", "flat,,bogus", "h\u0663", "h-4", "h 4"]:
    case(f"error-mechanisms-{v!r}", ERR + ["--mechanisms", v], None)
for option in ["--workload", "--neighbours", "--noise"]:
    for v in ["bogus", ""]:
        case(f"error-choice{option}-{v!r}", with_option(ERR, option, v), "Invalid value")
case("error-gaussian-without-delta", ERR + ["--noise", "gaussian"], "--delta")
case("error-no-n", without(ERR, "--n"), "Missing option")
case("error-no-epsilon", without(ERR, "-e"), "Missing option")
case("error-extra-argument", ERR + ["x"], "unexpected extra argument")
case("error-json-with-value", ERR + ["--json=1"], None)

# --- demo -----------------------------------------------------------------------------------
for v in BAD_EPSILON:
    case(f"demo-epsilon-{v!r}", with_option(DEMO, "-e", v), None)
case("demo-output-empty", with_option(DEMO, "-o", ""), "--output is empty")
case("demo-output-is-file", with_option(DEMO, "-o", "{good.csv}"), "is a file")
case("demo-output-inside-file", with_option(DEMO, "-o", "{good.csv}/demo"), "is a file")
case("demo-unknown-option", DEMO + ["--bins", "3"], "No such option")
case("demo-extra-argument", DEMO + ["data.csv"], "unexpected extra argument")

# --- ldp encode -------------------------------------------------------------------------------
for v in BAD_EPSILON:
    case(f"encode-epsilon-{v!r}", with_option(ENC, "-e", v), None)
for oracle, eps in [
    ("oue", "23"),
    ("oue", "800"),
    ("hrr", "23"),
    ("hrr", "710"),
    ("grr", "60"),
    ("grr", "1e300"),
    ("olh", "11.1"),
    ("olh", "22.2"),
    ("olh", "30"),
    ("olh", "800"),
]:
    case(f"encode-{oracle}-epsilon-{eps}", with_option(ENC, "-e", eps) + ["--oracle", oracle], "supports epsilon")
    case(
        f"encode-flat-{oracle}-epsilon-{eps}",
        with_option(ENC, "-e", eps) + ["--oracle", oracle, "--protocol", "flat"],
        "supports epsilon",
    )
case("encode-haar-epsilon-23", with_option(ENC, "-e", "23") + ["--protocol", "haar"], "supports epsilon")
for v in ["0", "1", "-3", "x", "1000000000000"]:
    case(f"encode-branching-{v!r}", with_option(ENC, "--branching", v), "branching")
for v in BAD_COUNT:
    case(f"encode-bins-{v!r}", ENC + ["--bins", v], "bins")
for v in BAD_SEED:
    case(f"encode-seed-{v!r}", with_option(ENC, "--seed", v), "seed")
for option in ["--protocol", "--oracle"]:
    for v in ["bogus", ""]:
        case(f"encode-choice{option}-{v!r}", ENC + [option, v], "Invalid value")
for lo, hi in [("5", "4"), ("0.5", "10"), ("nan", "1"), ("0", "inf"), ("0", "1e12"), ("0", "0")]:
    case(f"encode-bounds-{lo}-{hi}", with_option(with_option(ENC, "--lo", lo), "--hi", hi), None)
case("encode-no-lo", without(ENC, "--lo"), "--lo")
case("encode-no-column", without(ENC, "-c"), "Missing option")
case("encode-no-epsilon", without(ENC, "-e"), "Missing option")
case("encode-output-empty", with_option(ENC, "-o", ""), "--output is empty")
case("encode-output-folder", with_option(ENC, "-o", "{a_folder}"), "folder")
case("encode-output-inside-file", with_option(ENC, "-o", "{good.csv}/rep.npz"), "is a file")
# A header-only CSV is an empty dataset, which a central release may publish; encode refuses it.
case("encode-data-header_only.csv", ["ldp", "encode", "{header_only.csv}"] + ENC[3:], "nothing to encode")
for name, expect, fix in DATA_CASES:
    case(f"encode-data-{name}", ["ldp", "encode", "{" + name + "}"] + ENC[3:], expect, fix)
case("encode-data-outside-bounds", with_option(ENC, "--hi", "10"), "outside")
case("encode-data-string-column", with_option(ENC, "-c", "name"), "not numeric")

# --- ldp aggregate ----------------------------------------------------------------------------
REPORT_CASES = [
    ("rep_junk.npz", "malformed"),
    ("rep_empty.npz", "malformed"),
    ("rep_zip_junk.npz", "malformed"),
    ("rep_no_meta.npz", "malformed"),
    ("rep_bad_meta.npz", "malformed"),
    ("rep_bits_int64.npz", "packed bytes"),
    ("rep_n_string.npz", "user count"),
    ("rep_n_0d.npz", "user count"),
    ("rep_unsampled_level.npz", "level probability is 0"),
    ("rep_unsampled_level.jsonl", "level probability is 0"),
    ("rep_sign_half.npz", "sign"),
    ("rep_sign_bool.npz", "sign"),
    ("oue_byte_256.jsonl", "0..255"),
    ("oue_byte_negative.jsonl", "0..255"),
    ("oue_byte_float.jsonl", "integers"),
    ("oue_byte_bool.jsonl", "true/false"),
    ("oue_byte_string.jsonl", "integers"),
    ("oue_too_few_bytes.jsonl", None),
    ("oue_too_many_bytes.jsonl", None),
    ("oue_ragged.jsonl", None),
    ("oue_level_bool.jsonl", None),
    ("oue_level_unknown.jsonl", None),
    ("oue_row_not_list.jsonl", None),
    ("oue_row_empty.jsonl", None),
    ("oue_row_long.jsonl", None),
    ("oue_bad_json_line.jsonl", None),
    ("oue_no_users.jsonl", "no reports"),
    ("oue_eps_800.jsonl", "supports epsilon"),
    ("oue_eps_negative.jsonl", "epsilon"),
    ("oue_domain_string.jsonl", "header"),
    ("oue_domain_negative.jsonl", "header"),
    ("oue_domain_huge.jsonl", None),
    ("oue_protocol_unknown.jsonl", "unknown protocol"),
    ("oue_oracle_unknown.jsonl", "header"),
    ("oue_level_probabilities.jsonl", "header"),
    ("oue_protocol_list.jsonl", "header"),
    ("oue_protocol_string.jsonl", "header"),
    ("oue_no_fields.jsonl", None),
    ("oue_levels_list.jsonl", None),
    ("oue_level_domain.jsonl", None),
    ("oue_no_epsilon.jsonl", "header"),
    ("header_list.jsonl", None),
    ("header_bad_json.jsonl", None),
    ("only_brace.jsonl", None),
    ("hrr_sign_bool.jsonl", "true/false"),
    ("hrr_sign_two.jsonl", "sign"),
    ("hrr_sign_zero.jsonl", "sign"),
    ("hrr_sign_float.jsonl", "integers"),
    ("hrr_row_outside.jsonl", "0..15"),
    ("hrr_row_negative.jsonl", "0..15"),
    ("hrr_row_bool.jsonl", "true/false"),
    ("hrr_row_huge.jsonl", None),
    ("grr_value_outside.jsonl", "0..9"),
    ("grr_value_negative.jsonl", "0..9"),
    ("grr_value_float.jsonl", "integers"),
    ("grr_value_null.jsonl", None),
    ("olh_seed_negative.jsonl", "non-negative"),
    ("olh_value_outside.jsonl", "lie in"),
    ("olh_seed_string.jsonl", "integers"),
    ("good.csv", None),
    ("empty.csv", None),
    ("garbage.csv", None),
    ("a_folder", None),
    ("absent", "cannot read"),
]
for name, expect in REPORT_CASES:
    case(f"aggregate-{name}", ["ldp", "aggregate", "{" + name + "}", "-o", "agg.json"], expect)
    case(
        f"aggregate-good-then-{name}", ["ldp", "aggregate", "{rep_good.npz}", "{" + name + "}", "-o", "agg.json"], None
    )
case("aggregate-other-epsilon", AGG[:3] + ["{rep_other_eps.npz}"] + AGG[3:], "expected 1.0")
case("aggregate-other-protocol", AGG[:3] + ["{rep_haar.npz}"] + AGG[3:], "do not match")
case("aggregate-same-file-twice", AGG[:3] + ["{rep_good.npz}"] + AGG[3:], "given twice")
case("aggregate-same-users-both-forms", AGG[:3] + ["{rep_good.jsonl}", "{rep_good.npz}"] + AGG[3:], "given twice")
case("aggregate-no-files", ["ldp", "aggregate", "-o", "agg.json"], "Missing argument")
case("aggregate-domain-mismatch", AGG + ["--lo", "0", "--hi", "99"], "cover 16 values")
case("aggregate-lo-without-hi", AGG + ["--lo", "0"], "--hi")
case("aggregate-bad-bins", AGG + ["--lo", "0", "--hi", "1", "--bins", "0"], "bins")
case("aggregate-output-empty", with_option(AGG, "-o", ""), "--output is empty")
case("aggregate-output-folder", with_option(AGG, "-o", "{a_folder}"), "folder")
case("aggregate-epsilon-option", AGG + ["-e", "1"], "No such option")

# --- ldp simulate -----------------------------------------------------------------------------
for name, expect in [
    ("hist_strings.npy", "numeric"),
    ("hist_2d.npy", "1-D"),
    ("hist_empty.npy", "at least 2"),
    ("hist_one_bin.npy", "at least 2"),
    ("hist_fractional.npy", "whole-number"),
    ("hist_negative.npy", "negative"),
    ("hist_nan.npy", "whole-number"),
    ("hist_inf.npy", "whole-number"),
    ("hist_zeros.npy", "empty"),
    ("hist_bool.npy", "numeric"),
    ("hist_complex.npy", "numeric"),
    ("hist_scalar.npy", "1-D"),
    ("hist_huge_float.npy", "2^53"),
    ("hist_pickled.npy", "cannot read"),
    ("hist_garbage.npy", "not a NumPy .npy file"),
    ("hist_archive.npy", ".npz archive"),
    ("empty.csv", "not a NumPy .npy file"),
    ("a_folder", "directory"),
    ("absent", "does not exist"),
]:
    case(f"simulate-{name}", ["ldp", "simulate", "{" + name + "}"] + SIM[3:], expect)
for v in BAD_EPSILON:
    case(f"simulate-epsilon-{v!r}", with_option(SIM, "-e", v), None)
for oracle, eps in [("oue", "23"), ("hrr", "800"), ("olh", "12"), ("grr", "1e300")]:
    case(f"simulate-{oracle}-epsilon-{eps}", with_option(SIM, "-e", eps) + ["--oracle", oracle], "supports epsilon")
for v in ["0", "-1", "x", "100000000000000000000"]:
    case(f"simulate-scale-{v!r}", SIM + ["--scale", v], "scale")
case("simulate-scale-too-many-clients", SIM + ["--protocol", "haar", "--scale", "100000000"], "lower --scale")
for v in BAD_SEED:
    case(f"simulate-seed-{v!r}", with_option(SIM, "--seed", v), "seed")
case("simulate-bounds-with-npy", SIM + ["--lo", "0", "--hi", "7"], "apply to --column")
case("simulate-column-no-bounds", ["ldp", "simulate", "{good.csv}", "-c", "x", "-e", "1", "-o", "sim.json"], "--lo")
case(
    "simulate-column-bad-data",
    ["ldp", "simulate", "{nonnumeric.csv}", "-c", "x", "--lo", "0", "--hi", "9", "-e", "1", "-o", "sim.json"],
    "not numeric",
)
case(
    "simulate-column-outside",
    ["ldp", "simulate", "{good.csv}", "-c", "x", "--lo", "0", "--hi", "9", "-e", "1", "-o", "sim.json"],
    "outside",
)
case(
    "simulate-column-one-bin",
    [
        "ldp",
        "simulate",
        "{good.csv}",
        "-c",
        "x",
        "--lo",
        "0",
        "--hi",
        "100",
        "--bins",
        "1",
        "-e",
        "1",
        "-o",
        "sim.json",
    ],
    "at least 2 bins",
)
case("simulate-output-empty", with_option(SIM, "-o", ""), "--output is empty")
case("simulate-output-inside-file", with_option(SIM, "-o", "{good.csv}/s.json"), "is a file")
case("simulate-branching-1", SIM + ["--branching", "1"], "branching")


# ------------------------------------------------------------------------------ the checks
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    return make_files(folder)


def snapshot(folder) -> dict:
    """Every path under ``folder`` with its size and modification time."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = os.path.join(root, name)
            stat = os.stat(path)
            out[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return out


def resolve(args, files):
    out = []
    for arg in args:
        for name, path in files.items():
            arg = arg.replace("{" + name + "}", path)
        out.append(arg)
    return out


def assert_clean_failure(code, err, expect):
    lines = err.splitlines()
    assert code == 2, f"exit status {code}, stderr: {err!r}"
    assert len(lines) == 1, f"stderr has {len(lines)} lines: {err!r}"
    assert lines[0].startswith("dprange: error: "), err
    assert "Traceback" not in err
    assert not PYTHON_WORDING.search(lines[0]), f"the message speaks Python, not options: {err!r}"
    if expect is not None:
        assert expect in lines[0], err


def test_campaign_is_large_enough():
    assert len(CASES) >= 300
    commands = {tuple(p.values[0][:2]) if p.values[0][:1] == ["ldp"] else tuple(p.values[0][:1]) for p in CASES}
    assert {
        ("release",),
        ("error",),
        ("demo",),
        ("ldp", "encode"),
        ("ldp", "aggregate"),
        ("ldp", "simulate"),
    } <= commands


@pytest.mark.parametrize("args,expect", CASES)
def test_bad_input(args, expect, files, tmp_path, monkeypatch, capsys):
    if (
        any("{" + name + "}" in " ".join(args) for name in ("parquet_named.csv", "strings.parquet"))
        and "parquet_named.csv" not in files
    ):
        pytest.skip("pyarrow is not installed")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    inputs = os.path.dirname(files["good.csv"])
    before = snapshot(inputs)
    with pytest.raises(SystemExit) as exc:
        main(resolve(args, files))
    err = capsys.readouterr().err
    assert_clean_failure(exc.value.code, err, expect)
    assert os.listdir(work) == [], f"left behind: {os.listdir(work)}"
    assert snapshot(inputs) == before
    assert "DPRANGE_REDACT" not in os.environ


# ------------------------------------------------------------------------------ core install
CORE_WRAPPER = """
import contextlib, io, json, os, sys
sys.modules["pandas"] = None
sys.modules["pyarrow"] = None
from dprange.cli import main
results = []
for work, args in json.loads(sys.stdin.read()):
    os.chdir(work)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code
    results.append([code, err.getvalue(), sorted(os.listdir(work))])
print(json.dumps(results))
"""

CORE_CASES = [
    ("release-parquet-without-pyarrow", ["release", "{csv_named.parquet}"] + REL[2:], "not a Parquet file", None),
    ("release-nonnumeric", ["release", "{nonnumeric.csv}"] + REL[2:], "not numeric", None),
    ("release-empty", ["release", "{empty.csv}"] + REL[2:], "empty", None),
    ("release-missing", ["release", "{missing.csv}"] + REL[2:], "--drop-missing", None),
    ("release-inf", ["release", "{inf.csv}"] + REL[2:], "--clip", None),
    ("release-fractional", ["release", "{fractional.csv}"] + REL[2:], "--bins", None),
    ("release-missing-column", with_option(REL, "-c", "nope"), "not found", None),
    ("release-latin1", ["release", "{latin1.csv}"] + REL[2:], "UTF-8", None),
    ("release-utf16", ["release", "{utf16.csv}"] + REL[2:], "UTF-8", None),
    ("release-garbage", ["release", "{garbage.csv}"] + REL[2:], "UTF-8", None),
    ("release-booleans", ["release", "{booleans.csv}"] + REL[2:], "not numeric", None),
    ("release-nul-bytes", ["release", "{nul_bytes.csv}"] + REL[2:], "NUL bytes", None),
    ("release-nul-line-late", ["release", "{nul_line_late.csv}"] + REL[2:], "NUL bytes", None),
    ("release-ragged-rows", ["release", "{ragged_rows.csv}"] + REL[2:], "row 3 has 1 field(s)", None),
    ("release-long-row", ["release", "{long_row.csv}"] + REL[2:], "has 3 field(s)", None),
    ("release-bad-alpha", with_option(REL, "--alpha", "2"), "alpha", None),
    ("release-bad-plot", REL + ["--plot", "c.xyz"], ".png", None),
    ("release-replace-drop-missing", REL + ["--neighbours", "replace", "--drop-missing"], "--drop-missing", None),
    ("release-output-empty", with_option(REL, "-o", ""), "--output is empty", None),
    ("release-huge-bins", with_option(REL_BINS, "--bins", "1000000000"), "bins", None),
    ("release-bad-choice", with_option(REL, "--noise", "bogus"), "Invalid value", None),
    ("error-huge-n", with_option(ERR, "--n", "1000000000"), "--n", None),
    ("demo-bad-epsilon", with_option(DEMO, "-e", "0"), "epsilon", None),
    ("encode-nonnumeric", ["ldp", "encode", "{nonnumeric.csv}"] + ENC[3:], "not numeric", None),
    ("encode-olh-epsilon", with_option(ENC, "-e", "30") + ["--oracle", "olh"], "supports epsilon", None),
    ("encode-latin1", ["ldp", "encode", "{latin1.csv}"] + ENC[3:], "UTF-8", None),
    ("aggregate-oue-byte-256", ["ldp", "aggregate", "{oue_byte_256.jsonl}", "-o", "a.json"], "0..255", None),
    ("aggregate-hrr-sign-bool", ["ldp", "aggregate", "{hrr_sign_bool.jsonl}", "-o", "a.json"], "true/false", None),
    ("simulate-fractional", ["ldp", "simulate", "{hist_fractional.npy}", "-e", "1"], "whole-number", None),
    ("simulate-strings", ["ldp", "simulate", "{hist_strings.npy}", "-e", "1"], "numeric", None),
    (
        "simulate-column-empty",
        ["ldp", "simulate", "{empty.csv}", "-c", "x", "--lo", "0", "--hi", "9", "-e", "1"],
        "empty",
        None,
    ),
]


@pytest.fixture(scope="module")
def core_results(files, tmp_path_factory):
    """Run every core-install case in one subprocess that blocks pandas and pyarrow."""
    base = tmp_path_factory.mktemp("core")
    jobs = []
    for i, (_, args, _, _) in enumerate(CORE_CASES):
        work = base / f"case{i}"
        work.mkdir()
        jobs.append([str(work), resolve(args, files)])
    src = str(REPO / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(src), os.environ.get("PYTHONPATH", "")])}
    env.pop("DPRANGE_REDACT", None)
    proc = subprocess.run(
        [sys.executable, "-c", CORE_WRAPPER],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(zip([c[0] for c in CORE_CASES], json.loads(proc.stdout)))


@pytest.mark.parametrize(
    "case_id,expect",
    [
        pytest.param(c[0], c[2], id=c[0], marks=[pytest.mark.xfail(strict=True, reason=c[3])] if c[3] else [])
        for c in CORE_CASES
    ],
)
def test_bad_input_core_install(case_id, expect, core_results):
    code, err, left = core_results[case_id]
    assert_clean_failure(code, err, expect)
    assert left == []


def test_core_install_really_lacks_pandas(files, tmp_path):
    """The wrapper's blocking works: a Parquet input asks for pyarrow."""
    src = str(REPO / "src")
    code = (
        "import sys; sys.modules['pandas'] = None; sys.modules['pyarrow'] = None\n"
        "import dprange.io as io_\n"
        "try:\n    import pandas\nexcept ImportError:\n    print('blocked')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src}, timeout=60
    )
    assert proc.stdout.strip() == "blocked"


# ------------------------------------------------------------------------------ console processes
CONSOLE_CASES = [
    ("unknown-option", ["release", "x.csv", "--bogus"], "No such option", None),
    ("bad-choice", ["error", "--n", "8", "-e", "1", "-w", "bogus"], "Invalid value", None),
    ("missing-argument", ["ldp", "aggregate"], "Missing argument", None),
    ("bad-type", ["release", "x.csv", "-c", "x", "-e", "one"], "not a valid float", None),
    ("output-empty", with_option(REL, "-o", ""), "--output is empty", None),
    ("tiny-epsilon", with_option(REL, "-e", "1e-300"), "epsilon", None),
]


@pytest.mark.parametrize(
    "args,expect",
    [
        pytest.param(c[1], c[2], id=c[0], marks=[pytest.mark.xfail(strict=True, reason=c[3])] if c[3] else [])
        for c in CONSOLE_CASES
    ],
)
def test_bad_input_console(args, expect, files, tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "dprange")
    src = str(REPO / "src")
    proc = subprocess.run(
        [exe, *resolve(args, files)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": src},
        timeout=60,
    )
    assert_clean_failure(proc.returncode, proc.stderr, expect)
    assert os.listdir(tmp_path) == []
