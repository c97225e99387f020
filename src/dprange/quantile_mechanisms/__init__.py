"""Quantile mechanisms that read raw values: the exponential mechanism (Smith, STOC 2011), its
recursive ApproxQuantiles (Kaplan, Schnapp, Stemmer, ICML 2022), JointExp (Gillenwater, Joseph,
Kulesza, ICML 2021), quantiles from a private histogram, and private bounds."""
