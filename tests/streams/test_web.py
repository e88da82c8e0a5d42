"""The HTTP views on their own: served over a real aiohttp server from a state held in memory.

No Kafka and no worker: the views see only `WorldReads`, here an in-memory stand-in over the
state a replay of the tavern story built.
"""

from __future__ import annotations

import asyncio
import logging
import re
import statistics
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import faust
import orjson
import pytest
from aiohttp import web as aiohttp_web
from aiohttp.test_utils import TestClient, TestServer
from faust.web import Request, Response, View, Web
from faust.web.drivers.aiohttp import Web as AiohttpWeb
from rocksdict import Rdict, WriteBatch

from benchmarks.story import encoded, tavern_story
from projections.branch_diff import branch_diff
from projections.chronicle import chronicle_read
from projections.delivery import SourceMessage
from projections.digest import world_digest
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.recall import RecallQuery, recall
from projections.runtime_read import runtime_read
from projections.state import MemoryState, StateTransaction
from schemas.memory import ReadModel
from schemas.policy import Policy
from streams import web
from streams.judging import Judge, JudgementLog, MemoryTopic
from streams.logs import UnparsedRequests
from streams.metrics import Metrics
from streams.model_client import ModelClient
from streams.read_cache import ReadCache
from streams.recall_index import SqliteRecallIndex
from streams.replay import Replay, replay_judged, replay_lines
from streams.reranker import Reranker
from streams.show import chronicle_tables, diff_tables
from streams.state import (
    Read,
    RocksTransaction,
    SnapshotReads,
    StateOptions,
    refuse_writes,
    state_options,
)
from streams.tokens import wordllama_tokens
from streams.web import ROUTES, WEB_APPLICATION_OPTIONS, Readiness, WorldRead, register_views
from tests.model_server import MODEL_FEELING, ScriptedModel, serving
from tests.reads import answer, recall_of
from tests.support import samples_of
from tests.tavern import TAVERN, TAVERN_LINES
from tests.tavern_lies import LINES

STATE = replay_lines(TAVERN.splitlines()).state
READ = "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main"
RECALL = READ.replace("npc-mara?", "npc-mara/recall?q=son&")
DECISION = READ.replace("npc-mara?", "npc-mara/decision?after_seq=2&")
CHRONICLE = READ.replace("npc-mara?", "npc-mara/chronicle?")


@dataclass
class MemoryReads:
    """`WorldReads` over one in-memory state, owning every world unless `owner` is set."""

    state: MemoryState
    tenants_by_api_key: Mapping[str, str] = field(default_factory=dict)
    waiting_for: tuple[str, ...] = ()
    stopping: bool = False
    owner: Response | None = None
    worlds_asked: list[str] = field(default_factory=list)
    worlds_searched: list[tuple[str, str]] = field(default_factory=list)
    recall_index: SqliteRecallIndex = field(default_factory=SqliteRecallIndex)
    read_cache: ReadCache = field(default_factory=ReadCache)
    metrics: Metrics = field(default_factory=Metrics)
    policy: Policy = field(default_factory=Policy)
    model: ModelClient | None = None
    reranker: Reranker | None = None

    def policy_of(self, tenant_id: str, world_id: str) -> Policy:
        return self.policy

    def readiness(self) -> Readiness:
        return Readiness(self.waiting_for, rebalances=1, stopping=self.stopping)

    async def read_transaction(self, world_id: str) -> MemoryState:
        return self.state

    async def read_aside(self, world_id: str, read: Callable[[StateTransaction], Read]) -> Read:
        return read(self.state)

    async def owner_answer(
        self, world_id: str, web: Web, request: Request, wait_seconds: float
    ) -> Response | None:
        self.worlds_asked.append(world_id)
        return self.owner

    def searching(self, tenant_id: str, world_id: str) -> None:
        self.worlds_searched.append((tenant_id, world_id))


@dataclass
class RocksReads(MemoryReads):
    """`WorldReads` over a RocksDB database, read as a worker reads its partitions."""

    db: Rdict = field(kw_only=True)
    snapshot_reads: SnapshotReads = field(default_factory=SnapshotReads)

    async def read_transaction(self, world_id: str) -> RocksTransaction:  # type: ignore[override]
        return RocksTransaction(self.db, refuse_writes)

    async def read_aside(self, world_id: str, read: Callable[[StateTransaction], Read]) -> Read:
        return await self.snapshot_reads.read(self.db, read)


def served_client(reads: MemoryReads) -> TestClient[aiohttp_web.Request, aiohttp_web.Application]:
    """A client of the views over `reads`, served as a worker serves them (its options too)."""
    app = faust.App("web-test", autodiscover=False, web_application_options=WEB_APPLICATION_OPTIONS)
    register_views(app, reads)
    return TestClient(TestServer(cast(AiohttpWeb, app.web).web_app))


def serve(reads: MemoryReads, *requests: tuple[str, dict[str, str]]) -> list[tuple[int, Any]]:
    """Each (path, headers) answered by the views over `reads`: (status, JSON body, or the
    text of a body that is not JSON)."""
    return [(status, body) for status, body, _ in exchange(reads, *requests)]


def exchange(
    reads: MemoryReads, *requests: tuple[str, dict[str, str]]
) -> list[tuple[int, Any, dict[str, str]]]:
    """`serve`'s answers with the headers of each."""

    async def run() -> list[tuple[int, Any, dict[str, str]]]:
        client = served_client(reads)
        await client.start_server()
        try:
            answers = []
            for path, headers in requests:
                reply = await client.get(path, headers=headers)
                body = await reply.read()
                json = reply.content_type == "application/json"
                decoded = orjson.loads(body) if json else body.decode()
                answers.append((reply.status, decoded, dict(reply.headers)))
            return answers
        finally:
            await client.close()

    return asyncio.run(run())


def json_of(found: object) -> Any:
    return answer(found) if isinstance(found, ReadModel) else orjson.loads(orjson.dumps(found))


README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
DOCUMENTED = re.compile(r"`(GET|POST) (/[^\s?`\[]*)")
"""A route as the README gives it: the method, then the path up to its query."""


def test_every_route_served_is_documented_with_the_method_it_answers() -> None:
    documented = {(method, path) for method, path in DOCUMENTED.findall(README.replace("\n", " "))}
    assert {path for _, path in documented} == set(ROUTES)
    for method, path in documented:
        served = getattr(ROUTES[path], method.lower())
        assert served is not getattr(View, method.lower()), f"{method} {path} is not answered"


def test_the_runtime_read_and_provenance_serve_what_the_projector_computed() -> None:
    mind = runtime_read(STATE, "default", "save-1", "main", "npc-tomas")
    belief = mind.beliefs[0].belief_id
    origin = (
        f"/v2/memory/runtime/npcs/npc-tomas/beliefs/{belief}/provenance"
        "?world_instance_id=save-1&timeline_id=main"
    )
    reads = MemoryReads(STATE)
    answers = serve(reads, (READ.replace("npc-mara", "npc-tomas"), {}), (origin, {}))
    assert answers == [
        (200, json_of(mind)),
        (200, json_of(provenance(STATE, "default", "save-1", "main", "npc-tomas", belief))),
    ]
    assert reads.worlds_asked == ["save-1", "save-1"]


def test_provenance_is_read_as_of_a_position_as_every_read_is() -> None:
    belief = runtime_read(STATE, "default", "save-1", "main", "npc-tomas").beliefs[0]
    origin = (
        f"/v2/memory/runtime/npcs/npc-tomas/beliefs/{belief.belief_id}/provenance"
        "?world_instance_id=save-1&timeline_id=main&as_of_seq="
    )
    answers = serve(
        MemoryReads(STATE),
        *(
            (origin + asked, {})
            for asked in (str(belief.seq), str(belief.seq - 1), "abc", "6", "2&as_of_seq=3")
        ),
    )
    as_of = provenance(
        STATE, "default", "save-1", "main", "npc-tomas", belief.belief_id, belief.seq
    )
    assert answers == [
        (200, json_of(as_of)),
        (404, {"detail": f"'npc-tomas' holds no memory {belief.belief_id!r} on timeline 'main'"}),
        (400, {"detail": "query parameter 'as_of_seq' must be a positive integer"}),
        (400, {"detail": "as_of_seq 6 is beyond the processed_seq 5 of timeline 'main'"}),
        (400, {"detail": "query parameter 'as_of_seq' must be given once"}),
    ]


def test_a_persistent_memory_formed_later_is_not_served_as_of_an_earlier_position() -> None:
    """Mara keeps her memories for the whole world; the locket she is given on the reload at 3
    is not in her mind on main as of 2, so neither its provenance nor its rumour's map is
    served there (both were, 200); as of main's 3 it is hers."""
    policy = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    state = replay_lines(TAVERN.splitlines(), Projector(policies=lambda t, w: policy)).state
    [locket] = [
        belief
        for belief in runtime_read(state, "default", "save-1", "reload", "npc-mara").recollections
        if "item-locket" in belief.content
    ]
    on_main = "world_instance_id=save-1&timeline_id=main&as_of_seq="
    origin = f"/v2/memory/runtime/npcs/npc-mara/beliefs/{locket.belief_id}/provenance?{on_main}"
    drawn = f"/v2/memory/worlds/save-1/rumours/{locket.belief_id}.svg?timeline_id=main&as_of_seq="
    as_of_2 = runtime_read(state, "default", "save-1", "main", "npc-mara", 2)
    assert locket.belief_id not in {belief.belief_id for belief in as_of_2.recollections}
    answers = serve(MemoryReads(state), (origin + "2", {}), (drawn + "2", {}), (origin + "3", {}))
    assert answers[:2] == [
        (404, {"detail": f"'npc-mara' holds no memory {locket.belief_id!r} on timeline 'main'"}),
        (404, {"detail": f"timeline 'main' does not see memory {locket.belief_id!r}"}),
    ]
    assert answers[2][0] == 200


def test_recall_serves_what_the_projector_and_index_find() -> None:
    expected = recall_of(STATE, SqliteRecallIndex(), "son", cues=("npc-drunk-sailor",), limit=5)
    [(status, body)] = serve(MemoryReads(STATE), (RECALL + "&cues=npc-drunk-sailor&limit=5", {}))
    assert (status, body) == (200, expected)
    assert len(body["memories"]) == 2
    [(status, body)] = serve(MemoryReads(STATE), (DECISION, {}))
    assert status == 200
    assert [m["seq"] for m in body["knowledge"]] == [2]
    said = "I will find your son. Where was he last seen?"  # no real time: it never expires
    assert [(t["seq"], t["text"]) for t in body["recent_turns"]] == [(2, said)]


def test_a_recall_cue_holding_a_comma_is_the_entity_it_names_escaped_or_not() -> None:
    """The contract allows an id with a comma: split at each comma, the cue was refused as two
    ids (or cued another entity). A client's form encoding escapes every comma (`%2C`), so
    escaping cannot tell the id's commas from those between ids: the world's entities do."""
    sailor = "npc-drunk,sailor"
    lines = TAVERN.replace(b'"npc-drunk-sailor"', orjson.dumps(sailor)).splitlines()
    state = replay_lines(lines).state

    def cued(*cues: str) -> Any:
        return recall_of(state, SqliteRecallIndex(), "son", cues=cues)

    answers = serve(
        MemoryReads(state),
        (RECALL + "&cues=npc-drunk,sailor", {}),
        (RECALL + "&cues=player-1%2C+npc-drunk%2Csailor", {}),  # as urlencode sends "a, b"
        (RECALL + "&cues=npc-drunk,sailors", {}),
    )
    [alone, beside, (refused, unknown)] = answers
    assert alone == (200, cued(sailor)) and alone[1]["searched"]["cues"] > 0
    assert beside == (200, cued("player-1", sailor))
    assert cued("player-1", sailor) != cued(sailor)
    assert (refused, unknown["detail"]) == (
        400,
        "unknown cue 'npc-drunk': no entity of that id in this world",
    )


def test_a_recall_and_a_decision_note_the_world_they_search_for_its_vectors() -> None:
    """The recall index lives in memory: after a start, only these notes set the embedding of
    a world no event names going; a runtime read searches nothing and notes nothing."""
    reads = MemoryReads(STATE)
    never = RECALL.replace("save-1", "never-created")
    serve(reads, (READ, {}), (RECALL, {}), (DECISION, {}), (never, {}))
    # not a world no event ever named (a typo, a stale save): each one's note was kept for the
    # worker's life
    assert reads.worlds_searched == [("default", "save-1")] * 2


def test_dialogue_answers_both_scopes_and_hides_turns_twelve_hours_old_by_the_wall_clock() -> None:
    now = datetime.now(UTC)

    def line(seq: int, player: str, text: str, hours_ago: float) -> bytes:
        return orjson.dumps(
            {
                "world_instance_id": "w",
                "timeline_id": "main",
                "seq": seq,
                "key": "loreweaver.conversation.player-said",
                "actor": player,
                "target": "npc-mara",
                "players": [player],
                "location": "loc-inn",
                "payload": {"text": text},
                "occurred_at": (now - timedelta(hours=hours_ago)).isoformat(),
            }
        )

    state = replay_lines(
        [
            b'{"world_instance_id":"w","timeline_id":"main","seq":1,'
            b'"key":"loreweaver.movement.location-entered","actor":"npc-mara","location":"loc-inn"}',
            line(2, "p2", "Long ago <:wave:42>", hours_ago=12.5),  # 11.5 h before the next
            line(3, "p1", "[leans in] Just now", hours_ago=1),
        ]
    ).state
    path = "/v2/memory/runtime/npcs/npc-mara/dialogue?world_instance_id=w&timeline_id=main"
    answers = serve(
        MemoryReads(state), (path + "&player_id=p1", {}), (path + "&player_id=p2", {}), (path, {})
    )
    (status, fresh), (_, stale), missing = answers
    assert status == 200
    assert [t["text"] for t in fresh["player"]["turns"]] == ["Just now"]
    assert [t["text"] for t in fresh["place"]["turns"]] == ["Long ago :wave:", "Just now"]
    assert fresh["place"]["location"] == "loc-inn"
    assert stale["player"]["turns"] == [] and stale["player"]["expired"] is True
    assert missing == (400, {"detail": "query parameter 'player_id' is required"})


def test_the_chronicle_rolls_a_long_talk_into_chapters_counted_by_the_real_tokenizer() -> None:
    def line(seq: int) -> bytes:
        words = " ".join(("harbour", "lantern", "debt", "storm") * 10)
        return orjson.dumps(
            {
                "world_instance_id": "saga",
                "timeline_id": "main",
                "seq": seq,
                "key": "loreweaver.conversation.player-said",
                "actor": "p1",
                "target": "npc-mara",
                "players": ["p1"],
                "payload": {"text": f"Tale {seq}: {words}"},
                "game_time": f"day {seq}, 09:00",
            }
        )

    state = replay_lines([line(seq) for seq in range(1, 81)]).state
    path = "/v2/memory/runtime/npcs/npc-mara/chronicle?world_instance_id=saga&timeline_id=main"
    (status, body), (_, earlier) = serve(
        MemoryReads(state), (path, {}), (path + "&as_of_seq=5", {})
    )
    expected = chronicle_read(
        state, "default", "saga", "main", "npc-mara", Policy().memory.chronicle, wordllama_tokens()
    )
    assert (status, body) == (200, json_of(expected))
    assert body["summariser"] == "rules" and body["records"] == 80
    # each digest is 88 tokens ("day 73, 09:00: Tale 73: harbour ..."): 17 make 1496, the
    # 18th passes 1500 and rolls them; a chapter keeps three 76-token statements, a line each
    # (each line break a token: 230, where the statements' counts add up to 228)
    assert [(c["from_seq"], c["to_seq"], c["tokens"]) for c in body["chapters"]] == [
        (1, 18, 230),
        (19, 36, 230),
        (37, 54, 230),
        (55, 72, 230),
    ]
    assert {wordllama_tokens()(c["text"]) for c in body["chapters"]} == {230}
    assert {c["summary"] for c in body["chapters"]} == {True}
    assert [(d["seq"], d["tokens"], d["summary"]) for d in body["digests"]][:2] == [
        (73, 88, False),
        (74, 88, False),
    ]
    assert body["condensed"] is None and body["tokens"] == 4 * 230 + 8 * 88
    assert [d["seq"] for d in earlier["digests"]] == [1, 2, 3, 4, 5]
    printed = chronicle_tables(body)  # what `rumourmill chronicle` prints
    assert "npc-mara on saga/main: 80 records told in" in printed
    assert "chapter 1: summary by the rules of 18 records" in printed
    assert "records, word for word" in printed


def test_the_tokenizer_is_wordllamas_own_loaded_from_the_installed_wheel() -> None:
    count = wordllama_tokens()
    assert count("Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)") == 24
    assert count("") == 0


def test_the_token_counts_kept_do_not_keep_the_texts_counted() -> None:
    """Found in review: the counts were kept by text, so 131,072 texts stayed held whole,
    chronicle summaries of thousands of characters among them."""
    count = wordllama_tokens()
    tracemalloc.start()
    try:
        for number in range(200):
            assert count(f"summary {number}: " + "the harbour burned and " * 400) > 400
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 200 * 9_000 / 10  # each text some 9 KB


def test_timeline_and_digest_reads() -> None:
    (timeline_status, timeline), (digest_status, digest) = serve(
        MemoryReads(STATE),
        ("/v2/timelines/reload?world_instance_id=save-1", {}),
        ("/v2/admin/digest?world_instance_id=save-1", {}),
    )
    assert timeline_status == 200
    assert (timeline["parent_timeline_id"], timeline["after_seq"]) == ("main", 2)
    assert digest_status == 200
    assert digest["digest"] == replay_lines(TAVERN.splitlines()).digests[("default", "save-1")]


LARGE_WORLD_KEYS = 2_500_000
"""Projection entries of a world whose digest takes some 1.5 s here (one of 175,000 memories
took 2 to 2.5 s on 2 shared cores)."""


def test_a_branch_waiting_for_its_branch_point_has_reached_what_its_parent_has() -> None:
    """Branched after seq 3 of a main that has only seq 1: the stored record placed the branch
    at 3, and the route said so (`processed_seq` 3), where its acks and every read say 1."""

    def line(timeline: str, seq: int, **fields: Any) -> bytes:
        event = {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": "x"}
        return orjson.dumps(event | fields)

    branch = {"parent_timeline_id": "main", "after_seq": 3}
    replayed = replay_lines([line("main", 1), line("load", 4, branch=branch)])
    [(status, timeline)] = serve(
        MemoryReads(replayed.state), ("/v2/timelines/load?world_instance_id=w", {})
    )
    assert status == 200
    assert (timeline["after_seq"], timeline["waiting_for_parent"]) == (3, True)
    assert timeline["processed_seq"] == 1


def test_a_digest_of_a_large_world_leaves_the_worker_answering_meanwhile(tmp_path: Path) -> None:
    """The digest reads every key of its world: made on the event loop, every read and event
    of every tenant on the worker waited for it. It reads what the state held when it was
    asked, whatever is written while it runs."""
    db = StateOptions(**state_options(16), use_rocksdict=True).open(tmp_path)
    for start in range(0, LARGE_WORLD_KEYS, 100_000):
        batch = WriteBatch(raw_mode=True)
        for index in range(start, start + 100_000):
            batch.put(pack(MEMORIES, "default", "big", index), b"remembered")
        db.write(batch)
    asked_of = world_digest(RocksTransaction(db, refuse_writes), "default", "big")
    reads = RocksReads(MemoryState(), db=db)

    async def run() -> tuple[float, list[float], Any]:
        client = served_client(reads)
        await client.start_server()
        try:
            asked = time.perf_counter()
            digest = asyncio.ensure_future(client.get("/v2/admin/digest?world_instance_id=big"))
            health_waits = []
            while not digest.done():
                sent = time.perf_counter()
                assert (await client.get("/health")).status == 200
                health_waits.append(time.perf_counter() - sent)
                db.put(pack(MEMORIES, "default", "big", f"later-{len(health_waits)}"), b"new")
            took = time.perf_counter() - asked
            return took, health_waits, await (await digest).json()
        finally:
            await client.close()
            reads.snapshot_reads.stop()

    took, health_waits, answer = asyncio.run(run())
    db.close()
    assert answer["digest"] == asked_of
    # held by the digest, the loop answered twice: once before it, once after it all
    assert len(health_waits) > 10, f"/health answered {len(health_waits)} times in {took:.2f} s"
    assert max(health_waits) < took / 4, f"/health waited {max(health_waits):.2f} s of {took:.2f} s"


LARGE_STORY_EVENTS = 12_000
"""Events of a story whose world's recall index takes a second or so to catch up here (28,000
memories, some 56 slices; one of 175,000 took 11 to 17 s on 2 shared cores)."""


def test_a_recall_that_catches_its_index_up_leaves_the_worker_answering_meanwhile() -> None:
    """The first recall after a start catches the recall index up with the world's whole
    history: caught up at once on the event loop, every read and event of every tenant on the
    worker waited for it. Caught up a slice at a time, the recall answers as it did."""
    state = replay_lines(encoded(tavern_story(LARGE_STORY_EVENTS))).state
    query = RecallQuery("drink shared at The Drowned Rat", limit=20)
    at_once = recall(
        state, SqliteRecallIndex(), "default", "tavern-0", "main", "npc-020", query, Policy()
    ).read()
    asked = (
        "/v2/memory/runtime/npcs/npc-020/recall?world_instance_id=tavern-0&timeline_id=main"
        "&q=drink+shared+at+The+Drowned+Rat&limit=20"
    )

    async def run() -> tuple[float, list[float], Any]:
        client = served_client(MemoryReads(state))
        await client.start_server()
        try:
            started = time.perf_counter()
            recalled = asyncio.ensure_future(client.get(asked))
            health_waits = []
            while not recalled.done():
                sent = time.perf_counter()
                assert (await client.get("/health")).status == 200
                health_waits.append(time.perf_counter() - sent)
            took = time.perf_counter() - started
            answer = await recalled
            assert answer.status == 200
            return took, health_waits, await answer.json()
        finally:
            await client.close()

    took, health_waits, answer = asyncio.run(run())
    assert answer == orjson.loads(at_once.to_json())
    assert len(answer["memories"]) == 20
    # held by the catch up, the loop answered twice: once before it, once after it all; a slice
    # at a time, it answers once in every few slices (each of a request's steps waits for one).
    # The typical wait, not the longest: a shared machine stalls any one of them now and then
    assert len(health_waits) > 5, f"/health answered {len(health_waits)} times in {took:.2f} s"
    typical = statistics.median(health_waits)
    assert typical < took / 8, f"/health waited {typical:.2f} s (median) of {took:.2f} s"


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        (READ.replace("world_instance_id=save-1&", ""), 400, "'world_instance_id' is required"),
        (READ + "&timeline_id=main", 400, "'timeline_id' must be given once"),
        (READ.replace("npc-mara", "n" * 129), 400, "1 to 128 characters"),
        (READ.replace("npc-mara", "npc-%FF"), 400, "the URL is not UTF-8"),
        (READ.replace("save-1", "save-%E9"), 400, "the URL is not UTF-8"),
        (READ.replace("npc-mara", "npc-%C3%A9"), 404, "nothing is known of 'npc-\u00e9'"),
        (READ.replace("main", "nowhere"), 404, "never received events"),
        (
            READ.replace("save-1", "save-2"),
            404,
            "timeline 'main' of world 'save-2' (tenant 'default') has never received events",
        ),
        (READ.replace("npc-mara", "npc-ghost"), 404, "nothing is known"),
        ("/v2/timelines/nowhere?world_instance_id=save-1", 404, "never received events"),
        (READ + "&as_of_seq=0", 400, "'as_of_seq' must be a positive integer"),
        (READ + "&as_of_seq=two", 400, "'as_of_seq' must be a positive integer"),
        (READ + "&as_of_seq=-1", 400, "'as_of_seq' must be a positive integer"),
        (READ + "&as_of_seq=6", 400, "as_of_seq 6 is beyond the processed_seq 5"),
        # a misspelt parameter read the present, or the default tenant's world: refused by name
        (
            READ + "&as_of=1",
            400,
            "query parameter 'as_of' is not taken by this read (it takes as_of_seq, tenant_id,"
            " timeline_id, world_instance_id)",
        ),
        (READ + "&As_Of_Seq=1", 400, "query parameter 'As_Of_Seq' is not taken"),
        (READ + "&tenant=acme", 400, "query parameter 'tenant' is not taken"),
        (DECISION + "&limit=3", 400, "query parameter 'limit' is not taken"),
        ("/v2/timelines/main?world_instance_id=save-1&timeline=main", 400, "'timeline' is not"),
        (RECALL.replace("q=son", "q="), 400, "'q' must not be empty"),
        (RECALL.replace("q=son&", ""), 400, "'q' is required"),
        (RECALL.replace("son", "x" * 1001), 400, "at most 1000 characters"),
        (RECALL + "&cues=npc-nobody", 400, "unknown cue 'npc-nobody'"),
        (
            RECALL + "&cues=" + "," * 20,
            400,
            "'cues' must hold at most 20 pieces between commas",
        ),  # 21 pieces
        (RECALL + "&limit=0", 400, "'limit' must be from 1 to 50"),
        (RECALL + "&limit=51", 400, "'limit' must be from 1 to 50"),
        (RECALL + "&limit=ten", 400, "'limit' must be from 1 to 50"),
        (RECALL + "&limit=" + "9" * 5000, 400, "'limit' must be from 1 to 50"),
        (RECALL + "&limit=" + "0" * 5000, 400, "'limit' must be from 1 to 50"),  # was a 500
        (RECALL + "&as_of_seq=9", 400, "beyond the processed_seq 5"),
        (RECALL.replace("npc-mara", "npc-ghost"), 404, "remembers nothing"),
        (DECISION.replace("after_seq=2&", ""), 400, "'after_seq' is required"),
        (DECISION.replace("after_seq=2", "after_seq=x"), 400, "'after_seq' must be a positive"),
        (DECISION.replace("after_seq=2", "after_seq=5"), 400, "at 5 names no player"),
        (DECISION + "&player_id=player-9", 400, "'player-9' is not a player"),
        (DECISION.replace("after_seq=2", "after_seq=9"), 400, "after_seq 9 is beyond the"),
        (DECISION.replace("npc-mara", "npc-tomas"), 404, "neither by nor to 'npc-tomas'"),
        (CHRONICLE.replace("&timeline_id=main", ""), 400, "'timeline_id' is required"),
        (CHRONICLE + "&as_of_seq=6", 400, "as_of_seq 6 is beyond the processed_seq 5"),
        (CHRONICLE.replace("npc-mara", "npc-ghost"), 404, "holds no memory on timeline 'main'"),
        (
            READ.replace("npc-mara?", "npc-ghost/dialogue?player_id=player-1&"),
            404,
            "nothing is known of 'npc-ghost'",
        ),
    ],
)
def test_a_bad_read_gets_a_plain_detail(path: str, status: int, detail: str) -> None:
    [(got_status, body)] = serve(MemoryReads(STATE), (path, {}))
    assert got_status == status
    assert detail in body["detail"]


def test_api_keys_are_required_and_read_only_their_own_tenant() -> None:
    reads = MemoryReads(STATE, tenants_by_api_key={"key-acme": "default", "key-other": "other"})
    answers = serve(
        reads,
        (READ, {}),
        (READ, {"Authorization": "Bearer not-a-key"}),
        (READ, {"Authorization": "Bearer key-other"}),
        (READ + "&tenant_id=default", {"Authorization": "Bearer key-other"}),
        (READ, {"Authorization": "Bearer key-acme"}),
        (READ + "&tenant_id=", {}),  # no key: a 401 whatever the parameters say
        (READ + "&tenant_id=a&tenant_id=b", {"Authorization": "Bearer not-a-key"}),
        (READ + "&tenant_id=", {"Authorization": "Bearer key-acme"}),
    )
    assert [status for status, _ in answers] == [401, 401, 404, 403, 200, 401, 401, 400]
    assert "(tenant 'other')" in answers[2][1]["detail"], "the key's tenant has no such world"
    assert reads.worlds_asked == ["save-1", "save-1"], "refused requests are never forwarded"
    [(_, _, unauthorised)] = exchange(reads, (READ, {}))
    assert unauthorised["WWW-Authenticate"] == 'Bearer realm="rumourmill"'  # RFC 9110


def test_a_world_owned_elsewhere_gets_the_owners_answer() -> None:
    owners = faust.App("owner", autodiscover=False).web.json({"from": "the owner"}, status=200)
    [answer] = serve(MemoryReads(STATE, owner=owners), (READ, {}))
    assert answer == (200, {"from": "the owner"})


def test_ready_says_what_the_worker_still_waits_for() -> None:
    starting = MemoryReads(STATE, waiting_for=("state recovery", "policies"))
    assert serve(starting, ("/ready", {})) == [
        (503, {"status": "starting", "waiting_for": ["state recovery", "policies"]})
    ]
    [(_, _, headers)] = exchange(starting, ("/ready", {}))
    assert headers["Retry-After"] == "5", "a start passes: the client is told when to ask again"
    [(_, _, headers)] = exchange(MemoryReads(STATE, stopping=True), ("/ready", {}))
    assert "Retry-After" not in headers, "a stopping worker does not come back"
    assert serve(MemoryReads(STATE), ("/ready", {}), ("/health", {})) == [
        (200, {"status": "ready", "rebalances": 1}),
        (200, {"status": "ok"}),
    ]


def test_a_runtime_read_changes_as_soon_as_an_event_moves_what_it_reads() -> None:
    """Reads are cached by position: an event on the timeline, or a persistent memory formed
    on another timeline, must change the next answer (the cache never serves a stale mind)."""
    policy = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    projector = Projector(policies=lambda tenant, world: policy)
    lines = TAVERN.splitlines()
    state = replay_lines(lines, projector).state
    told = {"key": "loreweaver.conversation.told", "actor": "npc-tomas", "target": "npc-mara"}
    later = [
        {"timeline_id": "reload", "seq": 4, "payload": {"content": "The locket is fake"}},
        {"timeline_id": "main", "seq": 6, "payload": {"content": "The cellar is flooded"}},
    ]

    async def run() -> list[tuple[Any, Any]]:
        client = served_client(MemoryReads(state))
        await client.start_server()
        try:
            answers = []
            for offset, fields in enumerate([None, *later], start=len(lines)):
                if fields is not None:
                    event = {"world_instance_id": "save-1", **told, **fields}
                    raw = orjson.dumps(event)
                    projector.receive(state, SourceMessage("replay", 0, offset, b"save-1", raw))
                for _ in range(2):
                    reply = await client.get(READ)
                    assert reply.status == 200
                    fresh = runtime_read(state, "default", "save-1", "main", "npc-mara")
                    answers.append((orjson.loads(await reply.read()), answer(fresh)))
            return answers
        finally:
            await client.close()

    answers = asyncio.run(run())
    assert all(served == fresh for served, fresh in answers)
    minds = [served for served, _ in answers[::2]]
    contents = [{belief["content"] for belief in mind["beliefs"]} for mind in minds]
    assert "The locket is fake" not in str(contents[0])
    assert "The locket is fake" in str(contents[1])  # formed on the reload, persistent: seen here
    assert minds[2]["processed_seq"] == 6 and "The cellar is flooded" in str(contents[2])


def test_metrics_count_each_read_by_endpoint_in_the_prometheus_format() -> None:
    reads = MemoryReads(STATE)
    missing = READ.replace("&timeline_id=main", "")
    *answers, (status, text) = serve(
        reads, (READ, {}), (READ, {}), (missing, {}), (RECALL, {}), ("/metrics", {})
    )
    assert [status for status, _ in answers] == [200, 200, 400, 200]
    assert status == 200
    counts = {
        dict(labels)["endpoint"]: value
        for (name, labels), value in samples_of(text).items()
        if name == "rumourmill_read_seconds_count"
    }
    assert counts == {
        "/v2/memory/runtime/npcs/{npc_id}": 3,
        "/v2/memory/runtime/npcs/{npc_id}/recall": 1,
    }


def test_the_branch_diff_serves_both_ways_and_refuses_unknown_timelines_and_missing_params() -> (
    None
):
    diff = "/v2/memory/runtime/npcs/npc-mara/diff?world_instance_id=save-1"
    answers = serve(
        MemoryReads(STATE),
        (diff + "&timeline_id=main&other_timeline_id=reload", {}),
        (diff + "&timeline_id=main&other_timeline_id=nowhere", {}),
        (diff + "&timeline_id=main", {}),
        (diff + "&other_timeline_id=reload", {}),
        (diff + "&timeline_id=main&other_timeline_id=reload&as_of_seq=2", {}),
        (diff + "&timeline_id=main&other_timeline_id=reload&as_of_seq=two", {}),
    )
    as_of_2 = branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload", 2)
    assert answers == [
        (200, json_of(branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload"))),
        (
            404,
            {
                "detail": "timeline 'nowhere' of world 'save-1' (tenant 'default') "
                "has never received events"
            },
        ),
        (400, {"detail": "query parameter 'other_timeline_id' is required"}),
        (400, {"detail": "query parameter 'timeline_id' is required"}),
        (200, json_of(as_of_2)),
        (400, {"detail": "query parameter 'as_of_seq' must be a positive integer"}),
    ]
    assert [m["content"] for m in answers[0][1]["only_on_other"]] == [
        "player-1 gift given Mara (item: item-locket)",
        "I feel warmly about player-1",
    ]
    printed = diff_tables(answers[0][1])  # what `rumourmill diff` prints
    only_on_main, only_on_reload = printed.split("on reload, not on main", 1)
    assert "on main, not on reload" in only_on_main
    assert "Ilse enemy defeated at The Crooked Lantern" in only_on_main
    assert "player-1 gift given Mara" in only_on_reload.split("words on main")[0]
    assert "(1 memories held on both)" in printed


LIES = replay_lines(LINES).state
REPLY_CHECK = (
    "/v2/memory/runtime/npcs/npc-mara/reply-check?world_instance_id=save-1&timeline_id=main"
    "&after_seq=7"
)


def test_a_read_made_only_as_the_state_stands_refuses_as_of_seq_by_name() -> None:
    """The timeline, the digest, the decision and the reply check read no earlier state (the
    decision and its check read as of `after_seq`): asked `as_of_seq`, each says so, where it
    answered the present to a client asking for the past."""
    now = "is not taken by this read: it answers as the state stands now"
    at_the_event = "is not taken by this read: it reads as of 'after_seq', the event answered"
    answers = serve(
        MemoryReads(STATE),
        ("/v2/timelines/reload?world_instance_id=save-1&as_of_seq=1", {}),
        ("/v2/admin/digest?world_instance_id=save-1&as_of_seq=1", {}),
        (DECISION + "&as_of_seq=1", {}),
        (DECISION + "&as_of_seq=", {}),
    )
    replied = post(MemoryReads(LIES), REPLY_CHECK + "&as_of_seq=3", b'{"text": "Hi"}')
    assert [*answers, replied] == [
        (400, {"detail": f"query parameter 'as_of_seq' {now}"}),
        (400, {"detail": f"query parameter 'as_of_seq' {now}"}),
        (400, {"detail": f"query parameter 'as_of_seq' {at_the_event}"}),
        (400, {"detail": f"query parameter 'as_of_seq' {at_the_event}"}),
        (400, {"detail": f"query parameter 'as_of_seq' {at_the_event}"}),
    ]


def post(reads: MemoryReads, path: str, body: bytes) -> tuple[int, Any]:
    """A POST answered by the views over `reads`: (status, JSON body)."""

    async def run() -> tuple[int, Any]:
        client = served_client(reads)
        await client.start_server()
        try:
            reply = await client.post(path, data=body)
            return reply.status, orjson.loads(await reply.read())
        finally:
            await client.close()
            if reads.model is not None:
                await reads.model.close()  # its session lives in this event loop

    return asyncio.run(run())


def check(
    text: str, policy: Policy | None = None, model: ModelClient | None = None
) -> tuple[int, Any]:
    reads = MemoryReads(LIES, policy=policy or Policy(), model=model)
    return post(reads, REPLY_CHECK, orjson.dumps({"text": text}))


def test_a_reply_naming_someone_nobody_gave_the_decision_is_flagged() -> None:
    assert check("Rook swore the sailor lives. Ask Bertram at the harbour.") == (
        200,
        {"inventions": [{"name": "Bertram", "kind": "name"}], "action": "flag"},
    )


def test_a_reply_naming_only_what_the_decision_was_given_passes() -> None:
    reply = "Ilse, Rook told me the sailor was alive. Not at the Crooked Lantern, though."
    assert check(reply) == (200, {"inventions": [], "action": "allow"})


def test_a_reply_naming_the_place_its_character_is_at_passes_when_the_line_names_none() -> None:
    """A player's line without `location` is answered where the character is: the decision is
    made about that place, and the check took its name for an invention."""
    inn = {"npc-mara": {"name": "Mara"}, "loc-inn": {"name": "Golden Goose", "kind": "place"}}

    def line(seq: int, key: str, **fields: Any) -> bytes:
        event = {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": key}
        return orjson.dumps(event | fields)

    state = replay_lines(
        [
            line(1, "loreweaver.movement.location-entered", actor="npc-mara", location="loc-inn"),
            line(2, "world.entity-declared", entities=inn),
            line(
                3,
                "loreweaver.conversation.player-said",
                actor="player-1",
                target="npc-mara",
                players=["player-1"],
                payload={"text": "Good morning!"},
            ),
        ]
    ).state
    path = "/v2/memory/runtime/npcs/npc-mara/reply-check?world_instance_id=w&timeline_id=main"
    reply = b'{"text": "Good morning. Welcome to the Golden Goose, stranger."}'
    assert post(MemoryReads(state), path + "&after_seq=3", reply) == (
        200,
        {"inventions": [], "action": "allow"},
    )


def _asked_in_no_turn() -> MemoryState:
    """Ilse keeps no turns (`privacy: "full"`), and a dozen attacks on Mara are more important
    than her question at 14 ("Have you seen Bertram Vell?"): its memory is not among the ten
    the decision knows."""
    declared = {"npc-mara": {"name": "Mara"}, "player-1": {"name": "Ilse", "privacy": "full"}}

    def line(seq: int, key: str, **fields: Any) -> bytes:
        event = {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": key}
        return orjson.dumps(event | {"location": "loc-inn"} | fields)

    attacks = [
        line(seq, "combat.attacked", actor="player-1", target="npc-mara", players=["player-1"])
        for seq in range(2, 14)
    ]
    asked = line(
        14,
        "loreweaver.conversation.player-said",
        actor="player-1",
        target="npc-mara",
        players=["player-1"],
        payload={"text": "Have you seen Bertram Vell?"},
    )
    entered = line(1, "loreweaver.movement.location-entered", actor="npc-mara", entities=declared)
    return replay_lines([entered, *attacks, asked]).state


ASKED_IN_NO_TURN = (
    "/v2/memory/runtime/npcs/npc-mara/{}?world_instance_id=w&timeline_id=main&after_seq=14"
)


def test_a_reply_may_name_what_the_line_it_answers_said_though_the_line_is_in_no_turn() -> None:
    """The name Ilse asked about was flagged in Mara's answer, as if nobody had given it."""
    reads = MemoryReads(_asked_in_no_turn())
    path = ASKED_IN_NO_TURN
    [(status, decided)] = serve(reads, (path.format("decision"), {}))
    assert status == 200 and decided["recent_turns"] == []
    assert not any("Bertram" in memory["content"] for memory in decided["knowledge"])
    reply = b'{"text": "No, I have not seen Bertram Vell."}'
    assert post(reads, path.format("reply-check"), reply) == (
        200,
        {"inventions": [], "action": "allow"},
    )


def test_the_policy_decides_what_an_invention_gets() -> None:
    reply = "Old Bertram knows, and Captain Vell."  # a title is no part of a name
    rejecting = resolve(None, {"memory": {"invention": "reject"}})
    allowing = resolve(None, {"memory": {"invention": "allow"}})
    names = [{"name": "Bertram", "kind": "name"}, {"name": "Vell", "kind": "name"}]
    assert check(reply, rejecting) == (200, {"inventions": names, "action": "reject"})
    assert check(reply, allowing) == (200, {"inventions": names, "action": "allow"})


MODEL_WEIGHING = resolve(None, {"memory": {"weighing": "model"}})


def test_with_a_model_the_check_also_catches_an_unnamed_new_relation(
    model_server: ScriptedModel,
) -> None:
    """In model mode (section 12); in rules mode the check is the rules' (seed 001: a rules
    decision's one model call is the referee's), and the model was asked all the same."""
    reply = "Ask her brother at the harbour, or Bertram."
    names = [{"name": "Bertram", "kind": "name"}]

    def model() -> ModelClient:
        return ModelClient(model_server.url, "scripted")

    assert check(reply, Policy(), model()) == (200, {"inventions": names, "action": "flag"})
    assert model_server.requests == []
    assert check(reply, MODEL_WEIGHING, model()) == (
        200,
        {"inventions": [*names, {"name": "her brother", "kind": "relation"}], "action": "flag"},
    )
    (asked,) = model_server.requests
    assert 'The reply, quoted: "Ask her brother' in asked["messages"][1]["content"]
    model_server.relations = ["her uncle"]  # not what the reply says: never an invention
    assert check("Ask her brother.", MODEL_WEIGHING, model()) == (
        200,
        {"inventions": [], "action": "allow"},
    )
    model_server.relations = ["her brother"]  # said across a line break: said all the same
    broken = {"inventions": [{"name": "her brother", "kind": "relation"}], "action": "flag"}
    assert check("Ask her\n  brother.", MODEL_WEIGHING, model()) == (200, broken)
    # inside other words ("another brother") it is not said
    assert check("Ask another brother.", MODEL_WEIGHING, model()) == (
        200,
        {"inventions": [], "action": "allow"},
    )
    model_server.behaviour = "error"  # without the model's answer, the rules' check stands
    assert check(reply, MODEL_WEIGHING, model()) == (200, {"inventions": names, "action": "flag"})


def test_the_model_checking_a_reply_is_given_the_line_it_answers_though_it_is_in_no_turn(
    model_server: ScriptedModel,
) -> None:
    """Asked of what the knowledge and the turns gave alone, a model could take "your friend
    Bertram Vell" for a relation nobody gave: the line that gave it was left out."""
    reads = MemoryReads(
        _asked_in_no_turn(), policy=MODEL_WEIGHING, model=ModelClient(model_server.url, "scripted")
    )
    model_server.relations = []
    reply = b'{"text": "Your friend Bertram Vell left at dawn."}'
    assert post(reads, ASKED_IN_NO_TURN.format("reply-check"), reply)[0] == 200
    (asked,) = model_server.requests
    given = asked["messages"][1]["content"].split("The reply:")[0]
    assert "- Have you seen Bertram Vell?" in given.splitlines()


def test_a_model_that_hangs_holds_one_reply_check_its_deadline_not_every_one() -> None:
    """A hanging model: the first reply check waits its deadline (0.5 s) for the rules' check,
    and the model rests for the checks as impatient, which answer at once without asking it
    (each waited the whole deadline and asked it again, for as long as it hung); the events,
    which one tenant's reads must not leave to the rules, still ask it. A deadline an event's
    questions ran into rests it for the checks as well."""
    policy = resolve(None, {"memory": {"weighing": "model", "model": {"deadline_ms": 500}}})
    asked: list[str] = []

    async def hanging(request: aiohttp_web.Request) -> aiohttp_web.Response:
        asked.append((await request.json())["messages"][0]["content"])
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    async def checks(event_cut: bool, count: int) -> tuple[list[float], str | None, int]:
        """Seconds each of `count` checks took, why an event of the same deadline would not
        ask, and how often the model was asked (a check not asking waits for nothing);
        `event_cut`: an event's questions (of a longer deadline) ran out of time first."""
        asked.clear()
        async with serving(hanging) as url:
            client = ModelClient(url, "m")
            if event_cut:
                client.out_of_time(2000, "an event's questions ran out of time")
            http = served_client(MemoryReads(LIES, model=client, policy=policy))
            await http.start_server()
            took = []
            try:
                for _ in range(count):
                    began = time.monotonic()
                    reply = await http.post(REPLY_CHECK, data=b'{"text": "Ask Bertram."}')
                    assert reply.status == 200
                    took.append(time.monotonic() - began)
                return took, client.rests_for(500), len(asked)
            finally:
                await http.close()
                await client.close()

    took, event_refused, asked_times = asyncio.run(checks(event_cut=False, count=3))
    assert took[0] >= 0.5
    assert asked_times == 1, "every check asked the hanging model and waited its deadline"
    assert event_refused is None, "a reply check rested the model for the events' questions"
    took, event_refused, asked_times = asyncio.run(checks(event_cut=True, count=1))
    assert asked_times == 0
    assert event_refused == (
        "not asked: the model gave no answer within 2000 ms lately and rests 30 s"
    )


def test_one_tenants_reply_checks_leave_the_model_to_every_tenants_events() -> None:
    """Reply checks of tenant `default` that the model leaves hanging, eight at once, while an
    event of tenant `b` asks the same model for its feelings: reads hold one of its two slots
    at most and the rest are checked by the rules at once, so `b`'s four feelings are the
    model's. Queued for the slots as the events' questions were, the reads held both, every
    question of `b` ran into its deadline (1 s), and the rules' feelings became `b`'s state
    for good, the model rested for every world."""
    event_of_b = [orjson.dumps({**orjson.loads(line), "tenant_id": "b"}) for line in TAVERN_LINES]
    model_policy = resolve(None, {"memory": {"weighing": "model", "model": {"deadline_ms": 1000}}})
    checking = asyncio.Event()
    checks_asked: list[dict[str, Any]] = []

    async def model(request: aiohttp_web.Request) -> aiohttp_web.Response:
        body = await request.json()
        if '"relations"' in body["messages"][0]["content"]:
            checks_asked.append(body)
            checking.set()
            await asyncio.Event().wait()  # a reply check's question: never answered
        return aiohttp_web.json_response(
            {"choices": [{"message": {"content": ScriptedModel().answer(body)}}]}
        )

    async def run() -> tuple[list[int], Replay]:
        async with serving(model) as url:
            client = ModelClient(url, "scripted", concurrency=2)
            http = served_client(MemoryReads(LIES, model=client, policy=MODEL_WEIGHING))
            await http.start_server()
            try:
                checks = [
                    asyncio.ensure_future(http.post(REPLY_CHECK, data=b'{"text": "Ask Bertram."}'))
                    for _ in range(8)
                ]
                await asyncio.wait_for(checking.wait(), 10)
                topic = MemoryTopic()
                judged = await replay_judged(
                    event_of_b,
                    Projector(policies=lambda tenant, world: model_policy),
                    Judge(client, JudgementLog(topic.read, topic.send)),
                )
                return [(await check).status for check in checks], judged
            finally:
                await http.close()
                await client.close()

    statuses, judged = asyncio.run(run())
    assert statuses == [200] * 8  # each by the rules: the model answered none of them
    assert len(checks_asked) == 1, "the other checks did not wait in line for a slot"
    refused = [ack.refused_judgements for ack in judged.refusals]
    assert refused == [], "b's feelings were judged by the rules, not the model"
    mara = runtime_read(judged.state, "b", "save-1", "main", "npc-mara")
    assert {belief.feeling for belief in mara.beliefs} == {MODEL_FEELING}


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (REPLY_CHECK, b'{"text": "   "}', "'text' must not be empty"),
        (REPLY_CHECK, orjson.dumps({"text": "a" * 10_001}), "at most 10000 characters"),
        (REPLY_CHECK, b'{"reply": "Hello"}', "'text' must be a string"),
        (REPLY_CHECK, b'{"text": "Hi", "npc": 1}', "nothing else, not 'npc'"),
        (REPLY_CHECK, b"Hello", "the body must be JSON"),
        (REPLY_CHECK.replace("after_seq=7", "after_seq=99"), b'{"text": "Hi"}', "beyond"),
        (REPLY_CHECK.replace("&after_seq=7", ""), b'{"text": "Hi"}', "'after_seq' is required"),
    ],
)
def test_a_reply_check_that_cannot_be_made_is_refused_plainly(
    path: str, body: bytes, detail: str
) -> None:
    status, answered = post(MemoryReads(LIES), path, body)
    assert status == 400
    assert detail in answered["detail"]


def test_a_reply_check_asked_with_get_is_told_to_post() -> None:
    [(status, body)] = serve(MemoryReads(LIES), (REPLY_CHECK, {}))
    assert (status, body["detail"]) == (400, 'post the reply as a JSON body {"text": REPLY}')


def test_an_unknown_route_or_method_is_refused_in_json_as_every_other_answer() -> None:
    """A client parses every refusal the same way: aiohttp's own (404, 405, 413) were plain text."""
    [(status, body)] = serve(MemoryReads(STATE), ("/v2/memory/nowhere", {}))
    assert (status, body) == (404, {"detail": "no route '/v2/memory/nowhere'"})
    refused = post(MemoryReads(STATE), READ, b"")
    assert refused == (405, {"detail": "POST is not answered here; GET,HEAD is"})
    status, body = post(MemoryReads(LIES), REPLY_CHECK, b"x" * (2 * 1024 * 1024))
    assert (status, body) == (413, {"detail": "Maximum request body size 1048576 exceeded."})


def test_a_limit_with_leading_zeros_is_its_number_as_a_position_is() -> None:
    answers = serve(MemoryReads(STATE), (RECALL + "&limit=1", {}), (RECALL + "&limit=001", {}))
    assert answers[0] == answers[1]
    assert answers[0][0] == 200


def test_a_body_its_content_encoding_does_not_decode_is_a_plain_400_and_ends_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The answer says the connection closes: aiohttp reads such a body again after answering
    and cut the connection, so the client's next request on it failed (a read ignoring its body
    too); and what it logged, an unhandled exception with its traceback, is one INFO line."""
    garbled = {"Content-Encoding": "gzip"}

    async def run() -> list[tuple[int, str | None, Any]]:
        client = served_client(MemoryReads(LIES))
        await client.start_server()
        answers = []
        try:
            for method, path, body, headers in [
                ("POST", REPLY_CHECK, b"not gzip", garbled),
                ("POST", REPLY_CHECK, b'{"text": "Zorro did it"}', {}),
                ("GET", READ, b"not gzip", garbled),
                ("GET", READ, None, {}),
            ]:
                reply = await client.request(method, path, data=body, headers=headers)
                answers.append(
                    (
                        reply.status,
                        reply.headers.get("Connection"),
                        orjson.loads(await reply.read()),
                    )
                )
        finally:
            await client.close()
        return answers

    with caplog.at_level(logging.ERROR, logger="aiohttp"):
        answers = asyncio.run(run())
    [(refused, closed, body), checked, (ignored, closed_too, _), read] = answers
    assert (refused, closed, closed_too) == (400, "close", "close")
    assert body["detail"].startswith("the body cannot be read: ")
    assert "\n" not in body["detail"]
    assert [checked[0], ignored, read[0]] == [200, 200, 200]
    logged = [record for record in caplog.records if record.name.startswith("aiohttp")]
    for record in logged:
        UnparsedRequests().filter(record)  # as the worker's log handler does
    assert {(record.levelname, record.getMessage(), record.exc_info) for record in logged} == {
        (
            "INFO",
            "closed a connection whose request body did not decode: ContentEncodingError",
            None,
        )
    }


PATIENCE_SECONDS = 10.0
"""How long a test waits for an answer the views give in milliseconds."""


@pytest.mark.parametrize(
    ("path", "key", "status"),
    [(REPLY_CHECK, "", 401), (REPLY_CHECK + "&tenant_id=default", "Bearer key-other", 403)],
)
def test_a_reply_check_without_its_key_is_refused_before_its_body_is_read(
    path: str, key: str, status: int
) -> None:
    """With keys set, a client without one (or with another tenant's) is refused once it has
    sent its headers: the body was read first, so the worker took in up to 1 MB for each
    refusal, and a body that never came to its end held the request open unanswered."""
    reads = MemoryReads(LIES, tenants_by_api_key={"key-acme": "default", "key-other": "other"})

    async def status_line() -> bytes:
        client = served_client(reads)
        await client.start_server()
        try:
            reader, writer = await asyncio.open_connection(client.host, client.port)
            authorization = f"Authorization: {key}\r\n" if key else ""
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: rumourmill\r\nContent-Type: application/json\r\n"
                f"Content-Length: {1024 * 1024}\r\n{authorization}\r\n".encode()
                + b'{"text": "'
            )  # and no more of the megabyte announced
            await writer.drain()
            try:
                async with asyncio.timeout(PATIENCE_SECONDS):
                    return await reader.readline()
            finally:
                writer.close()
        finally:
            await client.close()

    try:
        answered = asyncio.run(status_line())
    except TimeoutError:
        pytest.fail(f"no answer in {PATIENCE_SECONDS} s: the worker waits for the body")
    assert answered.startswith(f"HTTP/1.1 {status} ".encode()), answered
    assert reads.worlds_asked == []


def test_a_query_of_the_longest_length_in_any_script_is_read() -> None:
    """1,000 characters of Chinese are 9 KB percent-encoded: over aiohttp's default request
    line (8,190 bytes), which refused them in plain text."""
    [(status, body)] = serve(MemoryReads(STATE), (RECALL.replace("son", "猫" * 1000), {}))
    assert status == 200, body


@dataclass
class BrokenReads(MemoryReads):
    """`WorldReads` whose state cannot be read: a bug, or a disk gone bad."""

    async def read_transaction(self, world_id: str) -> MemoryState:
        raise OSError(f"IO error: {Path(__file__).parent}/state/000042.sst: corrupted")


@pytest.mark.parametrize("debugging", [False, True])
def test_a_read_that_fails_unexpectedly_is_a_json_500_that_shows_nothing_of_the_worker(
    debugging: bool,
) -> None:
    """aiohttp answered in plain text, and with the loop in debug mode (`PYTHONASYNCIODEBUG=1`)
    sent the client the traceback: the worker's files, the error's text."""

    async def run() -> tuple[int, str, bytes]:
        client = served_client(BrokenReads(STATE))
        await client.start_server()
        try:
            reply = await client.get(READ)
            return reply.status, reply.content_type, await reply.read()
        finally:
            await client.close()

    status, content_type, body = asyncio.run(run(), debug=debugging)
    assert (status, content_type) == (500, "application/json")
    assert orjson.loads(body) == {"detail": "the request failed on the worker; its log says why"}


WORLD_ROUTES = [path for path, view in ROUTES.items() if issubclass(view, WorldRead)]


@pytest.mark.parametrize("route", WORLD_ROUTES)
def test_every_read_of_a_world_takes_its_tenant_from_the_key_alone(route: str) -> None:
    """Whatever it reads, no route lets a key read another tenant's worlds, nor any without
    a key: the tenant is checked before the parameters, and before any forward."""
    reads = MemoryReads(STATE, tenants_by_api_key={"key-acme": "default", "key-other": "other"})
    path = route.format(npc_id="npc-mara", belief_id="b", timeline_id="main", world="save-1")
    given = {"world_instance_id": "save-1", "timeline_id": "main"}
    taken = cast(type[WorldRead], ROUTES[route]).takes
    path += "?" + "&".join(f"{name}={value}" for name, value in given.items() if name in taken)
    answers = serve(
        reads,
        (path, {}),
        (path, {"Authorization": "Bearer key-acme"}),
        (path + "&tenant_id=default", {"Authorization": "Bearer key-other"}),
    )
    assert [status for status, _ in answers[::2]] == [401, 403]
    assert answers[1][0] not in (401, 403)
    assert reads.worlds_asked == ["save-1"], "only the keyed request of its tenant went on"


async def half_sent(sent: bytes, patience: float) -> bytes:
    """What a worker's views first answer, within `patience` seconds, to a connection that
    sends `sent` and then nothing more; b"" when the worker closed it unanswered."""
    http = served_client(MemoryReads(LIES))
    await http.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", cast(int, http.port))
        writer.write(sent)
        await writer.drain()
        try:
            async with asyncio.timeout(patience):
                return await reader.read(1 << 16)
        finally:
            writer.close()
    finally:
        await http.close()


def test_a_reply_check_whose_body_stops_coming_is_a_408(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client with a key could start a reply check's body and never end it: the connection
    was held for ever (and a thousand such held every file descriptor)."""
    monkeypatch.setattr(web, "BODY_SECONDS", 0.5)
    head = f"POST {REPLY_CHECK} HTTP/1.1\r\nHost: w\r\nContent-Length: 100\r\n\r\n".encode()
    answer = asyncio.run(half_sent(head + b'{"te', patience=10))
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"the body took over 0.5 s to arrive" in answer
    # closed after it: aiohttp took the next request sent on it for the rest of the body
    assert b"\r\nConnection: close\r\n" in answer


def test_a_connection_that_never_sends_a_whole_request_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half a request line's headers, then nothing: aiohttp waits an hour by default, so no
    key was needed to hold a worker's connections (`IDLE_CONNECTION_SECONDS`, here 0.5 s)."""
    options = WEB_APPLICATION_OPTIONS["handler_args"]
    assert options["keepalive_timeout"] <= 120  # what a worker serves with: minutes, not an hour
    monkeypatch.setitem(options, "keepalive_timeout", 0.5)  # what the test waits
    assert asyncio.run(half_sent(b"GET /health HTTP/1.1\r\nHost: w\r\nX-A", patience=10)) == b""
