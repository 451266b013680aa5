"""Question-side tools: embedders, basic-question rankers, noise partitions, question rules."""
