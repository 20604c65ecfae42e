"""LLM_TIMEOUT bounds the whole call to the LLM: a model that sends its answer a byte at a time, each byte
within the timeout, fails the extraction at the timeout (502 in the envelope, nothing written), not when the
last byte arrives."""

import time

from extraction.models import Extraction
from tests.extraction.conftest import fact
from tests.helpers import assert_envelope
from tests.llm_server import Answer
from usermemory.models import MemoryEntry

CHAT = [{"role": "user", "content": "I moved to Lisbon last month.", "id": "m1"}]


def test_a_trickling_llm_fails_the_extraction_at_llm_timeout(llm, agent_a, agent_a_api, settings):
    settings.LLM_TIMEOUT = 1
    # A byte every 0.9 s: each read within the timeout; the whole answer (over 300 bytes) would take minutes.
    llm.answers = [Answer({"facts": [fact("home_city", "Lisbon")]}, trickle=0.9)]
    started = time.monotonic()
    response = agent_a_api.post("/usermemorystore/memories/u1/extract", {"messages": CHAT}, format="json")
    elapsed = time.monotonic() - started

    assert "Timeout" in assert_envelope(response, 502, "upstream_failed")["error"]
    assert len(llm.requests) == 1
    assert elapsed < 0.9 * 300  # it did not wait for the trickle to end
    assert not MemoryEntry.objects.exists()
    assert Extraction.objects.get().status == "failed"
