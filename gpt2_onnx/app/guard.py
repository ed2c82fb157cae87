"""The guard in front of the API's routes: the API key on every request but the health probe's, and the size of
the request body, checked before a route reads it (Content-Length first, then the bytes as they arrive)."""

from __future__ import annotations

import hmac

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpt2_onnx.app.openai_schema import ApiError

__all__ = ["OPEN_PATHS", "Guard", "json_error"]

OPEN_PATHS = frozenset({"/health"})  # answered without the API key: a load balancer's probe carries none


def json_error(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


class Guard:
    """ASGI middleware: the API key and the body size limit, before any route runs."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_body_bytes: int) -> None:
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        refusal = self._refusal(scope["path"], headers)
        if refusal is not None:
            await json_error(refusal)(scope, receive, send)
            return
        await self.app(scope, self._limited(receive), send)

    def _refusal(self, path: str, headers: dict[str, str]) -> ApiError | None:
        key = self.api_key
        if key is not None and path not in OPEN_PATHS:
            given = headers.get("authorization", "")
            if not given.lower().startswith("bearer "):
                return ApiError(
                    401, "missing API key: send the header 'Authorization: Bearer KEY'", code="invalid_api_key"
                )
            if not hmac.compare_digest(given[7:].strip().encode(), key.encode()):
                return ApiError(401, "incorrect API key", code="invalid_api_key")
        length = headers.get("content-length", "0")
        if not length.isdigit():
            return ApiError(400, "the Content-Length header is not a number")
        if int(length) > self.max_body_bytes:
            return self._too_large()
        return None

    def _too_large(self) -> ApiError:
        return ApiError(413, f"the request body exceeds {self.max_body_bytes} bytes", code="body_too_large")

    def _limited(self, receive: Receive) -> Receive:
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                raise self._too_large()
            return message

        return limited
