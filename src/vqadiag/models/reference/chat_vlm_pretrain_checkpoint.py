"""The vision pre-training's checkpoint file (docs/chat-vlm.md, "Resuming the
pre-training").

With ``-o pretrain_checkpoint=FILE`` stage 1 writes ``FILE`` atomically after every
epoch: the tower's and the heads' weights, AdamW's and the schedule's state, the seeded
generator's and PyTorch's random state, the epochs done and the last epoch's figures.
A later run with the same pre-training reads it back and goes on from the next epoch,
or skips the stage when every epoch is done. The tower it ends with is the one an
unbroken run trains, byte for byte on one device: everything an epoch reads is in the
file.

The file is keyed by every part of what the pre-training computes (:func:`key_parts`):
the tower's and the heads' initial weights (the seed, the vision options, the blind
twin's zeroed patch embedding), the digest of the pixels shown, of their scene graphs and
name and attribute indices, the pre-training options and the thread count, the
generator's starting state, the device type and the versions of PyTorch, transformers and
numpy. A file written by another pre-training is refused in one line that names the parts
that differ; it is never read into this one, nor overwritten. The parts known before any
image is read (:func:`settings_parts`) are checked before the images are read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.io.atomic import atomic_write, remove_stale_temporaries
from vqadiag.data.io.jsonio import stable_hash
from vqadiag.errors import DataError, first_line

if TYPE_CHECKING:
    import torch

#: the file's layout; a file of another layout is refused
FORMAT = 1

#: the options stage 1 reads (its schedule counts ``pretrain_epochs``, so a run asking
#: for more epochs is another pre-training, not a longer one), and ``threads``, which
#: changes how the CPU rounds
PRETRAIN_OPTIONS = (
    "pretrain_epochs",
    "pretrain_batch_size",
    "pretrain_lr",
    "pretrain_augment",
    "pretrain_object_loss",
    "patch_size",
    "image_size",
    "patch_labels",
    "aux_attributes",
    "threads",
)


def state_digest(modules: Sequence[torch.nn.Module]) -> str:
    """BLAKE2b (16 hex) of the modules' weights, names, shapes and dtypes, in order."""
    import torch

    digest = hashlib.blake2b(digest_size=8)
    for module in modules:
        for name, value in module.state_dict().items():
            tensor = value.detach().cpu().contiguous()
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def pixels_digest(pixels: torch.Tensor) -> str:
    """BLAKE2b (16 hex) of the pixel tensor's shape and float32 bytes."""
    digest = hashlib.blake2b(digest_size=8)
    array = np.ascontiguousarray(pixels.detach().cpu().numpy(), dtype=np.float32)
    digest.update(repr(array.shape).encode())
    digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def labels_digest(
    scenes: Mapping[str, Any], image_ids: Sequence[str], names: Mapping[str, int],
    attrs: Mapping[str, int],
) -> str:  # fmt: skip
    """SHA-256 (16 hex) of the scene graphs of ``image_ids`` in order and the name and
    attribute indices their patches are labelled with."""
    return stable_hash([[scenes[i] for i in image_ids], dict(names), dict(attrs)])


def key_parts(
    data: Mapping[str, str], modules: Sequence[torch.nn.Module], vision_config: Any,
    options: Mapping[str, Any], rng: np.random.Generator, device: torch.device,
) -> dict[str, Any]:  # fmt: skip
    """What keys the file: ``data`` (``pixels`` and ``labels`` digests), the ``modules``'
    initial weights, the generator's state and the :func:`settings_parts`."""
    return {
        **dict(data),
        "initial_weights": state_digest(modules),
        "generator": hashlib.sha256(repr(rng.bit_generator.state).encode()).hexdigest()[:16],
        **settings_parts(vision_config, options, device),
    }


def settings_parts(
    vision_config: Any, options: Mapping[str, Any], device: torch.device
) -> dict[str, Any]:
    """The key parts known before any image is read, so a file of other settings is
    refused before they are: the tower's whole configuration (``vision_config``: its head
    count changes what it computes, not its weights), the :data:`PRETRAIN_OPTIONS`, the
    device type and the :func:`library_versions`."""
    return {
        "vision_config": stable_hash(
            {k: v for k, v in vision_config.to_dict().items() if k != "transformers_version"}
        ),
        "options": {k: options[k] for k in PRETRAIN_OPTIONS},
        "device": device.type,
        "libraries": library_versions(),
    }


def library_versions() -> dict[str, str]:
    """The versions of the libraries whose arithmetic an epoch runs: PyTorch's kernels,
    transformers' tower and numpy's generator (its streams may change between
    versions)."""
    import torch
    import transformers

    return {
        "torch": str(torch.__version__),  # a TorchVersion, which weights_only refuses
        "transformers": transformers.__version__,
        "numpy": np.__version__,
    }


class PretrainCheckpoint:
    """The checkpoint ``path`` of one pre-training, keyed by :func:`key_parts`."""

    def __init__(self, path: str | Path, parts: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.parts = dict(parts)

    def load(self) -> dict[str, Any] | None:
        """The saved state (:meth:`save`'s fields), or None when there is no file; one
        line naming the file when it cannot be read or was written by another
        pre-training. Only the parts this checkpoint is keyed by are compared: one keyed
        by the :func:`settings_parts` alone checks a file before the images are read."""
        import torch

        remove_stale_temporaries(self.path.parent, self.path.name)  # of a killed writer
        if not self.path.exists():
            return None
        if not self.path.is_file():
            raise DataError(self.path, "pretrain_checkpoint is not a file")
        try:  # on the CPU: load_state_dict moves each part to its parameters' device
            saved = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as err:  # any unreadable pickle or zip: one line
            raise DataError(
                self.path, f"not a pre-training checkpoint vqadiag can read ({first_line(err)})"
            ) from None
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            raise DataError(self.path, f"not a pre-training checkpoint of format {FORMAT}")
        differ = _differences(saved.get("parts"), self.parts)
        if differ:
            verb = "differs" if len(differ) == 1 else "differ"
            raise DataError(
                self.path,
                f"pretrain_checkpoint was written by another pre-training ({', '.join(differ)} "
                f"{verb}): name another file, or remove this one to start again",
            )
        return saved

    def save(self, state: Mapping[str, Any]) -> None:
        """Write ``state`` (:func:`training_state`) with the key, atomically."""
        import torch

        with atomic_write(self.path) as handle:
            torch.save({"format": FORMAT, "parts": self.parts, **state}, handle)


def _differences(saved: Any, ours: Mapping[str, Any]) -> list[str]:
    """The names of the key parts that differ (``options.NAME`` for an option,
    ``libraries.NAME`` for a library)."""
    if not isinstance(saved, dict):
        return ["its key"]
    out = []
    for name, value in ours.items():
        if isinstance(value, dict) and isinstance(saved.get(name), dict):
            out += [f"{name}.{k}" for k in value if saved[name].get(k) != value[k]]
        elif saved.get(name) != value:
            out.append(name)
    return out


#: what a checkpoint saves the state of, in this order: the tower, the heads, AdamW and
#: the schedule (each with ``state_dict`` and ``load_state_dict``)
Trained = tuple[Any, Any, Any, Any]
_NAMES = ("tower", "heads", "optimizer", "scheduler")


def finished(saved: Mapping[str, Any] | None, epochs: int) -> bool:
    """Whether a loaded state ``saved`` (None: no file) holds all ``epochs``: a run then
    skips the stage and never writes the file."""
    done = None if saved is None else saved.get("epochs_done")
    return isinstance(done, int) and done >= epochs


def training_state(
    done: int, trained: Trained, rng: np.random.Generator, stats: Mapping[str, float]
) -> dict[str, Any]:
    """What :meth:`PretrainCheckpoint.save` keeps after ``done`` epochs (the module
    docstring): the ``trained`` objects' states, the generator's and PyTorch's random
    state and the last epoch's figures."""
    import torch

    return {
        "epochs_done": done,
        **{name: part.state_dict() for name, part in zip(_NAMES, trained, strict=True)},
        "generator": dict(rng.bit_generator.state),
        "torch_rng": torch.random.get_rng_state(),
        "stats": dict(stats),
    }


def restore(
    checkpoint: PretrainCheckpoint, saved: Mapping[str, Any], trained: Trained,
    rng: np.random.Generator,
) -> tuple[int, dict[str, float]]:  # fmt: skip
    """Load a :func:`training_state` ``saved`` of ``checkpoint`` into the ``trained``
    objects and ``rng`` (and PyTorch's random state); returns the epochs done and the
    last epoch's figures. A state its key matches that cannot be loaded (a damaged or
    hand-made file) is one line naming the file."""
    try:
        return _restore(saved, trained, rng)
    except (KeyError, RuntimeError, TypeError, ValueError) as err:
        raise DataError(
            checkpoint.path, f"its state cannot be loaded ({first_line(err)})"
        ) from None


def _restore(
    saved: Mapping[str, Any], trained: Trained, rng: np.random.Generator
) -> tuple[int, dict[str, float]]:
    import torch

    for name, part in zip(_NAMES, trained, strict=True):
        part.load_state_dict(saved[name])
    rng.bit_generator.state = dict(saved["generator"])
    torch.random.set_rng_state(saved["torch_rng"])
    return int(saved["epochs_done"]), dict(saved["stats"])
