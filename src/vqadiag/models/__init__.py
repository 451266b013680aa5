"""The ``VQAModel`` protocol, built-in reference models and adapters."""
