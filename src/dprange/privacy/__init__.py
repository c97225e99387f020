"""Randomness and accounting: the secure noise samplers, noise kinds and their calibration
(Laplace, discrete Laplace, discrete Gaussian), the exact exponential-mechanism sampler, and the
session ledger.  Nothing here reads data."""
