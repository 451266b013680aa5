"""The synthetic world, written in the real GQA, VQA v2 and VQA-introspect formats."""
