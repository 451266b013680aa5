"""The parts of the trained chat VLM that transformers loads with no vqadiag code
(docs/chat-vlm.md, "The model"): a byte-level BPE tokenizer trained on the world's
training questions and answers, a CLIP image processor (the whole image resized to a
square, no crop), the LLaVA-1.5-style chat template (or the same with the question
first) and a LLaVA configuration (a CLIP vision tower and a Llama language model).

Nothing is downloaded: the tokenizer is trained with ``tokenizers``, the configurations
are written here, and the weights start from a seeded random initialisation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: what every turn of both templates shares: the role, then (after the content, closing
#: the ``if`` on a string content that each template opens) the end-of-sequence token of
#: an assistant turn and, at the end, the generation prompt
_TURN_OPEN = "{% for m in messages %}{{ m['role'].upper() }}: "
_TURN_CLOSE = (
    "{% endif %}{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)
_IS_IMAGE = "c['type'] == 'image' or c['type'] == 'image_url'"
#: LLaVA-1.5's conversation format, as transformers renders it (``trim_blocks``):
#: ``USER: <image>\n{text}ASSISTANT: {answer}</s>`` (the parts in the order given; a
#: string content as it is)
CHAT_TEMPLATE = (
    _TURN_OPEN + "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if " + _IS_IMAGE + " %}"
    "<image>\n{% else %}{{ c['text'] }}{% endif %}{% endfor %}" + _TURN_CLOSE
)
#: the same conversation with the question first, ``USER: {text}\n<image>ASSISTANT:``
#: (option ``question_first``): in a causal model the image tokens then see the question.
#: The text comes first whatever order the parts are given in, a string content's too:
#: a harness that writes ``<image>\n`` before the question in one string (lmms-eval's
#: simple ``llava_hf``; ``<image> <image>\n`` for two) has each ``<image>`` moved after
#: the text, as the parts are, and a string already in this order renders as it is
QUESTION_FIRST_TEMPLATE = (
    _TURN_OPEN + "{% if m['content'] is string %}"
    "{{ m['content'].replace('<image>\\n', '').replace('\\n<image>', '')"
    ".replace('<image> ', '').replace('<image>', '') }}"
    "{% for _ in range(m['content'].count('<image>')) %}{{ '\\n<image>' }}{% endfor %}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% for c in m['content'] %}{% if " + _IS_IMAGE + " %}"
    "{{ '\\n<image>' }}{% endif %}{% endfor %}" + _TURN_CLOSE
)
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<image>")
PAD, BOS, EOS, IMAGE = range(4)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """A byte-level BPE (``tokenizers``) trained on ``texts``, with :data:`SPECIAL_TOKENS`
    as ids 0–3, wrapped as a ``PreTrainedTokenizerFast`` (no BOS added: the template
    starts the text)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(texts), trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )


def build_processor(tokenizer: Any, options: Mapping[str, Any]) -> Any:
    """The ``LlavaProcessor``: the image resized to ``image_size`` × ``image_size`` (no
    centre crop, so no part of the picture is cut), ``(image_size / patch_size)²`` image
    tokens, :data:`CHAT_TEMPLATE` (:data:`QUESTION_FIRST_TEMPLATE` with ``question_first``)."""
    import transformers

    size = int(options["image_size"])
    image_processor = transformers.CLIPImageProcessorPil(
        size={"height": size, "width": size}, do_center_crop=False
    )
    return transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=int(options["patch_size"]),
        vision_feature_select_strategy="default",
        chat_template=QUESTION_FIRST_TEMPLATE if options["question_first"] else CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )


def llava_config(n_tokens: int, options: Mapping[str, Any]) -> Any:
    """The ``LlavaConfig`` of the options: a CLIP vision tower (``vision_dim`` ×
    ``vision_layers``, ``patch_size`` over ``image_size``) and a Llama
    (``text_dim`` × ``text_layers``) over a vocabulary of ``n_tokens``."""
    import transformers

    vd, td = int(options["vision_dim"]), int(options["text_dim"])
    heads_v, heads_t = int(options["vision_heads"]), int(options["text_heads"])
    return transformers.LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model", "hidden_size": vd, "intermediate_size": 4 * vd,
            "num_hidden_layers": int(options["vision_layers"]), "num_attention_heads": heads_v,
            "image_size": int(options["image_size"]), "patch_size": int(options["patch_size"]),
        },
        text_config={
            "model_type": "llama", "vocab_size": n_tokens, "hidden_size": td,
            "intermediate_size": 4 * td, "num_hidden_layers": int(options["text_layers"]),
            "num_attention_heads": heads_t, "num_key_value_heads": heads_t,
            "max_position_embeddings": 512, "bos_token_id": BOS, "eos_token_id": EOS,
            "pad_token_id": PAD, "tie_word_embeddings": True,
        },
        image_token_id=IMAGE,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
    )  # fmt: skip


def build_llava(n_tokens: int, options: Mapping[str, Any], seed: int) -> Any:
    """A ``LlavaForConditionalGeneration`` of :func:`llava_config`, initialised with
    ``torch.manual_seed(seed)``; greedy generation of at most 8 tokens by default."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.LlavaForConditionalGeneration(llava_config(n_tokens, options))
    model.generation_config.pad_token_id = PAD
    model.generation_config.eos_token_id = EOS
    model.generation_config.bos_token_id = BOS
    model.generation_config.do_sample = False
    model.generation_config.max_new_tokens = 8
    return model


def image_tokens(options: Mapping[str, Any]) -> int:
    """Image tokens per image: one per patch (the class token is dropped)."""
    return (int(options["image_size"]) // int(options["patch_size"])) ** 2
