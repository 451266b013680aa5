"""The PyTorch networks of the built-in models, one module per model, each network a
top-level ``nn.Module`` built from a config dataclass of its sizes.

These modules import torch when imported; the model modules that use them
(:mod:`vqadiag.models.reference`, :mod:`vqadiag.models.remedies`) import them only when
a network is built, so ``import vqadiag`` works without PyTorch."""
