"""Hostile input end to end: a worker on Apache Kafka fed junk, and its HTTP read fuzzed.

- A batch of hostile messages, then valid events: every message is accounted for (acks and
  dead letters agree with the in-process replay of the same batch) and the valid events after
  the junk are still processed.
- Random paths, query parameters (missing, repeated, unknown, 128/129 characters, odd unicode)
  and junk `Authorization` headers against the read: only 200, 400, 401, 403 or 404, never a
  500, and the worker stays up.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import pytest
from yarl import URL

from streams.replay import replay_lines
from streams.settings import Settings
from tests.streams.noisy_story import story
from tests.support import WorkerProcess, read_topic, send_events, topic_ends, unique_settings

SOAK = os.environ.get("RUMOURMILL_SOAK") == "1"
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3 * 3600 if SOAK else 600)]
KEYS = {"k-good": "default", "k-acme": "acme"}
FIGURES = {"messages": 0, "requests": 0}
ODD = [
    "",
    "x" * 128,
    "x" * 129,
    "é" * 128,
    "é" * 129,
    "🙂",
    "\u202emara",
    "\x00",
    "%00",
    "%",
    "a/b",
    "..",
    "' OR 1=1 --",
    "\ud7ff",
    "\U0010ffff",
    "npc-mara",
    "main",
    "reload",
    "default",
    "acme",
]


@pytest.fixture(scope="module")
def worker(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    tmp = tmp_path_factory.mktemp("fuzz")
    settings = unique_settings(
        kafka_bootstrap, tmp / "data", api_keys=",".join(f"{k}:{t}" for k, t in KEYS.items())
    )
    process = WorkerProcess(settings, tmp / "worker.log").start()
    yield process
    process.stop()


def hostile_batch(rng: random.Random, count: int) -> list[bytes]:
    base = {"world_instance_id": "w-junk", "timeline_id": "main", "seq": 1, "key": "story.told"}
    batch: list[bytes] = []
    for number in range(count):
        roll = number % 8
        if roll == 0:
            batch.append(rng.randbytes(rng.randrange(1, 200)))
        elif roll == 1:
            depth = rng.choice([10, 1000, 50_000])
            batch.append(b"[" * depth + b"]" * depth)
        elif roll == 2:
            seq = rng.choice([0, -1, 2**63, 2**64, "1", 1.5])
            batch.append(json.dumps(base | {"seq": seq}).encode())
        elif roll == 3:
            batch.append(orjson.dumps(base | {"timeline_id": "t" * rng.choice([128, 129])}))
        elif roll == 4:
            batch.append(
                orjson.dumps(base | {"payload": {"blob": "y" * rng.choice([10, 300_000])}})
            )
        elif roll == 5:
            batch.append(orjson.dumps(base | {"actor": rng.choice(ODD) or None, "seq": number + 1}))
        elif roll == 6:
            batch.append(
                json.dumps(base | {"seq": 2**63 - 1 - number, "key": "\ud800"}).encode(
                    "utf-8", errors="surrogatepass"
                )
            )
        else:
            batch.append(orjson.dumps(base | {"seq": number + 1, "unknown": True}))
    return batch


def test_hostile_messages_are_all_accounted_for_and_the_stream_goes_on(
    worker: WorkerProcess,
) -> None:
    settings = worker.settings
    rng = random.Random(11)
    batch = hostile_batch(rng, 400 if SOAK else 120)
    after = [
        orjson.dumps({"world_instance_id": "w-after", "timeline_id": "main", "seq": s, "key": "k"})
        for s in (1, 2, 3)
    ]
    acked_before = topic_ends(settings, settings.topics.acks)  # the module's worker's other acks
    lettered_before = topic_ends(settings, settings.topics.deadletter)
    send_events(settings, [*batch, *after])
    expected = replay_lines([*batch, *after]).outcomes
    total = sum(expected.values())
    acks = read_topic(
        settings, settings.topics.acks, lambda got: len(got) >= total, 120, acked_before
    )
    assert Counter(a["outcome"] for a in acks) == expected
    assert {a["seq"] for a in acks if a["world_instance_id"] == "w-after"} == {1, 2, 3}
    letters = read_topic(
        settings,
        settings.topics.deadletter,
        lambda got: len(got) >= expected["rejected"],
        60,
        lettered_before,
    )
    assert len(letters) == expected["rejected"]
    FIGURES["messages"] += len(batch)


def random_request(rng: random.Random, base: str) -> tuple[URL, dict[str, str]]:
    def odd() -> str:
        return (
            rng.choice(ODD)
            if rng.random() < 0.7
            else "".join(
                chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0xD7FF)]))
                for _ in range(rng.randrange(0, 140))
            )
        )

    route = rng.choice(
        [
            "/v2/memory/runtime/npcs/{a}",
            "/v2/memory/runtime/npcs/{a}/beliefs/{b}/provenance",
            "/v2/timelines/{a}",
            "/v2/admin/digest",
            "/v2/memory/runtime/npcs/",
            "/health",
        ]
    )
    path = route.format(a=quote(odd(), safe=""), b=quote(odd(), safe=""))
    names = ["world_instance_id", "timeline_id", "tenant_id", "npc_id", "x", ""]
    query = [(rng.choice(names), odd()) for _ in range(rng.randrange(0, 5))]
    if rng.random() < 0.5:
        query += [
            ("world_instance_id", rng.choice(["tavern-fuzz", "w-after"])),
            ("timeline_id", "main"),
        ]
    text = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query)
    headers: dict[str, str] = {}
    auth = rng.randrange(6)
    if auth == 1:
        headers["Authorization"] = "Bearer k-good"
    elif auth == 2:
        headers["Authorization"] = rng.choice(
            ["bearer k-acme", "Basic k-good", "Bearer", "Bearer  k-good "]
        )
    elif auth == 3:
        headers["Authorization"] = "Bearer " + "k" * rng.choice([1, 128, 10_000])
    elif auth == 4:
        headers["Authorization"] = quote(odd())
    return URL(f"{base}{path}" + (f"?{text}" if text else ""), encoded=True), headers


async def fuzz_reads(settings: Settings, count: int, seed: int) -> Counter[int]:
    rng = random.Random(seed)
    base = f"http://127.0.0.1:{settings.web_port}"
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        semaphore = asyncio.Semaphore(16)

        async def one(url: URL, headers: dict[str, str]) -> None:
            async with semaphore, session.get(url, headers=headers) as reply:
                body = await reply.read()
                statuses[reply.status] += 1
                if reply.status not in (200, 400, 401, 403, 404):
                    failures.append(f"{reply.status} {url} {headers}: {body[:300]!r}")
                elif reply.status != 200 and reply.content_type == "application/json":
                    detail = orjson.loads(body).get("detail")
                    if not isinstance(detail, str) or not detail:
                        failures.append(f"{reply.status} without a plain detail: {url}")
                elif reply.status != 200:
                    # the web server's own answers: 404 for a path no route matches, 400 for
                    # a request its HTTP parser refuses (a header line over 8190 bytes)
                    statuses[-reply.status] += 1
                    statuses[reply.status] -= 1

        await asyncio.gather(*(one(*random_request(rng, base)) for _ in range(count)))
    assert not failures, "\n".join(failures[:10])
    return statuses


@pytest.fixture(scope="module")
def fuzz_world(worker: WorkerProcess) -> None:
    """A world with a story the worker has taken in, for the reads to find."""
    settings = worker.settings
    lines = [
        line.replace(b"tavern-3-0", b"tavern-fuzz")
        for line in story(worlds=1, events_per_world=60, seed=3)
    ]
    send_events(settings, lines)
    read_topic(
        settings,
        settings.topics.acks,
        lambda got: sum(a["world_instance_id"] == "tavern-fuzz" for a in got) >= len(lines),
        120,
    )


@pytest.mark.usefixtures("fuzz_world")
def test_the_read_never_answers_500(
    worker: WorkerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = worker.settings
    count = 20_000 if SOAK else 3_000
    statuses = asyncio.run(fuzz_reads(settings, count, seed=random.randrange(1000)))
    FIGURES["requests"] += count
    assert worker.process is not None and worker.process.poll() is None, "the worker died"
    health = f"http://127.0.0.1:{settings.web_port}/health"
    with urllib.request.urlopen(health, timeout=10) as reply:
        assert reply.status == 200
    assert statuses[200] > 0 and statuses[400] > 0 and statuses[401] > 0
    shown = {("framework " if code < 0 else "") + str(abs(code)): n for code, n in statuses.items()}
    with capsys.disabled():
        print(
            f"\n[fuzz e2e] hostile messages through Kafka: {FIGURES['messages']}, HTTP requests: "
            f"{FIGURES['requests']}, statuses: {dict(sorted(shown.items()))}"
        )


@pytest.mark.usefixtures("fuzz_world")
def test_a_good_key_reads_a_mind(worker: WorkerProcess) -> None:
    settings = worker.settings
    url = (
        f"http://127.0.0.1:{settings.web_port}/v2/memory/runtime/npcs/npc-mara"
        "?world_instance_id=tavern-fuzz&timeline_id=main"
    )
    request = urllib.request.Request(url, headers={"Authorization": "Bearer k-good"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        mind: dict[str, Any] = json.loads(reply.read())
    assert mind["processed_seq"] > 0 and (mind["beliefs"] or mind["recollections"]), mind
