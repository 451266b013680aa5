"""Adapters: models vqadiag does not train (transformers folders, OpenAI-compatible
servers, prediction files) and the answers they generate (docs/vlms.md)."""
