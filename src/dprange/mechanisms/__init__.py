"""Central data-independent mechanisms: select a strategy, measure it with calibrated noise,
infer the histogram, and release it with exact error bars."""
