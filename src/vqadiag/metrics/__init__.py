"""The statistics every protocol shares, as pure functions (arrays in, numbers out, no
I/O): bootstrap intervals and paired comparisons (docs/protocols.md §8) and VQA answer
matching (§1). Each protocol's own formulas live in ``vqadiag.protocols.<name>``."""
