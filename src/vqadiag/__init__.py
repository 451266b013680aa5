"""vqadiag: what accuracy hides about your VQA model.

The Python API mirrors the command line; see :mod:`vqadiag.api`.
"""

from __future__ import annotations

__version__ = "0.1.0"
