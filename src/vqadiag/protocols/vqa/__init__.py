"""VQA v2: accuracy as the official script computes it, complementary pairs and answer
balance (docs/protocols.md §1, §2)."""
