"""dprange.data_aware.release: a saved data-aware release says why it has no error bars."""

from __future__ import annotations

import numpy as np
from _helpers import counts_example

from dprange.answers.release import Release
from dprange.data_aware.dawa import DAWA
from dprange.data_aware.mwem import MWEM


def test_saved_data_aware_release_says_why_it_has_no_error_bars():
    for mech in (DAWA(), MWEM(rounds=3)):
        r = mech.release(counts_example(), 1.0, rng=1)
        saved = r.to_dict()
        assert saved["error_bars"].startswith("not available: private data-dependent choices")
        assert saved["total"]["stderr"] is None and saved["deciles"]["lower"] is None
        loaded = Release.from_json(r.to_json())
        assert loaded.exact_error_bars is False and loaded.provenance == r.provenance
        np.testing.assert_allclose(loaded.estimate, r.estimate)
