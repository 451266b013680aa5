"""Multi-modal gain: the model with its image against itself without it (docs/protocols.md §9)."""
