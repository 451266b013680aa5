"""The synthetic world, written in the real GQA, VQA v2 and VQA-introspect formats.

``generate_world(out_dir, images=2000, seed=0, bias=0.8, feature_dim=64)`` writes
a world and returns a summary; :func:`vqadiag.workflows.world_stats.world_stats`
reads it back (``vqadiag stats``).
"""

from vqadiag.synth.world import generate_world

__all__ = ["generate_world"]
