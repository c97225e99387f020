"""An estimate becomes answers: the :class:`Release` (ranges, CDF, quantiles with exact error
bars), the k-D :class:`GridRelease`, and saving and loading them."""
