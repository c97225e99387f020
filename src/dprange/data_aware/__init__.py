"""Data-aware mechanisms: a private select step with a declared share of epsilon (a partition,
selected queries, a tree's cut points), then the ordinary measure and infer (Miklau's
"exploiting the data": DAWA, MWEM, StructureFirst, GreedyH, kd-trees, iReduct)."""
