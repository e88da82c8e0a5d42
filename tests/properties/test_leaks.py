"""No knowledge leaks, and a digest that redelivery cannot move, over random worlds.

A memory leaks when its lineage does not trace back to something its holder perceived, or to a
character who told it and knew it before; a read leaks when it shows a memory from after its
timeline's branch point or from a sibling. The worlds are those of `test_oracle.py`, with
spreading (rumours at meetings) switched on in some of them.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.policy import resolve
from projections.runtime_read import NotFound, runtime_read
from schemas import Event
from schemas.memory import Memory
from streams.replay import replay_lines
from tests.oracle import origin_id
from tests.properties.worlds import DrawnChoices, Run, Shape, draw_history

SOAK = os.environ.get("RUMOURMILL_SOAK") == "1"
HISTORIES = 5_000 if SOAK else 600


def memories_of(run: Run) -> list[Memory]:
    tenant, world = run.history.tenant, run.history.world
    prefix = pack(MEMORIES, tenant, world)
    return [Memory.model_validate_json(value) for _, value in run.state.scan(prefix)]


def lineage_leaks(run: Run, figures: Counter[str]) -> list[str]:
    """Memories whose holder neither perceived the event nor heard it from someone who knew."""
    assert run.oracle is not None
    oracle, history = run.oracle, run.history
    world = oracle.worlds[(history.tenant, history.world)]
    events = {(item.event.timeline_id, item.event.seq): item.event for item in world.applied}
    memories = memories_of(run)
    figures["memories checked"] += len(memories)
    figures["second-hand memories checked"] += sum(m.source in ("told", "rumour") for m in memories)
    leaks: list[str] = []

    def knew_before(holder: str, origin: str, memory: Memory) -> bool:
        limits = dict(oracle.ancestry(world, memory.timeline_id, memory.seq - 1))
        return any(
            other.character_id == holder
            and other.origin == origin
            and (
                other.persistent
                or (other.timeline_id in limits and other.seq <= limits[other.timeline_id])
            )
            for other in memories
        )

    for memory in memories:
        event: Event | None = events.get((memory.timeline_id, memory.seq))
        who = memory.character_id
        where = f"{who} {memory.kind} {memory.source} at {memory.timeline_id}/{memory.seq}"
        if event is None:
            leaks.append(f"{where}: no event was applied at that position")
            continue
        if memory.source == "seen":
            perceived = who in (event.actor, event.target) or who in (event.witnesses or [])
            if not perceived and event.witnesses is None and event.location is not None:
                folded = oracle._fold(
                    world, oracle.ancestry(world, memory.timeline_id, event.seq - 1)
                )
                perceived = folded["where"].get(who) == event.location
            if not perceived or memory.origin != origin_id(event) or memory.hops != 0:
                leaks.append(f"{where}: seen, but {who} did not perceive {event.key}")
        elif memory.source == "player":
            if not (
                event.key == "loreweaver.conversation.player-said"
                and memory.source_entity == event.actor
                and memory.origin == origin_id(event)
                and who != event.actor
            ):
                leaks.append(f"{where}: from a player who did not say it")
        else:  # told or rumour: a teller who knew it before
            teller = memory.source_entity
            fresh_claim = (
                event.key == "loreweaver.conversation.told"
                and teller == event.actor
                and memory.origin == oracle.fresh_claim_origin(history.tenant, history.world, event)
            )
            if teller is None or teller == who:
                leaks.append(f"{where}: told by {teller!r}")
            elif not fresh_claim and not knew_before(teller, memory.origin, memory):
                leaks.append(f"{where}: {teller} passed on news they did not know")
            elif memory.hops < 1 or (memory.lineage and memory.lineage[-1].entity_id != teller):
                leaks.append(f"{where}: lineage {memory.lineage} does not end with {teller}")
    return leaks


def read_leaks(run: Run, figures: Counter[str]) -> list[str]:
    """Reads showing a memory from beyond the branch point or from a sibling timeline."""
    assert run.oracle is not None
    oracle, history = run.oracle, run.history
    world = oracle.worlds.get((history.tenant, history.world))
    if world is None:
        return []
    by_id = {(m.character_id, m.belief_id): m for m in memories_of(run)}
    leaks: list[str] = []
    for timeline, line in world.timelines.items():
        limits = dict(oracle.ancestry(world, timeline, line.processed))
        for npc in history.ids:
            try:
                read: dict[str, Any] = runtime_read(
                    run.state, history.tenant, history.world, timeline, npc
                ).model_dump(mode="json")
            except NotFound:
                continue
            figures["reads checked"] += 1
            shown = [*read["beliefs"], *read["recollections"]]
            for item in shown:
                memory = by_id.get((npc, item["belief_id"]))
                if memory is None:
                    leaks.append(f"{timeline}/{npc}: shows {item['belief_id']} nobody stored")
                elif not memory.persistent and not (
                    memory.timeline_id in limits and memory.seq <= limits[memory.timeline_id]
                ):
                    leaks.append(
                        f"{timeline}/{npc}: shows {memory.timeline_id}/{memory.seq} "
                        f"(visible: {limits})"
                    )
            entities = {e for item in shown for e in [*item["about"], item["source_entity"]]}
            for relation in read["relations"]:
                if len(shown) < 20 and relation["entity_id"] not in entities:
                    leaks.append(
                        f"{timeline}/{npc}: relation to {relation['entity_id']} from nowhere"
                    )
    return leaks


@settings(
    max_examples=HISTORIES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def check_random_histories(figures: Counter[str], data: st.DataObject) -> None:
    """One random history: no leak, and a digest that redelivery and duplicates cannot move."""
    history = draw_history(DrawnChoices(data), Shape(max_events=30 if SOAK else 14))
    if data.draw(st.booleans(), label="spreading"):
        history.policy_document["memory"]["spreading"] = {
            "enabled": True,
            "group_interval_minutes": data.draw(st.sampled_from([30, 240])),
        }
        history.policy = resolve(None, history.policy_document)
    run = Run(history)
    run.deliver()
    leaks = lineage_leaks(run, figures) + read_leaks(run, figures)
    assert not leaks, "\n".join([*leaks[:10], history.describe()])
    figures["histories"] += 1

    # the digest: redelivering any offset (a crash before the commit) changes nothing, and
    # neither does the stream again with more duplicates of every message that was taken in
    tenant, world = history.tenant, history.world
    digest = world_digest(run.state, tenant, world)
    rng = random.Random(data.draw(st.integers(0, 2**32), label="noise"))
    for offset in rng.sample(range(len(history.delivery)), k=len(history.delivery) // 2):
        run.projector.receive(
            run.state,
            SourceMessage(
                "events", 0, offset, world_key(history.delivery[offset]), history.delivery[offset]
            ),
        )
    assert world_digest(run.state, tenant, world) == digest, history.describe()
    taken = [raw for at, raw in enumerate(history.delivery) if run.outcomes[at] != "rejected"]
    noisy = list(history.delivery)
    for raw in taken:
        if rng.random() < 0.3:
            noisy.insert(rng.randrange(noisy.index(raw) + 1, len(noisy) + 1), raw)
    noisy += taken
    again = replay_lines(noisy, run.projector)
    assert world_digest(again.state, tenant, world) == digest, history.describe()


@pytest.mark.timeout(4 * 3600 if SOAK else 600)
def test_no_knowledge_leaks_and_a_stable_digest() -> None:
    """On random histories whose memories and reads give a leak somewhere to show: memories
    told or heard as rumours among them, and reads on every timeline."""
    figures: Counter[str] = Counter()
    check_random_histories(figures)
    histories = figures["histories"]
    assert histories >= HISTORIES, figures
    assert figures["memories checked"] >= 2 * histories, figures
    assert figures["second-hand memories checked"] >= histories / 10, figures
    assert figures["reads checked"] >= 2 * histories, figures
