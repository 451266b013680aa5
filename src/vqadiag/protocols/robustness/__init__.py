"""Robustness to basic-question noise: ranking, noise partitions, R_score
(docs/protocols.md §4)."""
