"""Handoffs with the OpenAI Agents SDK: in one ``Runner.run`` agent nova hands off to agent aniza, and each
item is stored in the conversation under the agent that produced it.

    MEMORYPLATFORM_URL=http://localhost:8000 NOVA_KEY=mp_... ANIZA_KEY=mp_... \\
        python clients/python/examples/agents_handoff.py <conversation id>

The two agents are platform agents with keys of their own, both in the conversation's group. The models are
scripted so that the example runs without an LLM: put ``model="gpt-4.1"`` (or any model) in their place.
"""

import asyncio
import os
import sys
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from memoryplatform_client import AsyncMemoryPlatform
from memoryplatform_client.agents import MemoryPlatformSession
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


class Scripted(Model):
    """A model that answers each turn with the next of its scripted outputs."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def reply(text: str) -> ResponseOutputMessage:
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg_1", type="message", role="assistant", status="completed", content=content
    )


def handoff_to(name: str) -> ResponseFunctionToolCall:
    name = f"transfer_to_{name}"  # the SDK's name for the handoff tool
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments="{}", call_id="call_1", id="fc_1"
    )


async def main(url: str, nova_key: str, aniza_key: str, conversation_id: str) -> str:
    set_tracing_disabled(True)
    aniza_agent = Agent(name="aniza", model=Scripted([reply("Aniza: refunds take 30 days.")]))
    nova_agent = Agent(name="nova", model=Scripted([handoff_to("aniza")]), handoffs=[aniza_agent])
    nova_api, aniza_api = AsyncMemoryPlatform(url, nova_key), AsyncMemoryPlatform(url, aniza_key)
    async with nova_api, aniza_api:
        # The SDK's agent names -> each agent's own client; the run starts with the first (or agent=...).
        session = MemoryPlatformSession({"nova": nova_api, "aniza": aniza_api}, conversation_id)
        result = await Runner.run(nova_agent, "How long do refunds take?", session=session)
        print(f"last agent: {result.last_agent.name}; the session continues with {session.agent}")
        return str(result.final_output)


if __name__ == "__main__":
    env = os.environ
    answer = asyncio.run(main(env["MEMORYPLATFORM_URL"], env["NOVA_KEY"], env["ANIZA_KEY"], sys.argv[1]))
    print(answer)
