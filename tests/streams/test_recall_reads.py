"""As-of reads and recall over HTTP from a real worker on Apache Kafka."""

from __future__ import annotations

import time
from urllib.parse import quote

import orjson
import pytest

from projections.memory_store import memory_keys
from projections.recall import RecallQuery, recall
from schemas.policy import Policy
from streams.embedding import WordLlamaEmbedder
from streams.recall_index import SqliteRecallIndex, embed_pending
from streams.replay import replay_lines
from tests.streams.test_runtime_read import (  # noqa: F401
    READ,
    TAVERN,
    get,
    rumourmill,
    tavern_worker,
)
from tests.support import WorkerProcess

pytestmark = pytest.mark.integration

MARA = READ.format(npc="npc-mara", world="save-1", timeline="{timeline}")
RECALL = MARA.replace("npc-mara?", "npc-mara/recall?q={q}&")


def vectors_searched(port: int, within: float = 60) -> int:
    """The vectors a recall of Mara's on main searched, once any are (the embedding agent makes
    them in a task of its own, beside ingest), within `within` seconds."""
    deadline = time.monotonic() + within
    while not (
        vectors := get(port, RECALL.format(timeline="main", q="son"), "key-acme")[1]["searched"][
            "vectors"
        ]
    ):
        assert time.monotonic() < deadline, f"no vectors searched within {within:.0f}s"
        time.sleep(0.2)
    return int(vectors)


def test_as_of_and_recall_serve_what_the_projector_and_index_compute(
    tavern_worker: WorkerProcess,  # noqa: F811
) -> None:
    port = tavern_worker.settings.web_port
    status, before = get(port, MARA.format(timeline="main") + "&as_of_seq=2", "key-acme")
    assert (status, before["processed_seq"], before["recollections"]) == (200, 2, [])
    status, body = get(port, MARA.format(timeline="main") + "&as_of_seq=9", "key-acme")
    assert (status, body["detail"]) == (
        400,
        "as_of_seq 9 is beyond the processed_seq 5 of timeline 'main'",
    )

    expected = replay_lines(TAVERN).state
    embedded = SqliteRecallIndex(WordLlamaEmbedder())
    assert embedded.embedder is not None
    embed_pending(embedded, embedded.embedder, expected, memory_keys(expected, "default", "save-1"))
    vectors_searched(port)
    for timeline in ("main", "reload"):
        path = RECALL.format(timeline=timeline, q=quote("the sailor at the lantern")) + "&limit=5"
        status, body = get(port, path, "key-acme")
        want = recall(
            expected,
            embedded,
            "default",
            "save-1",
            timeline,
            "npc-mara",
            RecallQuery("the sailor at the lantern", (), 5),
            Policy(),
        ).read()
        assert status == 200
        assert body["memories"] == orjson.loads(want.to_json())["memories"]
    on_main = get(port, RECALL.format(timeline="main", q="sailor"), "key-acme")[1]
    on_reload = get(port, RECALL.format(timeline="reload", q="sailor"), "key-acme")[1]
    assert [m["seq"] for m in on_main["memories"]] == [3]
    assert on_reload["memories"] == []  # the reload never finds its parent's future
    status, body = get(port, RECALL.format(timeline="main", q="son") + "&cues=nobody", "key-acme")
    assert (status, body) == (
        400,
        {"detail": "unknown cue 'nobody': no entity of that id in this world"},
    )


def test_after_a_restart_a_quiet_worlds_recall_searches_by_meaning_again(
    tavern_worker: WorkerProcess,  # noqa: F811
) -> None:
    """Found by a reviewer: the recall index lives in memory, and only a batch's events named
    a world to embed: after a restart, a world with no new event answered every recall with
    `vectors: 0` (a loaded save asked before anything happened in it)."""
    port = tavern_worker.settings.web_port
    before = vectors_searched(port)
    tavern_worker.stop()
    tavern_worker.start()
    assert vectors_searched(port) == before  # no event since: its recalls noted it


def test_recall_and_decision_commands_print_tables(
    tavern_worker: WorkerProcess,  # noqa: F811
) -> None:
    where = [
        "--world",
        "save-1",
        "--api-key",
        "key-acme",
        "--url",
        tavern_worker.settings.canonical_url,
    ]
    printed = rumourmill("recall", "npc-mara", "son", *where)
    assert printed.splitlines()[3].split() == [
        "seq",
        "story",
        "time",
        "kind",
        "retention",
        "score",
        "content",
    ]
    assert "I will find your son. Where was he last seen?" in printed
    printed = rumourmill("decision", "npc-mara", "--after-seq", "2", *where)
    assert "- player-1 said: I will find your son. Where was he last seen?" in printed
    assert "verdict: none" in printed
    printed = rumourmill(
        "reply-check", "npc-mara", "Ask Bertram. Ilse knows.", "--after-seq", "2", *where
    )
    assert printed.splitlines()[3:] == ["Bertram  name", "", "action: flag"]
