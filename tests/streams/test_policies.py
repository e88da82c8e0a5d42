"""Policy documents are checked on their way in; an invalid one never replaces a valid one."""

from __future__ import annotations

import logging

import orjson
import pytest

from projections.policy import PolicyBook, policy_key
from streams.policies import InvalidPolicy, PolicyFeed, check_policy_document

PERSISTENT_MARA = orjson.dumps({"memory": {"persistent": {"characters": ["npc-mara"]}}})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "a policy is a JSON object"),
        (b'{"memory": {"spreading": {"enabld": true}}}', "memory.spreading.enabld: Extra inputs"),
        (b'{"memory": {"retelling_factor": 2}}', "memory.retelling_factor: Input should be less"),
    ],
)
def test_an_invalid_document_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidPolicy, match=reason):
        check_policy_document(raw)


def test_the_feed_keeps_the_last_valid_document_and_logs_the_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    feed = PolicyFeed("127.0.0.1:9", "policies")
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


def test_the_feed_knows_whether_any_document_in_force_chooses_model_weighing() -> None:
    """Without a model configured, the worker skips the judgement pass while none does."""
    feed = PolicyFeed("127.0.0.1:9", "policies")
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
