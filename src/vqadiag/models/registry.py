"""The one model registry: model names, adapters and parsing ``--model`` specs.

* ``MODELS`` maps each name a run's ``config.json`` carries under ``"model"`` to
  a dotted path ``module:Class``; nothing (in particular not torch) is imported
  until a model is asked for. ``TRAINABLE`` are the names ``vqadiag train`` offers.
* Adapters turn ``--model KIND:SPEC`` into a model: ``files:PREDICTIONS.json``
  (prediction files), ``hf:MODEL_DIR`` (a local transformers chat VLM, or ViLT / BLIP),
  ``openai:URL`` (an OpenAI-compatible server), and whatever a
  plug-in adds with :func:`register_adapter`.

:func:`load_model_spec` is the only place a model spec is parsed: a run folder
(``vqadiag train``) wins over an adapter prefix when both could match.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError
from vqadiag.models.checkpoint import CONFIG
from vqadiag.registry import Registry, resolve

MODELS: Registry[str] = Registry(
    "model",
    {
        "prior": "vqadiag.models.reference.prior:PriorModel",
        "question-only": "vqadiag.models.reference.question_only:QuestionOnlyModel",
        "updn": "vqadiag.models.reference.updn:UpDnModel",
        "symbolic": "vqadiag.models.reference.symbolic:SymbolicModel",
        "pixel": "vqadiag.models.reference.pixel:PixelModel",
        "chat-vlm": "vqadiag.models.reference.chat_vlm:TrainedChatVLM",
        "hf": "vqadiag.models.adapters.hf_adapter:HFModel",
        "hf-chat": "vqadiag.models.adapters.chat_vlm:ChatVLM",
        "files": "vqadiag.models.adapters.file_adapter:PredictionFileModel",
        "counterexample": "vqadiag.models.remedies.counterexample:CounterExampleModel",
    },
)
TRAINABLE: tuple[str, ...] = (
    "prior", "question-only", "updn", "symbolic", "pixel", "chat-vlm"
)  # fmt: skip


@dataclass(frozen=True)
class Adapter:
    """``--model KIND:SPEC``: ``load(SPEC)`` → a model; ``description`` for help texts."""

    kind: str
    load: Callable[[str], Any] | str
    description: str

    def __call__(self, spec: str, args: Mapping[str, Any] | None = None) -> Any:
        """``load(SPEC)``, or ``load(SPEC, args)`` when settings are given (``--model-args``);
        an adapter whose loader takes no settings refuses them."""
        target = resolve(self.load)
        if not args:
            return target(spec)
        try:
            inspect.signature(target).bind(spec, args)
        except TypeError:
            raise DataError(
                "--model-args", f"the {self.kind!r} adapter takes no settings"
            ) from None
        except ValueError:  # no signature to inspect (a builtin): try it
            pass
        return target(spec, args)


ADAPTERS: Registry[Adapter] = Registry(
    "model adapter",
    {
        "files": Adapter(
            "files",
            "vqadiag.models.adapters.file_adapter:load_files",
            "prediction files (plain condition only), or a harness's answers to exported "
            "conditions (--model-args conditions=EXPORT_DIR)",
        ),
        "hf": Adapter(
            "hf",
            "vqadiag.models.adapters.hf_adapter:load_hf",
            "a local transformers folder: a chat VLM, or ViLT / BLIP",
        ),
        "openai": Adapter(
            "openai",
            "vqadiag.models.adapters.openai_endpoint:load_endpoint",
            "an OpenAI-compatible chat-completions server: vLLM, SGLang, Ollama …",
        ),
    },
)


def register_model(name: str, target: str | type[Any]) -> None:
    """Register a model class under the name its run folders' ``config.json`` carries
    (``target``: the class or ``"module:Class"``, imported when first asked for); its
    ``load(run_dir)`` rebuilds it."""
    path = target if isinstance(target, str) else f"{target.__module__}:{target.__name__}"
    MODELS.add(name, path)


def register_adapter(kind: str, load: Callable[[str], Any] | str, description: str = "") -> None:
    """Make ``--model KIND:SPEC`` load ``load(SPEC)`` (a callable or ``"module:function"``)."""
    if not kind.isidentifier():
        raise ValueError(f"an adapter kind must be an identifier, got {kind!r}")
    ADAPTERS.add(kind, Adapter(kind, load, description or kind))


def unregister_adapter(kind: str) -> None:
    """Remove an adapter (tests, plug-ins that replace one)."""
    ADAPTERS.remove(kind)


def model_class(name: str, source: str | Path | None = "--model") -> type[Any]:
    """The class registered under ``name``; an unknown name raises ``DataError`` naming
    ``source`` (the option or file it came from) and the known names."""
    return resolve(MODELS.get(name, source))


def load_model(run_dir: str | Path) -> Any:
    """Rebuild the model of a run folder from ``config.json``'s ``"model"`` (never unpickles)."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise DataError(folder, "run folder not found")
    path = folder / CONFIG
    config = read_json(path)
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        raise DataError(path, "expected a JSON object naming its model under 'model'")
    return model_class(config["model"], path).load(folder)


def load_model_spec(spec: str, model_args: Mapping[str, Any] | None = None) -> Any:
    """The model of ``--model``: a run folder, or ``KIND:SPEC`` of a registered adapter
    with its ``--model-args`` settings (callers load plug-ins first:
    :func:`vqadiag.plugins.load_plugins`)."""
    kind, sep, rest = spec.partition(":")
    if sep and kind in ADAPTERS and not Path(spec).exists():
        if not rest:
            raise DataError("--model", f"adapter {kind!r} needs a path: {kind}:PATH")
        return ADAPTERS.get(kind)(rest, model_args)
    if model_args:
        raise DataError(
            "--model",
            "a run folder takes no --model-args, --device or --dtype: they set adapters "
            "(hf:…, openai:…); a chat-vlm run answers on a device as --model hf:RUN/model",
        )
    if sep and kind.isidentifier() and not Path(spec).exists() and len(kind) > 1:
        known = ", ".join(f"{k}:" for k in ADAPTERS)
        raise DataError("--model", f"unknown model adapter {kind!r} (known: {known})")
    return load_model(spec)


def describe_adapters() -> str:
    """``kind:SPEC (description)`` of every adapter, for help texts."""
    return ", ".join(f"{a.kind}:… ({a.description})" for a in ADAPTERS.as_dict().values())
