"""Policy documents are checked on their way in; an invalid one never replaces a valid one."""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from projections.policy import SWEEP_FLOOR, PolicyBook, policy_key
from streams.cli import main
from streams.policies import InvalidPolicy, PolicyFeed, check_policy_document, log_conflict
from streams.settings import Settings
from tests.support import read_all, unique_settings

PERSISTENT_MARA = orjson.dumps({"memory": {"persistent": {"characters": ["npc-mara"]}}})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "a policy is a JSON object"),
        (b'{"memory": {"spreading": {"enabld": true}}}', "memory.spreading.enabld: Extra inputs"),
        (b'{"memory": {"retelling_factor": 2}}', "memory.retelling_factor: Input should be less"),
        (  # found by a reviewer: the last copy won, `npc: false` gone without a word
            b'{"memory": {"npc": false}, "memory": {"dialogue": {"turns_kept": 5}}}',
            "'memory' is given twice in one object: give each key once",
        ),
        (b'{"memory": {"npc": false, "npc": true}}', "'npc' is given twice"),
        (  # found by a reviewer: a recursion error stopped the worker's policy follower
            b'{"memory": ' + b"[" * 1000 + b"]" * 1000 + b"}",
            "nested deeper than 16 levels, which no policy field is",
        ),
        (b'{"m": ' + b"[" * 299 + b"]" * 299 + b"}", "nested deeper than 16 levels"),
        (b'{"m": ' + b"[" * 1100 + b"]" * 1100 + b"}", "nested deeper than 16 levels"),
    ],
)
def test_an_invalid_document_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidPolicy, match=reason):
        check_policy_document(raw)


def test_the_feed_keeps_the_last_valid_document_and_logs_the_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    feed = PolicyFeed(Settings(broker="127.0.0.1:9"), "policies")
    book = PolicyBook(feed)
    world = policy_key("default", "save-1")
    feed.take(world, PERSISTENT_MARA)
    with caplog.at_level(logging.ERROR, logger="rumourmill.policies"):
        feed.take(world, b'{"memory": {"persistent": {"characters": "npc-mara"}}}')
        feed.take(policy_key("default", None), b"{not json")
    assert book("default", "save-1").memory.persistent.characters == ["npc-mara"]
    assert feed.get(policy_key("default", None)) is None
    refused = [(r.policy_key, r.reason) for r in caplog.records]  # type: ignore[attr-defined]
    assert refused[0][0] == '["default","save-1"]'
    assert "memory.persistent.characters: Input should be a valid array" in refused[0][1]
    assert refused[1][0] == '["default",null]'
    assert refused[1][1].startswith("not valid JSON")
    assert "keeping the last valid one" in caplog.records[0].getMessage()

    feed.take(world, None)  # a tombstone: back to the defaults
    assert book("default", "save-1").memory.persistent.characters == []


def test_a_world_document_conflicting_with_its_tenants_leaves_the_tenants_in_force(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each document is valid alone; together they break a rule between fields. The world is
    governed by its tenant's policy (its events go on, its reads answer), the operator is told
    once which documents and why, and a corrected document is in force at once."""
    feed = PolicyFeed(Settings(broker="127.0.0.1:9"), "policies")
    book = PolicyBook(feed, log_conflict)
    tenant, world = policy_key("default", None), policy_key("default", "save-1")
    feed.take(tenant, orjson.dumps({"memory": {"referee": {"doubting_from": 0.3}}}))
    feed.take(world, orjson.dumps({"memory": {"referee": {"convinced_from": 0.2}}}))
    assert feed.get(world) is not None, "valid alone: the feed keeps it"
    with caplog.at_level(logging.ERROR, logger="rumourmill.policies"):
        for _ in range(3):
            referee = book("default", "save-1").memory.referee
            assert (referee.doubting_from, referee.convinced_from) == (0.3, 0.4)
    assert len(caplog.records) == 1
    record = caplog.records[0]
    assert (record.tenant_id, record.world_instance_id) == ("default", "save-1")  # type: ignore[attr-defined]
    assert "doubting_from must not exceed convinced_from" in record.getMessage()
    assert "the tenant's default governs the world" in record.getMessage()
    assert book("default", "save-2").memory.referee.doubting_from == 0.3

    # the same document for another world: that world is named too, once
    feed.take(policy_key("default", "save-3"), feed.get(world))
    with caplog.at_level(logging.ERROR, logger="rumourmill.policies"):
        for _ in range(2):
            assert book("default", "save-3").memory.referee.convinced_from == 0.4
    assert [r.world_instance_id for r in caplog.records] == ["save-1", "save-3"]  # type: ignore[attr-defined]

    feed.take(world, orjson.dumps({"memory": {"referee": {"convinced_from": 0.5}}}))
    referee = book("default", "save-1").memory.referee
    assert (referee.doubting_from, referee.convinced_from) == (0.3, 0.5)


def test_the_feed_knows_whether_any_document_in_force_chooses_model_weighing() -> None:
    """Without a model configured, the worker skips the judgement pass while none does."""
    feed = PolicyFeed(Settings(broker="127.0.0.1:9"), "policies")
    tenant, world = policy_key("default", None), policy_key("default", "save-1")
    feed.take(world, PERSISTENT_MARA)
    assert not feed.model_weighing
    feed.take(tenant, orjson.dumps({"memory": {"weighing": "model"}}))
    assert feed.model_weighing
    feed.take(tenant, b'{"memory": {"weighing": "modle"}}')  # refused: the last valid stays
    assert feed.model_weighing
    feed.take(tenant, orjson.dumps({"memory": {"weighing": "rules"}}))
    assert not feed.model_weighing
    feed.take(world, orjson.dumps({"memory": {"weighing": "model"}}))
    feed.take(world, None)  # a tombstone
    assert not feed.model_weighing


@pytest.mark.integration
def test_policy_set_refuses_a_document_that_conflicts_with_one_in_force(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The command reads the documents in force first: a world's document that, over its
    tenant's, breaks a rule between fields is refused with why and not published, and so is a
    tenant default that would do that to one of its worlds."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")

    def policy_set(referee: dict[str, float], *where: str) -> Result:
        path = tmp_path / "policy.json"
        path.write_bytes(orjson.dumps({"memory": {"referee": referee}}))
        return CliRunner().invoke(
            main, ["policy", "set", str(path), *where], env=settings.environment()
        )

    assert policy_set({"doubting_from": 0.3}).exit_code == 0
    refused = policy_set({"convinced_from": 0.2}, "--world", "save-1")
    assert refused.exit_code == 1
    assert "world 'save-1'" in refused.output
    assert "doubting_from must not exceed convinced_from" in refused.output
    assert "nothing published" in refused.output
    assert policy_set({"convinced_from": 0.35}, "--world", "save-1").exit_code == 0
    refused = policy_set({"doubting_from": 0.38})  # valid alone: the default convinced_from is 0.4
    assert refused.exit_code == 1 and "world 'save-1'" in refused.output

    published = read_all(settings, settings.topics.policies)
    assert [document["memory"]["referee"] for document in published] == [
        {"doubting_from": 0.3},
        {"convinced_from": 0.35},
    ]


@pytest.mark.parametrize(
    "key",
    [
        b"acme/save-1",
        b'["acme"]',
        b'["acme", "save-1"]',
        b'["", null]',
        b'["",null]',
        b'["acme", 7]',
        b"\xff",
        policy_key("t" * 129, None),
    ],
)
def test_a_document_under_a_key_policy_set_never_makes_is_refused_with_its_key(
    key: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """Written by another producer, it would be kept and govern nothing, without a word."""
    feed = PolicyFeed(Settings(broker="127.0.0.1:9"), "policies")
    with caplog.at_level(logging.ERROR, logger="rumourmill.policies"):
        feed.take(key, PERSISTENT_MARA)
    assert feed.documents == {}
    [record] = caplog.records
    assert record.policy_key == key.decode(errors="replace")  # type: ignore[attr-defined]
    assert "its key is not [TENANT, WORLD] or [TENANT, null]" in record.getMessage()


def test_a_worker_lets_go_of_the_policies_of_documents_since_replaced() -> None:
    """Each pair of documents resolves once, and was kept for the worker's life: a world whose
    document a studio's tuning replaced 3,000 times held 76 MB of policies no world follows."""
    documents: dict[bytes, bytes] = {}
    book = PolicyBook(documents)
    tenant, world = policy_key("default", None), policy_key("default", "save-1")
    documents[tenant] = orjson.dumps({"memory": {"spreading": {"enabled": True}}})
    tracemalloc.start()
    try:
        for step in range(3_000):
            days = 6 + step / 1_000
            documents[world] = orjson.dumps({"memory": {"retention": {"half_life_days": days}}})
            policy = book("default", "save-1")
            assert policy.memory.retention.half_life_days == days  # the one in force, always
            assert book("default", "save-2").memory.spreading.enabled  # the tenant's, shared
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 16 * 1024 * 1024, f"{held / 2**20:.0f} MB held"


def test_a_world_is_told_of_its_conflict_once_while_its_documents_stand() -> None:
    """Two worlds of one conflicting document; the first is corrected, and the worker lets go of
    what no world reads any more: the second, its documents unchanged, was told again."""
    told: list[str] = []
    documents: dict[bytes, bytes] = {}
    book = PolicyBook(documents, lambda tenant, world, why: told.append(world))
    documents[policy_key("t", None)] = orjson.dumps({"memory": {"referee": {"doubting_from": 0.3}}})
    conflicting = orjson.dumps({"memory": {"referee": {"convinced_from": 0.2}}})
    documents[policy_key("t", "a")] = documents[policy_key("t", "b")] = conflicting
    for _ in range(3):
        book("t", "a"), book("t", "b")
    corrected = orjson.dumps({"memory": {"referee": {"convinced_from": 0.5}}})
    documents[policy_key("t", "a")] = corrected
    book("t", "a")
    for number in range(3 * SWEEP_FLOOR):  # worlds of their own documents: the book sweeps
        own = {"memory": {"retention": {"half_life_days": 6 + number / 100}}}
        documents[policy_key("t", f"w{number}")] = orjson.dumps(own)
        book("t", f"w{number}")
    book("t", "b")
    documents[policy_key("t", "a")] = conflicting  # in conflict again: told again
    book("t", "a"), book("t", "b")
    assert told == ["a", "b", "a"]


def test_a_tenant_and_a_world_of_128_characters_are_a_policy_key() -> None:
    """The longest ids the contract takes govern as any other."""
    feed = PolicyFeed(Settings(broker="127.0.0.1:9"), "policies")
    key = policy_key("t" * 128, "w" * 128)
    feed.take(key, PERSISTENT_MARA)
    assert list(feed.documents) == [key]
