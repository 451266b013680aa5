"""The reference models vqadiag trains: prior, question-only, UpDn, symbolic and pixel
(docs/models.md)."""
