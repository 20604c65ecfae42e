"""Deterministic synthetic user memories: words, long-tail user sizes, keys, values and visibility.

Everything is drawn from one seeded ``random.Random``, so a load with the same arguments gives the same data
(the platform's tables and the LangGraph peer's ``store`` table hold the same memories).
"""

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CATEGORIES = ("preference", "fact", "context")
TOPICS = ("pref", "fact", "home", "work", "diet", "travel", "health", "family", "tech", "music", "sport")
CONSONANTS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"
GROUPS_PER_AGENT = 2
BENCH_AGENT = "agent-00"
NOW = datetime(2026, 1, 1, tzinfo=UTC)  # fixed, so reloads are identical; runs write after it


def agent_ids(n_agents: int) -> list[str]:
    return [f"agent-{i:02d}" for i in range(n_agents)]


def group_ids(n_agents: int) -> list[str]:
    return [f"team-{i:02d}" for i in range(max(2, n_agents // 5))]


def agent_groups(n_agents: int) -> dict[str, list[str]]:
    """Each agent is in two groups; each group has about ten agents."""
    groups = group_ids(n_agents)
    out = {}
    for i, agent in enumerate(agent_ids(n_agents)):
        first, second = groups[i % len(groups)], groups[(i * 3 + 1) % len(groups)]
        out[agent] = sorted({first, second})
    return out


def user_id(i: int) -> str:
    return f"u{i:06d}"


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Pronounceable pseudo-words of 2-4 syllables (3-8 letters), unique."""
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((2, 2, 3, 3, 3, 4))
        words.add("".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables)))
    return sorted(words)


def zipf_weights(n: int, s: float = 1.0) -> list[float]:
    return [1.0 / (rank + 1) ** s for rank in range(n)]


def user_sizes(n_memories: int, n_users: int, rng: random.Random) -> list[int]:
    """A long tail: size(rank) = max(floor, top * rank^-a), scaled to sum exactly ``n_memories``.

    At 1M memories / 10k users the top user holds about 5,000 entries and the median user about 70.
    """
    top = max(1.0, min(5000.0, n_memories * 0.005))
    floor = max(1.0, min(10.0, n_memories / n_users / 4))

    def sizes_for(a: float) -> list[float]:
        return [max(floor, top * (rank + 1) ** -a) for rank in range(n_users)]

    lo, hi = 0.0, 4.0
    for _ in range(60):  # bisection on the exponent: the total falls as a grows
        mid = (lo + hi) / 2
        if sum(sizes_for(mid)) > n_memories:
            lo = mid
        else:
            hi = mid
    raw = sizes_for((lo + hi) / 2)
    scale = n_memories / sum(raw)
    exact = [x * scale for x in raw]
    sizes = [int(x) for x in exact]
    remainder = n_memories - sum(sizes)
    by_fraction = sorted(range(n_users), key=lambda i: exact[i] - sizes[i], reverse=True)
    for i in by_fraction[:remainder]:
        sizes[i] += 1
    rng.shuffle(sizes)  # the heaviest user is not u000000
    return sizes


@dataclass(frozen=True)
class Memory:
    id: int
    user_id: str
    key: str
    text: str
    category: str
    visibility: str
    source_agent_id: str | None
    group_ids: list[str]
    source_conversation_id: str | None
    access_count: int
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None

    @property
    def value_json(self) -> str:
        return json.dumps(self.text)


class TextStream:
    """Values of 100-300 characters, cut from one long Zipf-distributed word stream (fast to slice)."""

    def __init__(self, rng: random.Random, words: list[str], length: int = 400_000) -> None:
        self.rng = rng
        self.stream = rng.choices(words, weights=zipf_weights(len(words), 0.9), k=length)

    def value(self) -> str:
        target = self.rng.randint(100, 300)
        start = self.rng.randrange(0, len(self.stream) - 80)
        parts: list[str] = []
        size = -1
        for word in self.stream[start : start + 80]:
            if size + 1 + len(word) > target:
                break
            parts.append(word)
            size += 1 + len(word)
        text = " ".join(parts)
        while len(text) < 100:  # rare: a run of long words; pad with short ones
            text += " " + self.rng.choice(self.stream[:1000])
        return text[:300]


def memories(*, n_memories: int, n_users: int, n_agents: int, seed: int = 20260101) -> Iterator[Memory]:
    """The data set, one memory at a time, ids 1..n_memories; keys are unique per user."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    texts = TextStream(rng, words)
    sizes = user_sizes(n_memories, n_users, rng)
    agents = agent_ids(n_agents)
    memberships = agent_groups(n_agents)
    year = 365 * 86400
    next_id = 1
    for u, size in enumerate(sizes):
        uid = user_id(u)
        for i in range(size):
            roll = rng.random()
            agent: str = rng.choice(agents)
            owner: str | None = agent
            groups: list[str] = []
            if roll < 0.6:
                visibility = "self"
            elif roll < 0.8:
                visibility = "group"
                mine = memberships[agent]
                groups = sorted(rng.sample(mine, rng.choice((1, 1, 2))))
            else:
                visibility = "global"
                if rng.random() < 0.1:
                    owner = None
            topic = rng.choice(TOPICS)
            stem = f"{topic}.{rng.choice(words)}_{rng.choice(words)}"[:15]
            key = f"{stem}.{i:04x}"
            created = NOW - timedelta(seconds=rng.randrange(year))
            updated = created + timedelta(seconds=rng.randrange(max(1, int((NOW - created).total_seconds()))))
            accessed = None
            if rng.random() < 0.7:
                accessed = updated + (NOW - updated) * rng.random()
            yield Memory(
                id=next_id,
                user_id=uid,
                key=key,
                text=texts.value(),
                category=rng.choice(CATEGORIES),
                visibility=visibility,
                source_agent_id=owner,
                group_ids=groups,
                source_conversation_id=f"conv-{rng.randrange(10**6):06d}" if rng.random() < 0.3 else None,
                access_count=int(rng.expovariate(0.15)),
                created_at=created,
                updated_at=updated,
                last_accessed_at=accessed,
            )
            next_id += 1


def search_terms(*, seed: int = 20260101) -> tuple[str, str]:
    """(common, rare): a word in roughly 1-3 % of values (per-user search) and one in about 0.1 % (admin)."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    # The stream's Zipf rank r has probability ~ r^-0.9 / H; a 35-word value holds rank r with about
    # 35 * p(r). Pick ranks whose expected share is near the targets, among words of 6+ letters.
    weights = zipf_weights(len(words), 0.9)
    total = sum(weights)

    def near(target: float) -> str:
        candidates = [
            (abs(35 * w / total - target), word)
            for word, w in zip(words, weights, strict=True)
            if len(word) >= 6
        ]
        return min(candidates)[1]

    return near(0.02), near(0.001)
