"""The synthetic world, written in the real GQA, VQA v2 and VQA-introspect formats.

``generate_world(out_dir, images=2000, seed=0, bias=0.8, feature_dim=64)`` writes
a world and returns a summary; ``world_stats(out_dir)`` reads it back.
"""

from vqadiag.synth.stats import world_stats
from vqadiag.synth.world import generate_world

__all__ = ["generate_world", "world_stats"]
