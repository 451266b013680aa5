"""Whole workflows behind commands: train / predict, basic-question datasets, fine-tuning,
counter-example explanations, the report façade and ``vqadiag demo``."""
