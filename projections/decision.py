"""Memory in a decision (section 10): what a character may bring to answering one event.

The event at `after_seq` names the player and the character who answers. The character's
knowledge is at most `MAX_KNOWLEDGE` memories as held then (forgotten ones never): the most
important about the player or the place, as one list (the event's place, else where the
character is; looked for past the forgotten ones as recall does, deeper while they fill what
was looked at, `SEARCH_DEPTHS`), then the best recall for the event's words and whom and what else
it names (what the character's memories of it are about and claim facts of, and the entities
whose declared names its words say, as recall takes a query's). Beside them come the recent
turns of the player scope (section 13) as of the event, word for word, unless expired at real
time `now_ms`.
The player who spoke is no character to decide for, nor is an item, a place or an id of no
kind that holds no memory there (none of them forms memories; an item moved somewhere has a
place, not a mind): a decision for one is a 404 (a character declared an item later keeps what
it held, and decides).
The prompt labels the memories as what the character knows, which may be wrong, says they know
nothing beyond it, quotes what was just said when anything was, and gives the referee's
verdict. It is made of memories and heard lines alone: the world record never reaches it.
No model is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

from pydantic import TypeAdapter

from projections.catalogue import (
    CHARACTER,
    PLAYER,
    Declarations,
    StoredDeclarations,
    classify,
    display_name,
)
from projections.dialogue import scope_read
from projections.event_log import EventAt, event_at
from projections.memories import belief_id
from projections.memory_store import MemoryKeys, load_held, load_memory
from projections.recall import (
    SEARCH_DEPTHS,
    RecallIndex,
    declared_named_in,
    held_candidates,
    search,
    search_scope,
)
from projections.recall_choice import Candidate, best_first, choose, story_order
from projections.runtime_read import BadRead, NotFound, holds_memories, timeline_view
from projections.state import StateTransaction
from projections.story_clock import story_now
from projections.timelines import Ancestry
from projections.whereabouts import place_of
from projections.wording import named_on_one_line, one_line, quoted
from schemas.memory import DecisionRead, KnowledgeRead, Memory, MemoryKind, TurnRead, Verdict
from schemas.policy import Policy

MAX_KNOWLEDGE = 10
KNOWLEDGE_FIELDS = set(KnowledgeRead.model_fields)
TURNS = TypeAdapter(list[TurnRead])


def decision(
    tx: StateTransaction,
    index: RecallIndex,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    after_seq: int,
    player_id: str | None,
    policy: Policy,
    now_ms: int,
) -> DecisionRead:
    """The decision context of `npc_id` answering the event at `after_seq`, with dialogue
    expiry judged at real time `now_ms` (the wall clock when served)."""
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, after_seq, "after_seq")
    event = event_at(tx, tenant_id, world_id, ancestry, after_seq)
    if event is None:
        raise BadRead(f"after_seq {after_seq} names no event on timeline {timeline_id!r}")
    if npc_id not in (event.target, event.actor):
        raise NotFound(f"the event at {after_seq} is neither by nor to {npc_id!r}")
    declarations = StoredDeclarations(tx, tenant_id, world_id, ancestry)
    kind = classify(npc_id, event.players, declarations, policy)
    if kind == PLAYER:  # the player who spoke: no mind to decide with
        raise NotFound(
            f"{npc_id!r} is a player of the event at {after_seq}: players hold no memory"
        )
    if kind != CHARACTER and not holds_memories(tx, keys, ancestry, npc_id):
        raise NotFound(f"{npc_id!r} is no character (its kind: {kind}): only characters decide")
    player = the_player(event, player_id, after_seq)
    index.catch_up(tx, keys)
    scope = search_scope(keys, ancestry, npc_id)
    now = story_now(tx, tenant_id, world_id, ancestry)
    knowledge: list[Memory] = []
    place = place_of(tx, tenant_id, world_id, ancestry, npc_id, event.location)
    # the most important about the player or the place, as one list: a place's fight went
    # unmentioned behind ten lines of small talk with the player
    about = [entity for entity in (player, place) if entity is not None]
    looked = 0  # the deeper search goes on where the first stopped (the same order)
    for depth in SEARCH_DEPTHS:  # as recall, past forgotten ones
        found = index.most_important_about(scope, about, depth)
        scored = [(belief_id, 0.0) for belief_id in found[looked:]]
        held = held_candidates(tx, keys, ancestry, npc_id, scored, now, policy)
        knowledge += most_important(held, knowledge)
        if len(knowledge) >= MAX_KNOWLEDGE or len(found) < depth:
            break
        looked = len(found)
    words = event.words or " ".join(event.key.replace(".", " ").replace("-", " ").split())
    knowledge = knowledge[:MAX_KNOWLEDGE]
    declared = declarations.declared()
    # "Where is Rook now?" asks of Rook, as in recall; a gift of the locket, of the locket
    named = [*declared_named_in(words, declared), *named_at(tx, keys, ancestry, npc_id, after_seq)]
    cues = [entity for entity in dict.fromkeys(named) if entity not in (npc_id, player, place)]
    candidates, _, _ = search(tx, index, keys, scope, words, cues, MAX_KNOWLEDGE, policy)
    chosen = choose(candidates, now, MAX_KNOWLEDGE, policy)
    taken = ids(knowledge)
    best = sorted((one for one in chosen if one.memory.belief_id not in taken), key=best_first)
    knowledge += [
        one.memory for one in sorted(best[: MAX_KNOWLEDGE - len(knowledge)], key=story_order)
    ]
    dialogue = policy.memory.dialogue
    player_scope = scope_read(
        tx, (tenant_id, world_id), ancestry, npc_id, "player", player, now_ms, dialogue
    )
    turns = TURNS.validate_python(player_scope["turns"])
    # the referee judged what the event's actor said: another player of the scene said nothing
    verdict = verdict_at(tx, keys, ancestry, npc_id, after_seq) if player == event.actor else None
    # as the line is quoted; a line claiming facts in no words is judged all the same
    spoke = player == event.actor and (event.words is not None or verdict is not None)
    # the line answered, where no turn holds it (dialogue off, a `privacy: "full"` player):
    # else the verdict was on words the prompt never gave
    unquoted = player == event.actor and all(turn.seq != after_seq for turn in turns)
    answered = event.words if unquoted else None
    return DecisionRead(
        knowledge=[memory_read(memory) for memory in knowledge],
        recent_turns=turns,
        verdict=verdict,
        prompt=decision_prompt(
            tx,
            keys,
            ancestry,
            declarations,
            npc_id,
            player,
            knowledge,
            turns,
            answered,
            verdict,
            spoke,
        ),
    )


def named_at(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, npc_id: str, seq: int
) -> list[str]:
    """Whom and what the character's memories of the event at `seq` are about, and the
    subjects of the facts they hold (a line's claims), each once: the event's content beyond
    its words, as the character took it in. A line about the sailor that never names him in
    words was answered without what the character believes of the sailor. Only the memories
    the event formed: not news spread to the character at the same position (a meeting, a
    group exchange), which the event did not say."""
    timeline_id = timeline_at(ancestry, seq)
    if timeline_id is None:
        return []
    tenant, world = keys.tenant_id, keys.world_id
    held = [
        memory
        for kind in get_args(MemoryKind)
        if (
            memory := load_memory(
                tx, keys, npc_id, belief_id(tenant, world, timeline_id, seq, npc_id, kind)
            )
        )
        is not None
    ]
    named = [entity for memory in held for entity in memory.about]
    return list(
        dict.fromkeys([*named, *(fact.subject for memory in held for fact in memory.facts)])
    )


def timeline_at(ancestry: Ancestry, seq: int) -> str | None:
    """The timeline of the ancestry that holds the event at `seq` (the oldest that reaches it)."""
    return next(
        (segment.timeline_id for segment in reversed(ancestry) if seq <= segment.upto_seq), None
    )


def verdict_at(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, npc_id: str, seq: int
) -> Verdict | None:
    """The referee's verdict on the line the character heard at `seq` (section 11), kept with
    the memory the line formed there; None if no referee judged a line there."""
    timeline_id = timeline_at(ancestry, seq)
    if timeline_id is None:
        return None
    line = belief_id(keys.tenant_id, keys.world_id, timeline_id, seq, npc_id, "knowledge")
    memory = load_memory(tx, keys, npc_id, line)
    return None if memory is None else memory.verdict


def the_player(event: EventAt, player_id: str | None, after_seq: int) -> str:
    """The player the decision answers: the event's only one, or the one named among them. An
    event of no player is refused as such: no `player_id` can name one there."""
    players = list(dict.fromkeys(event.players))  # one listed twice is one player
    if not players:
        raise BadRead(f"the event at {after_seq} names no player: a decision answers a player")
    if player_id is not None:
        if player_id not in players:
            raise BadRead(f"player_id {player_id!r} is not a player of the event at {after_seq}")
        return player_id
    if len(players) != 1:
        raise BadRead(
            f"the event at {after_seq} names {len(players)} players: name one with player_id"
        )
    return players[0]


def ids(memories: Sequence[Memory]) -> set[str]:
    return {memory.belief_id for memory in memories}


def most_important(candidates: Iterable[Candidate], taken: Sequence[Memory]) -> list[Memory]:
    """The candidates not taken already, most important (then newest) first."""
    seen = ids(taken)
    kept = [candidate.memory for candidate in candidates if candidate.memory.belief_id not in seen]
    return sorted(kept, key=lambda memory: (-memory.importance, -memory.seq, memory.belief_id))


def memory_read(memory: Memory) -> KnowledgeRead:
    """What a decision model may see of a memory (never whether it agrees with the record)."""
    return KnowledgeRead.model_validate(memory.model_dump(include=KNOWLEDGE_FIELDS))


def decision_prompt(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    declarations: Declarations,
    npc_id: str,
    player_id: str,
    knowledge: Sequence[Memory],
    turns: Sequence[TurnRead],
    answered: str | None,
    verdict: Verdict | None,
    spoke: bool,
) -> str:
    """The prompt text: memory contents labelled as possibly wrong, what the character does not
    believe at all said so (a line it was left unconvinced of, and what was passed on of it:
    listed bare, a lie the referee rejected read to the model as something known), nothing
    beyond, then the recent lines quoted word for word when there are any, and the player's
    line answered, `answered`, when none of them is it, and the verdict on it (none where the
    player said nothing at the event, `spoke` false: a gift, another player's line); names as
    the timeline's `declarations` give them."""

    def named(entity: str) -> str:
        return named_on_one_line(lambda named: display_name(named, declarations), entity)

    name, player = named(npc_id), named(player_id)
    lines = [f"What {name} knows (from memory; any of it may be wrong):"]
    for memory in knowledge:
        # one line each, however a memory's words run (a retelling may hold line breaks)
        said = one_line(memory.content)
        if memory.source == "player" and memory.kind != "impression" and memory.source_entity:
            # her words, not "I"; an impression a line left is the character's own feeling
            said = f"{named(memory.source_entity)} said: {said}"
        stored = load_held(tx, keys, ancestry, npc_id, memory.belief_id)
        if stored is not None and stored.confidence == 0:  # as held unfaded: faded is no doubt
            said += f" ({name} does not believe it)"
        lines.append(f"- {said}")
    if not knowledge:
        lines.append("- nothing")
    lines.append(f"{name} knows nothing beyond this.")
    if turns:
        lines.append(f"What was just said between {name} and {player}, word for word:")
        lines += [f"- {named(turn.speaker_id)}: {quoted(turn.text)}" for turn in turns]
    if answered is not None:
        lines.append(f"What {player} just said to {name}, word for word: {quoted(answered)}")
    if spoke:
        judged = "none" if verdict is None else verdict
        lines.append(f"The referee's verdict on what {player} just said: {judged}.")
    else:  # "on what Ilse just said: none" of a gift made up a line she never said
        lines.append(f"The referee's verdict: none ({player} said nothing just now).")
    return "\n".join(lines)
