"""Strategy search: a workload in, the strategy of least exact error out (the templates of
McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018, and the L2-optimal strategy of Li and Miklau),
with the on-disk strategy cache."""
