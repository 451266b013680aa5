"""What a reply of an OpenAI-compatible server means (``--model openai:URL``): the
generated text of a chat completion, the server's own error message, and the errors of
a request (docs/reliability.md, "Model servers that misbehave"). No HTTP here
(:mod:`.openai_http`), so this module needs no urllib3."""

from __future__ import annotations

from typing import Any

import orjson

from vqadiag.errors import first_line

#: the largest reply read (4 MiB; a chat completion of a short answer is about 1 KB)
MAX_REPLY_BYTES = 4 * 2**20


class EndpointError(Exception):
    """A request that failed (after its retries, where retried); the message says how."""


class ReplyError(EndpointError):
    """A reply that arrived but cannot be used (not JSON, no text): retried like a 5xx."""


class ReplyTooLarge(EndpointError):
    """A reply over :data:`MAX_REPLY_BYTES`: refused unread, not retried."""


class AttemptTimeout(EndpointError):
    """An attempt that had no complete reply within ``timeout`` seconds: retried."""


def excerpt(data: bytes, size: int = 80) -> str:
    """The first ``size`` bytes of a reply, on one line (for messages)."""
    return " ".join(data[:size].decode("utf-8", "replace").split()) or "(empty reply)"


def json_reply(data: bytes) -> Any:
    """``data`` parsed as JSON; :class:`ReplyError` when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ReplyError(f"the reply is not JSON: {excerpt(data)}") from None


def _text_parts(parts: list[Any]) -> str | None:
    """The ``text`` of the ``type: "text"`` content parts joined in order (the chat API's
    meaning of a list ``content``); None when there is none or one is not a string."""
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(texts)


def completion_text(data: bytes) -> str:
    """The generated text of a chat-completion reply (stripped):
    ``choices[0].message.content``, a string (possibly empty) or a list of content parts.
    :class:`ReplyError` for a reply that carries no text (not JSON, no choices, content
    null, no text part)."""
    reply = json_reply(data)
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        content = None
    if isinstance(content, list):
        content = _text_parts(content)
    if not isinstance(content, str):
        raise ReplyError(f"not a chat completion with text: {excerpt(data)}")
    return content.strip()


def server_message(data: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error reply, else its first 200 bytes."""
    try:
        reply = orjson.loads(data)
        message = reply["error"]["message"] if isinstance(reply.get("error"), dict) else None
        message = message or reply.get("error") or reply.get("detail") or reply.get("message")
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        message = None
    text = str(message) if message else data[:200].decode("utf-8", "replace")
    return first_line(text) if text.strip() else "(empty reply)"


def describe(err: BaseException) -> str:
    """One line saying how an attempt failed (a urllib3 error by its reason)."""
    if isinstance(err, EndpointError):
        return first_line(err)
    reason = getattr(err, "reason", None) or err
    return f"{type(reason).__name__}: {first_line(reason)}"
