"""Remedies: the counter-example explainer, debiasing and grounding losses and
fine-tuning (docs/remedies.md, docs/explain.md)."""
