"""FPVG: faithful and plausible visual grounding (docs/protocols.md §5)."""
