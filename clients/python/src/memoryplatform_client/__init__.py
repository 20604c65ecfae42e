"""memoryplatform's Python client: :class:`MemoryPlatform` (sync) and :class:`AsyncMemoryPlatform` (asyncio)
with the same methods, typed errors carrying the server's envelope, and retries for idempotent calls.

Framework adapters: :mod:`memoryplatform_client.agents` (OpenAI Agents SDK, extra ``agents``) and
:mod:`memoryplatform_client.langgraph` (LangGraph, extra ``langgraph``).
"""

from memoryplatform_client._async import AsyncMemoryPlatform
from memoryplatform_client._calls import MAX_QUERY_CHARS, memory_input, message_input, text_content
from memoryplatform_client._core import __version__
from memoryplatform_client._sync import MemoryPlatform
from memoryplatform_client.errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BadRequestError,
    CapacityError,
    ConflictError,
    MemoryPlatformError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    QueryTooLongError,
    RateLimitedError,
    ServerError,
    UnavailableError,
)
from memoryplatform_client.webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "MAX_QUERY_CHARS",
    "APIConnectionError",
    "APIError",
    "AsyncMemoryPlatform",
    "AuthenticationError",
    "BadRequestError",
    "CapacityError",
    "ConflictError",
    "MemoryPlatform",
    "MemoryPlatformError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QueryTooLongError",
    "RateLimitedError",
    "ServerError",
    "UnavailableError",
    "WebhookVerificationError",
    "__version__",
    "memory_input",
    "message_input",
    "text_content",
    "verify_webhook",
]
