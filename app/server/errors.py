"""OpenAI-style errors: an HTTP status and a body ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API refuses.

    Attributes:
        status: the HTTP status (400 bad request, 401 wrong key, 404, 503 busy or no model).
        message: what is wrong and what to do, for the client's person.
        type: OpenAI's error type (``invalid_request_error``, ``authentication_error``, ``server_error``).
        param: the request field at fault, or None.
        code: a short machine-readable code, or None.
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body OpenAI clients parse."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None) -> ApiError:
    """400: the request body is not what the endpoint takes."""
    return ApiError(400, message, "invalid_request_error", param, "invalid_request")
