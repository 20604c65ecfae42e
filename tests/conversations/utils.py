"""Small REST helpers for the conversation tests."""

from typing import Any

BASE = "/v1/conversations"


def text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"][0]["text"] for m in messages]


def create(client: Any, user_id: str = "user-1", **body: Any) -> str:
    response = client.post(BASE, {"userId": user_id, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def post(client: Any, conversation_id: str, **message: Any) -> Any:
    message.setdefault("sessionId", "session-1")
    message.setdefault("role", "user")
    if isinstance(message.get("content"), str):
        message["content"] = text(message["content"])
    return client.post(f"{BASE}/{conversation_id}/messages", message, format="json")


def say(client: Any, conversation_id: str, content: str, **message: Any) -> dict[str, Any]:
    response = post(client, conversation_id, content=content, **message)
    assert response.status_code == 201, response.content
    return response.json()


def listing(client: Any, conversation_id: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"{BASE}/{conversation_id}/messages", params)
    assert response.status_code == 200, response.content
    return response.json()


def sync(client: Any, conversation_id: str, *contents: str, session_id: str = "session-1") -> Any:
    body = {"sessionId": session_id, "messages": [{"role": "user", "content": text(c)} for c in contents]}
    return client.post(f"{BASE}/{conversation_id}/memory/messages/sync", body, format="json")
