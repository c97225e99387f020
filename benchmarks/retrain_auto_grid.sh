#!/bin/sh
# Rebuild the tables of the 2-D auto-data selector and refit it the way the shipped list was
# fitted (docs/data-aware.md, "auto-data on 2-D grids"; train_auto_grid.py's docstring).
#
#   1. training table: the DPBench and synthetic shapes (train_auto_grid.py's defaults), trials 0-2;
#   2. test table: the DPBench shapes at every side, trials 100-109, and the UNSEEN shapes at
#      32 x 32 to 128 x 128, trials 100-102 (one file: --test reads one);
#   3. auto_toward_nonnegative (auto-data's auto branch) on the test trials (--weighted);
#   4. the rules fit (--kinds rules --skip rules-random --unseen-to-auto 1.4), written to OUT,
#      never over the package's selector; its list (features, candidates, tree) is then compared
#      with the shipped one's (the figures stored beside it move with the tables' last digits).
#      The fit runs every candidate measured; DROP (default none) names candidates it leaves
#      out, e.g. DROP=agrid_fine fits the list shipped before agrid_fine was measured again.
#
# Each table is written under a temporary name and renamed when complete, and a step whose table
# exists is skipped: an interrupted run resumes at the step it stopped in.  TABLES names a folder
# of tables kept from an earlier run, compressed by xz (benchmarks/tables/auto_grid holds the
# training and test tables and the weighted rows): a step whose table is there takes it instead
# of measuring, so that with TABLES=benchmarks/tables/auto_grid only the fit runs (about 45
# minutes on 2 cores).  Every
# cell seeds its own samples and noise, so JOBS (processes) changes the time, not the tables;
# each process uses one BLAS thread unless OPENBLAS_NUM_THREADS says otherwise.  The whole run
# is hours of CPU (the training table's 256 x 256 cells alone about 2.2 hours: docs/data-aware.md,
# "Retraining"); SIDES and SCALES shrink it for a check of the pipeline.
#
#   OUT=/tmp/auto_grid JOBS=16 sh benchmarks/retrain_auto_grid.sh
#   OUT=/tmp/auto_grid TABLES=benchmarks/tables/auto_grid sh benchmarks/retrain_auto_grid.sh   # the kept tables taken
#   OUT=/tmp/small SIDES=32 SCALES=1e3,1e5 UNSEEN_SIDES=32 sh benchmarks/retrain_auto_grid.sh
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python}
OUT=${OUT:-auto_grid_tables}
JOBS=${JOBS:-$(nproc)}
SIDES=${SIDES:-32,64,128,256}
UNSEEN_SIDES=${UNSEEN_SIDES:-32,64,128}
SCALES=${SCALES:-1e3,1e4,1e5,1e6,1e7}
TABLES=${TABLES:-}
DROP=${DROP-}
DPBENCH=ADULT-2D,MDSALARY-OVERT,STROKE,GOWALLA
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
UNSEEN=lattice-8,ring,points-500,gradient,mix-100,mix-101,mix-102,mix-103,mix-104,mix-105,mix-106,mix-107,mix-108,mix-109,mix-110,mix-111
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -n "$TABLES" ]; then
    TABLES=$(cd "$TABLES" && pwd)
fi
cd "$HERE"
train() { "$PYTHON" train_auto_grid.py --jobs "$JOBS" --scales "$SCALES" "$@"; }

# made <table> <command...>: run the command, which writes <table>.part, unless <table> exists
# or TABLES has it (<name>.xz)
made() {
    table=$1
    shift
    if [ -s "$table" ]; then
        echo "kept $table" >&2
        return 0
    fi
    kept="$TABLES/$(basename "$table").xz"
    if [ -n "$TABLES" ] && [ -s "$kept" ]; then
        echo "taken from $kept" >&2
        "$PYTHON" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$kept" "$table.part"
        mv "$table.part" "$table"
        return 0
    fi
    rm -f "$table.part"
    "$@"
    mv "$table.part" "$table"
}

made "$OUT/training.jsonl" train --measure-only --measurements "$OUT/training.jsonl.part" --sides "$SIDES" --trials 3
test_tables() {
    train --measure-only --measurements "$OUT/test-dpbench.part" --shapes "$DPBENCH" --sides "$SIDES" \
        --trials 10 --first-trial 100
    train --measure-only --measurements "$OUT/test-unseen.part" --shapes "$UNSEEN" --sides "$UNSEEN_SIDES" \
        --trials 3 --first-trial 100
    cat "$OUT/test-dpbench.part" "$OUT/test-unseen.part" > "$OUT/test.jsonl.part"
    rm -f "$OUT/test-dpbench.part" "$OUT/test-unseen.part"
}
made "$OUT/test.jsonl" test_tables
weighted_tables() {
    rm -f "$OUT/weighted.jsonl.part"  # measure_weighted appends
    train --measure-weighted "$OUT/weighted.jsonl.part" --shapes "$DPBENCH" --sides "$SIDES" --trials 10 --first-trial 100
    train --measure-weighted "$OUT/weighted.jsonl.part" --shapes "$UNSEEN" --sides "$UNSEEN_SIDES" --trials 3 \
        --first-trial 100
}
made "$OUT/weighted.jsonl" weighted_tables
made "$OUT/auto_grid_selector.json" train --reuse --measurements "$OUT/training.jsonl" --test "$OUT/test.jsonl" \
    --weighted "$OUT/weighted.jsonl" --kinds rules --skip rules-random --unseen-to-auto 1.4 --drop-candidates "$DROP" \
    --selector "$OUT/auto_grid_selector.json.part" --validation "$OUT/validation.json"
"$PYTHON" - "$OUT/auto_grid_selector.json" ../src/dprange/data_aware/auto_grid_selector.json <<'EOF'
import json, sys
new, shipped = (json.load(open(path)) for path in sys.argv[1:])
same = all(new.get(part) == shipped.get(part) for part in ("features", "candidates", "kind", "model"))
print("the refitted list is the shipped one" if same else f"the refitted list differs from the shipped one: {sys.argv[1]}")
EOF
