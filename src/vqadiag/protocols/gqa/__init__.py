"""GQA: the official eval.py metrics (docs/protocols.md §7)."""
