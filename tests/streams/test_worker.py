"""The worker on a real Apache Kafka broker: acks, dead letters, branches, and SIGKILL."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.logs import reason_kind
from streams.publish import send_one
from streams.replay import replay_lines
from streams.settings import Settings
from streams.topics import changelog_topic
from tests.support import (
    WorkerProcess,
    create_topic,
    event,
    read_topic,
    run_command,
    send_events,
    stopped_saying,
    topic_ends,
    topics_on,
    unique_settings,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data", log_format="json")


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(settings, tmp_path / "worker.log").start()
    yield process
    process.stop()


def acks_for(settings: Settings, world: str, count: int) -> list[dict[str, Any]]:
    """The first `count` acks of one world, in the order they were published."""

    def of_world(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [ack for ack in messages if ack["world_instance_id"] == world]

    messages = read_topic(settings, settings.topics.acks, lambda got: len(of_world(got)) >= count)
    return of_world(messages)[:count]


def get_json(settings: Settings, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def test_gap_defers_then_releases_in_order_and_duplicates_change_nothing(
    settings: Settings, worker: WorkerProcess
) -> None:
    send_events(settings, [event("w-gap", seq) for seq in (1, 2, 4, 5, 3)])
    acks = acks_for(settings, "w-gap", 7)
    assert [(a["seq"], a["outcome"], a["processed_seq"]) for a in acks] == [
        (1, "processed", 1),
        (2, "processed", 2),
        (4, "deferred", 2),
        (5, "deferred", 2),
        (3, "processed", 3),
        (4, "processed", 4),
        (5, "processed", 5),
    ]
    assert acks[-1]["acknowledged_seq"] == 5
    digest_before = get_json(settings, "/v2/admin/digest?world_instance_id=w-gap")["digest"]

    send_events(settings, [event("w-gap", seq) for seq in (1, 2, 3, 4, 5)])
    again = acks_for(settings, "w-gap", 12)[7:]
    assert [(a["seq"], a["outcome"]) for a in again] == [(s, "duplicate") for s in (1, 2, 3, 4, 5)]
    assert {(a["acknowledged_seq"], a["processed_seq"]) for a in again} == {(5, 5)}
    assert get_json(settings, "/v2/admin/digest?world_instance_id=w-gap")["digest"] == digest_before
    timeline = get_json(settings, "/v2/timelines/main?world_instance_id=w-gap")
    assert (timeline["processed_seq"], timeline["applied_events"]) == (5, 5)


def test_bad_input_is_dead_lettered_and_the_stream_goes_on(
    settings: Settings, worker: WorkerProcess
) -> None:
    """Every bad message is dead-lettered whole with its reason, but one over the size limit,
    whose dead letter keeps its first `max_event_bytes` bytes and names its whole length: a
    message of 900 KB, whole in base64, would be over the 1 MB a producer sends. Nor does a
    message whose reason or key made its ack or dead letter over that stop the stream (it did,
    on every restart): 15,000 numbers out of range, each a problem, and a key of 400 KB (on
    every partition, each before the events that follow)."""
    too_long = "x" * 129
    numbers = b",".join([b"1e30"] * 15_000)
    bad: list[bytes] = [
        b"\x00\xff\xfe garbage",
        b'{"world_instance_id": "w-bad", "seq": ',
        orjson.dumps({"world_instance_id": "w-bad", "timeline_id": "main", "key": "k"}),
        orjson.dumps(event("w-bad", 1) | {"seq": "1"}),
        orjson.dumps(event("w-bad", 1) | {"timeline_id": too_long}),
        orjson.dumps(event("w-bad", 0)),
        orjson.dumps(
            event(
                "w-bad",
                3,
                timeline="lost",
                branch={"parent_timeline_id": "nowhere", "after_seq": 2},
            )
        ),
        orjson.dumps(event("w-bad", 1, payload={"blob": "y" * (900 * 1024)})),
        orjson.dumps(event("w-bad", 1, payload={"ids": []})).replace(b"[]", b"[" + numbers + b"]"),
    ]
    long_key, misrouted = b"k" * 400_000, orjson.dumps(event("w-bad", 1, key="misrouted"))
    send_events(settings, bad)
    copies = asyncio.run(
        send_one(settings, settings.topics.events, long_key, misrouted, every_partition=True)
    )
    send_events(settings, [event("w-bad", 1), event("w-bad", 2)])

    letters = read_topic(
        settings, settings.topics.deadletter, lambda got: len(got) >= len(bad) + copies
    )
    limit = settings.max_event_bytes
    kept = {base64.b64decode(letter["value_base64"]): letter for letter in letters}
    oversized = kept.pop(bad[7][:limit])
    assert oversized["value_bytes"] == len(bad[7])
    kept.pop(misrouted)
    keyed_long = [letter for letter in letters if "key_bytes" in letter]
    assert len(keyed_long) == copies
    for letter in keyed_long:
        assert (letter["key_bytes"], base64.b64decode(letter["key_base64"])) == (
            len(long_key),
            long_key[:1024],
        )
        assert base64.b64decode(letter["value_base64"]) == misrouted
        assert letter["reason"].startswith(f"message key '{'k' * 100}'... (400000 bytes) is not")
    assert sorted(kept) == sorted([*bad[:7], bad[8]])
    assert not any("value_bytes" in letter for letter in kept.values())
    reasons = {value: letter["reason"] for value, letter in kept.items()}
    reasons[bad[7]] = oversized["reason"]
    assert reasons[bad[0]].startswith("not valid JSON")
    assert reasons[bad[1]].startswith("not valid JSON")
    assert "seq: Field required" in reasons[bad[2]]
    assert "seq: Input should be a valid integer" in reasons[bad[3]]
    assert "timeline_id: String should have at most 128 characters" in reasons[bad[4]]
    assert "seq: Input should be greater than or equal to 1" in reasons[bad[5]]
    assert reasons[bad[6]].startswith("unknown branch parent 'nowhere': it has no event yet")
    assert "over the limit" in reasons[bad[7]]
    assert reasons[bad[8]].startswith("invalid event: payload.ids.list.0.float: Input should be")
    assert reasons[bad[8]].endswith("; and 14995 more")
    assert all(letter["topic"] == settings.topics.events for letter in letters)
    assert all(letter["offset"] >= 0 and letter["partition"] >= 0 for letter in letters)
    log = [json.loads(line) for line in worker.log_path.read_text().splitlines()]
    logged = {
        (entry["partition"], entry["offset"], entry["reason"])
        for entry in log
        if entry["message"].startswith("dead letter ")
    }
    lettered = {(letter["partition"], letter["offset"], letter["reason"]) for letter in letters}
    assert logged <= lettered  # each kind of reason once a spell (`streams.logs.QuietRepeats`)
    assert {reason_kind(reason) for _, _, reason in logged} == {
        reason_kind(reason) for _, _, reason in lettered
    }

    acks = read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(letters) + 2)
    assert sum(ack["outcome"] == "rejected" for ack in acks) == len(letters)
    good = [a for a in acks if a["world_instance_id"] == "w-bad" and a["outcome"] == "processed"]
    assert [a["seq"] for a in good] == [1, 2]


def test_an_event_on_a_partition_other_than_its_worlds_is_dead_lettered(
    settings: Settings, worker: WorkerProcess
) -> None:
    """A producer whose partitioner is not Kafka's default (librdkafka's, under the C, C++, Go
    and .NET clients, is CRC32) put a world's events on another partition: each was acked
    `processed`, and no read of the world ever saw it. A copy of the event on every partition:
    the one on its world's is taken, each other one refused saying which partitioner to set."""
    world = "w-partitioned"
    raw = orjson.dumps(event(world, 1))
    copies = asyncio.run(
        send_one(settings, settings.topics.events, world.encode(), raw, every_partition=True)
    )
    assert copies == settings.partitions == 2
    acks = acks_for(settings, world, copies)
    assert sorted(ack["outcome"] for ack in acks) == ["processed", "rejected"]
    [refused] = [ack for ack in acks if ack["outcome"] == "rejected"]
    assert "partitioner=murmur2_random" in refused["reason"]
    [letter] = read_topic(settings, settings.topics.deadletter, lambda got: len(got) >= 1)
    assert (letter["reason"], base64.b64decode(letter["value_base64"])) == (refused["reason"], raw)
    timeline = get_json(settings, f"/v2/timelines/main?world_instance_id={world}")
    assert (timeline["processed_seq"], timeline["applied_events"]) == (1, 1)


def test_a_branch_continues_the_parent_numbering_and_ignores_its_later_seqs(
    settings: Settings, worker: WorkerProcess
) -> None:
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    send_events(
        settings,
        [
            *(event("w-br", seq) for seq in (1, 2, 3, 4)),
            event("w-br", 3, timeline="alt", branch=branch),
            event("w-br", 4, timeline="alt"),
            event("w-br", 5, timeline="alt"),
        ],
    )
    acks = acks_for(settings, "w-br", 7)
    alt = [(a["seq"], a["outcome"], a["processed_seq"]) for a in acks if a["timeline_id"] == "alt"]
    assert alt == [(3, "processed", 3), (4, "processed", 4), (5, "processed", 5)]
    timeline = get_json(settings, "/v2/timelines/alt?world_instance_id=w-br")
    assert timeline["parent_timeline_id"] == "main"
    assert timeline["after_seq"] == 2
    assert timeline["applied_events"] == 3
    main = get_json(settings, "/v2/timelines/main?world_instance_id=w-br")
    assert main["processed_seq"] == 4


RELEASED = 600
"""Events waiting behind a gap: kept whole, the outbox row of the message filling it (an ack
each) took some 95 KB."""


def test_a_message_releasing_hundreds_of_events_fits_the_changelog_of_the_least_batch_setting(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The outbox row of a message that fills a gap keeps an ack for each event it releases:
    kept whole, it was more than the state changelog takes at the least changelog batch setting
    (16,384 bytes, the topic taking 64 KiB more), and the worker stopped on the message at every
    restart. Kept in parts, every event is acked, and after a restart the timeline goes on."""
    settings = unique_settings(
        kafka_bootstrap, tmp_path / "data", changelog_batch_bytes=16_384, max_event_bytes=8192
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        waiting = [event("w-many", seq) for seq in range(2, RELEASED + 2)]
        send_events(settings, [*waiting, event("w-many", 1)])
        released = acks_for(settings, "w-many", 2 * RELEASED + 1)[RELEASED:]
        assert [(ack["seq"], ack["outcome"]) for ack in released] == [
            (seq, "processed") for seq in range(1, RELEASED + 2)
        ]
        worker.stop()
        worker.start()
        send_events(settings, [event("w-many", RELEASED + 2)])
        *_, last = acks_for(settings, "w-many", 2 * RELEASED + 2)
        assert (last["seq"], last["outcome"]) == (RELEASED + 2, "processed")
    finally:
        worker.stop()


def test_an_event_growing_a_declaration_past_what_the_changelog_takes_is_dead_lettered(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """An entity's declaration adds up the fields of the events that declare it: the event that
    made it larger than the state changelog takes (at the least changelog batch setting, 16,384
    bytes, the topic taking 64 KiB more) was refused by the broker, and the worker stopped on it
    at every restart, for every world of its partition. It is dead-lettered with its bytes and
    what grew too large, and the world goes on, after a restart too."""
    settings = unique_settings(
        kafka_bootstrap, tmp_path / "data", changelog_batch_bytes=16_384, max_event_bytes=8192
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        declaring = [
            event("w-noted", seq, entities={"npc-mara": {f"note_{seq}": "x" * 7_000}})
            for seq in range(1, 13)
        ]
        send_events(settings, [*declaring, event("w-noted", 12)])
        acks = acks_for(settings, "w-noted", 13)
        assert [(ack["seq"], ack["outcome"]) for ack in acks] == [
            *((seq, "processed") for seq in range(1, 12)),
            (12, "rejected"),
            (12, "processed"),
        ]
        [letter] = read_topic(settings, settings.topics.deadletter, lambda got: len(got) >= 1)
        assert orjson.loads(base64.b64decode(letter["value_base64"])) == declaring[-1]
        assert letter["reason"].startswith("the declaration of entity 'npc-mara' would take 84,")
        assert letter["reason"] == acks[11]["reason"]
        worker.stop()
        worker.start()
        send_events(settings, [event("w-noted", 13)])
        *_, last = acks_for(settings, "w-noted", 14)
        assert (last["seq"], last["outcome"]) == (13, "processed")
    finally:
        worker.stop()


def story(worlds: int, events_per_world: int, seed: int) -> list[bytes]:
    """A reproducible interleaving of worlds, with a branch in each and facts to fold."""
    rng = random.Random(seed)
    streams: list[list[dict[str, Any]]] = []
    for number in range(worlds):
        world = f"w-{number}"
        main = [
            event(world, seq, facts=[{"subject": f"s{seq % 7}", "attribute": "a", "value": seq}])
            for seq in range(1, events_per_world + 1)
        ]
        after = events_per_world // 2
        alt = [
            event(
                world,
                seq,
                timeline="alt",
                facts=[{"subject": "s1", "attribute": "a", "value": -seq}],
            )
            for seq in range(after + 1, after + 1 + events_per_world // 4)
        ]
        alt[0]["branch"] = {"parent_timeline_id": "main", "after_seq": after}
        streams.append(main + alt)
    lines: list[bytes] = []
    while any(streams):
        pick = rng.choice([s for s in streams if s])
        lines.append(orjson.dumps(pick.pop(0)))
    return lines


def processed(acks: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    return {
        (a["world_instance_id"], a["timeline_id"], a["seq"])
        for a in acks
        if a["outcome"] == "processed"
    }


def test_sigkill_mid_stream_applies_every_event_exactly_once(
    settings: Settings, tmp_path: Path
) -> None:
    lines = story(worlds=4, events_per_world=1000, seed=7)
    assert len(lines) == 5000
    clean_run = replay_lines(lines)
    every_event = {
        (e["world_instance_id"], e["timeline_id"], e["seq"]) for e in map(orjson.loads, lines)
    }

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, lines)
        before_kill = read_topic(
            settings, settings.topics.acks, lambda got: len(got) >= 1500, timeout=120
        )
        worker.kill()
        assert len(processed(before_kill)) < len(every_event), "the kill came after the stream"
        worker.start()
        after = read_topic(
            settings,
            settings.topics.acks,
            lambda got: processed(got) >= every_event,
            timeout=300,
        )
        assert processed(after) == every_event
        for (tenant, world), digest in clean_run.digests.items():
            reply = get_json(
                settings, f"/v2/admin/digest?world_instance_id={world}&tenant_id={tenant}"
            )
            assert reply["digest"] == digest, f"{world} differs from the run without a kill"
    finally:
        worker.stop()


def partitions_refused(topic: str) -> str:
    """What a worker or command of 2 partitions says of a topic that has 1."""
    return (
        f"Error: topic {topic!r} has 1 partition(s), the settings say 2 (RUMOURMILL_PARTITIONS); "
        "every worker and command of a deployment needs the count its topics have"
    )


def test_topics_of_another_partition_count_stop_a_worker_and_a_publish_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    """A game server published first, and the broker made the events topic with its own count
    (1 here): a worker of 2 partitions would serve the worlds of the wrong partitions and send
    acks to partitions the topics lack; it stops before it starts, naming both counts. A
    publish with those settings is refused too, before it makes the other topics with them."""
    send_events(settings, [event("w", 1)])  # a producer of its own: the broker's auto-create
    expected = partitions_refused(settings.topics.events)
    worker = run_command(settings, "worker")
    assert worker.returncode == 1
    assert stopped_saying(worker) == expected
    story = tmp_path / "story.ndjson"
    story.write_bytes(orjson.dumps(event("w", 2)) + b"\n")
    published = run_command(settings, "publish", str(story))
    assert published.returncode == 1
    assert published.stderr.splitlines()[-1] == expected + "; nothing published"
    assert topic_ends(settings, settings.topics.events) == {0: 1}
    assert settings.topics.acks not in topics_on(settings)


def test_a_state_changelog_of_another_partition_count_stops_a_worker(settings: Settings) -> None:
    """Left by a deployment of the app id with another RUMOURMILL_PARTITIONS (1 here; the
    topic prefix may be new, the changelog is named by the app id): each of its partitions
    holds the state of the worlds that count put there, which a worker of 2 would restore as
    the state of other worlds'. It stops before it starts, naming both counts."""
    create_topic(settings, changelog_topic(settings), 1)
    worker = run_command(settings, "worker")
    assert worker.returncode == 1
    assert stopped_saying(worker) == partitions_refused(changelog_topic(settings))


def test_an_event_the_broker_refuses_stops_the_publish_saying_kafka_failed_not_unreachable(
    settings: Settings, tmp_path: Path
) -> None:
    """An events topic made with a message limit under an event's size (`max.message.bytes`
    1000 here): the broker, which was reached, refuses the event."""
    create_topic(
        settings, settings.topics.events, settings.partitions, {"max.message.bytes": "1000"}
    )
    story = tmp_path / "story.ndjson"
    story.write_bytes(orjson.dumps(event("w", 1, payload={"text": "y" * 5000})) + b"\n")
    published = run_command(settings, "publish", str(story))
    assert published.returncode == 1
    assert published.stderr.splitlines()[-1] == (
        f"Error: Kafka at {settings.bootstrap} failed: [Error 10] MessageSizeTooLargeError"
    )
