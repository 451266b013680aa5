"""vqadiag.registry: the one registry type behind suites, model classes and adapters."""

from __future__ import annotations

import pytest

from vqadiag.errors import DataError
from vqadiag.models.registry import ADAPTERS, MODELS
from vqadiag.registry import Registry, resolve
from vqadiag.suites.base import _REGISTRY


def test_entries_keep_their_order_and_a_new_entry_replaces_in_place():
    reg: Registry[int] = Registry("thing", {"a": 1, "b": 2})
    reg.add("c", 3)
    reg.add("a", 10)
    assert reg.names() == ["a", "b", "c"] and reg.get("a") == 10
    reg.remove("b")
    reg.remove("missing")
    assert list(reg) == ["a", "c"] and len(reg) == 2 and "c" in reg and "b" not in reg
    assert reg.as_dict() == {"a": 10, "c": 3}


def test_an_unknown_name_is_one_line_naming_the_source_and_the_known_names():
    reg: Registry[int] = Registry("model", {"prior": 1, "updn": 2})
    with pytest.raises(DataError) as err:
        reg.get("nope", "run/config.json")
    assert str(err.value) == "run/config.json: unknown model 'nope' (known: prior, updn)"


def test_resolve_imports_module_attribute_strings_only():
    assert resolve("vqadiag.registry:Registry") is Registry
    marker = object()
    assert resolve(marker) is marker


def test_suites_model_classes_and_adapters_are_registries():
    assert all(isinstance(r, Registry) for r in (_REGISTRY, MODELS, ADAPTERS))
    assert {"files", "hf", "openai"} <= set(ADAPTERS.names())


@pytest.mark.parametrize("settings", [{"device": "cuda"}, {"batch_size": "2"}])
def test_settings_for_a_run_folder_are_refused_naming_the_options_that_set_them(settings):
    from vqadiag.models.registry import load_model_spec

    with pytest.raises(DataError) as err:
        load_model_spec("runs/chat", settings)
    assert str(err.value) == (
        "--model: a run folder takes no --model-args, --device or --dtype: they set adapters "
        "(hf:…, openai:…); a chat-vlm run answers on a device as --model hf:RUN/model"
    )


def test_a_bad_generation_setting_names_model_args_once():
    from vqadiag.models.adapters.generated_answer import read_generation
    from vqadiag.models.model_args import ModelArgs

    with pytest.raises(DataError) as err:
        read_generation(ModelArgs({"extraction": "nosuch"}, "hf"))
    assert str(err.value) == ("--model-args: extraction must be one of short, raw, got 'nosuch'")
