"""Reasoning / perception consistency on VQA-introspect (docs/protocols.md §6)."""
