"""Old run folders, in one place: what an option missing from a saved ``config.json``
means (docs/models.md, "Models").

A run saved before an option existed did not write it; it was trained as the model was
then, so loading it fills the option with that earlier value, never with today's
default. Every model's table is here, and :meth:`vqadiag.models.training.TorchModel.load`
is the one caller (:func:`upgrade_options`). A plug-in model adds its table to
:data:`OPTIONS_OF_OLD_RUNS` under its registered name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: UpDn: a config without ``feature_norm`` used raw features, one without ``pooling``
#: pooled the object features
UPDN_BEFORE_NORM_AND_POOLING: dict[str, Any] = {"feature_norm": "none", "pooling": "features"}
#: The pixel model: a config without these options was saved before they existed, by a
#: grid run (also the options the pixel model leaves out of a config when they have these
#: values)
PIXEL_BEFORE_BOXES: dict[str, Any] = {
    "head": "grid",
    "token_supervision": 1.0,
    "encoder": "grid",
    "crop_size": 24,
    "pretrain_epochs": 0,
    "freeze_encoder": False,
    "crop_pooling": "mean",
    "attribute_loss": "mean",
    "lr_schedule": "constant",
}
#: registered model name → the value each option had before it existed
OPTIONS_OF_OLD_RUNS: dict[str, dict[str, Any]] = {
    "updn": UPDN_BEFORE_NORM_AND_POOLING,
    "pixel": {"attention_supervision": 0.0, **PIXEL_BEFORE_BOXES},
}


def upgrade_options(model: str, saved: Mapping[str, Any]) -> dict[str, Any]:
    """The options a saved config of ``model`` means: its own, and for each option it
    lacks, the value that option had before it existed."""
    return {**OPTIONS_OF_OLD_RUNS.get(model, {}), **saved}
