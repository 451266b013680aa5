"""The HTTP side of ``--model openai:URL`` (docs/vlms.md, "Servers"; docs/reliability.md,
"Model servers that misbehave").

One ``urllib3`` connection pool; every request is a loop of attempts driven here with
``urllib3.util.Retry`` (exponential backoff 0.5 s, 1 s, 2 s … at most 30 s with jitter; a
``Retry-After`` header wins), each attempt timing out after ``timeout`` seconds.
Connection errors, timeouts, 408, 409, 429 and 5xx are retried, and so is a reply that
arrives but cannot be used (``parse`` raises :class:`ReplyError`: not JSON, no text), up
to ``max_retries`` times.

Imported only when urllib3 is installed (``pip install 'vqadiag[openai]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import Any, TypeVar

import orjson
import urllib3
from urllib3.exceptions import HTTPError, InvalidHeader, MaxRetryError
from urllib3.response import BaseHTTPResponse

from vqadiag.errors import first_line
from vqadiag.models.adapters.openai_reply import (
    EndpointError,
    ReplyError,
    describe,
    server_message,
)

#: statuses retried with backoff (besides connection errors, timeouts and unusable replies)
RETRIED_STATUS = (408, 409, 429, 500, 502, 503, 504)
#: redirects followed within one attempt
MAX_REDIRECTS = 3
#: what a failed attempt raises (then retried)
TRANSPORT_ERRORS = (HTTPError, OSError, HTTPException)

T = TypeVar("T")


class Transport:
    """JSON requests to one API root, ``in_flight`` at a time, with the retries of the
    module docstring."""

    def __init__(
        self,
        root: str,
        headers: Mapping[str, str],
        *,
        in_flight: int,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.root = root
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self._headers = dict(headers)
        self._retry = urllib3.util.Retry(
            total=self.max_retries,
            backoff_factor=0.5,
            backoff_max=30.0,
            backoff_jitter=0.25,
            status_forcelist=RETRIED_STATUS,
            allowed_methods=None,  # POST too: a chat completion changes nothing
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        # one attempt: no retries inside urllib3 (errors raised as they are), redirects followed
        self._one_attempt = urllib3.util.Retry(total=False, redirect=MAX_REDIRECTS)
        self._pool = urllib3.PoolManager(
            maxsize=in_flight, block=True, timeout=urllib3.util.Timeout(total=self.timeout)
        )

    def call(self, method: str, path: str, body: Any, parse: Callable[[bytes], T]) -> T:
        """``parse`` of the reply to ``method path`` with the JSON ``body``: retried as the
        module docstring says; :class:`EndpointError` saying why when it fails."""
        url = self.root + path
        data = None if body is None else orjson.dumps(body)
        retry = self._retry
        while True:
            response: BaseHTTPResponse | None = None
            try:
                response, reply = self._attempt(method, url, data)
                if response.status < 400:
                    return parse(reply)
                failure: BaseException = EndpointError(
                    f"HTTP {response.status}: {server_message(reply)}"
                )
                if not retry.is_retry(method, response.status, "Retry-After" in response.headers):
                    raise failure
            except (*TRANSPORT_ERRORS, ReplyError) as err:
                failure, response = err, None
            retry = self._next_try(retry, method, url, failure, response)

    def _next_try(
        self,
        retry: urllib3.util.Retry,
        method: str,
        url: str,
        failure: BaseException,
        response: BaseHTTPResponse | None,
    ) -> urllib3.util.Retry:
        """``retry`` counted down by one failed attempt, after its backoff (or the reply's
        ``Retry-After``); :class:`EndpointError` when no retry is left."""
        try:
            if response is None:
                retry = retry.increment(method, url, error=failure)  # type: ignore[arg-type]
            else:
                retry = retry.increment(method, url, response=response)
            retry.sleep(response)
        except MaxRetryError:
            raise EndpointError(
                f"the server failed after {self.max_retries} retries: {describe(failure)}"
            ) from None
        except InvalidHeader as err:  # a Retry-After that is neither seconds nor a date
            raise EndpointError(f"{describe(failure)}; {first_line(err)}") from None
        except TRANSPORT_ERRORS:  # urllib3 re-raises an error it will not retry
            raise EndpointError(describe(failure)) from None
        return retry

    def _attempt(self, method: str, url: str, data: bytes | None) -> tuple[BaseHTTPResponse, bytes]:
        """One attempt: the response and its body."""
        response = self._pool.request(
            method, url, body=data, headers=self._headers, retries=self._one_attempt
        )
        return response, response.data
