"""Recall (section 9): what a character remembers about a query, as they hold it now.

1. Search the character's memories the timeline sees three ways: by cues (the entity ids asked
   for, plus the entities whose declared names the query mentions, against each memory's
   `about`), by words (a full-text engine over `content`), by meaning (embedding cosine).
2. Fuse the rankings (`projections.recall_fusion`).
3. Apply retention with the timeline's story "now" and its recalls (`projections.reinforcement`)
   down the fused ranking, keeping the first over_retrieve x limit memories not forgotten as the
   candidates (a forgotten memory is absent from recall, so it takes no candidate's place).
4. With a reranker (the worker's, over HTTP: `streams.reranker`), score the candidates again
   (`Recalling`: the searched recall, waiting for it), then
5. choose and order (`projections.recall_choice`).

The searches run over a `RecallIndex`: derived, rebuildable local state that the worker (and an
in-process replay) keeps beside the projections, caught up from the memory log before each
search. This module decides what is asked of it and what is made of the answers; it never
writes projection state.
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice
from typing import Protocol

from projections import whereabouts, writing_systems
from projections.catalogue import StoredDeclarations
from projections.divergence import diverging
from projections.memory_store import MemoryKeys, load_held
from projections.recall_choice import Candidate, Chosen, choose
from projections.recall_fusion import Ranks, Search, candidate_count, fuse, fused_score, ranks_of
from projections.reinforcement import held_now
from projections.runtime_read import BadRead, NotFound, timeline_view
from projections.state import StateTransaction
from projections.story_clock import story_now
from projections.timelines import Ancestry
from schemas import EntityDeclaration
from schemas.events import MAX_ID_LENGTH
from schemas.memory import BeliefRead, RecalledMemory, RecallRead, SearchCounts
from schemas.policy import Policy
from schemas.text import visible

MAX_QUERY_CHARACTERS = 1000
MAX_LIMIT = 50
DEFAULT_LIMIT = 10
MAX_CUE_PIECES = 20
"""The most comma-parted pieces `cues` may hold: each is weighed as the start of an id holding
commas (`cue_ids`), a lookup per run; 60,000 empty ones held the event loop for 30 s."""
SEARCH_DEPTH = 60
"""Each search hands at most this many memories to fusion (the candidate cap)."""
SEARCH_DEPTHS = (SEARCH_DEPTH, 16 * SEARCH_DEPTH, 256 * SEARCH_DEPTH)
"""How deep the searches run, in turn, while forgotten memories leave fewer candidates than
wanted and a search had more to give (`search`): 60, 960, then 15,360 (a thousand forgotten
memories worded alike, ranked before the one held, left a recall of them empty at 960)."""
MAX_WORDS = MAX_QUERY_CHARACTERS // 2
"""The most words the word search takes of a text: every word of a query (1,000 characters
hold at most 500); of a longer text (a decision's line) the rarest in the world."""


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Whose memories a search may return: one character's, as one timeline sees them."""

    tenant_id: str
    world_id: str
    character: str
    ancestry: Ancestry
    persistent_upto: int

    def sees(self, timeline_id: str, seq: int, persistent: bool) -> bool:
        """Whether a memory formed at (timeline, seq) is visible here (a child never sees its
        parent's future; persistent memories are seen from every timeline)."""
        if persistent:
            return seq <= self.persistent_upto
        return any(s.timeline_id == timeline_id and seq <= s.upto_seq for s in self.ancestry)


class RecallIndex(Protocol):
    """The searches recall runs, over derived state rebuilt from the memory log."""

    def catch_up(self, tx: StateTransaction, keys: MemoryKeys) -> None:
        """Take in every memory of the world formed since the index last looked."""

    def holds_any(self, scope: SearchScope) -> bool:
        """Whether the character has any memory in scope."""

    def mentions(self, tenant_id: str, world_id: str, entity_id: str) -> bool:
        """Whether any memory of the world (any character's, on any timeline) is about
        `entity_id`: what makes an undeclared id, a player's say, an entity of the world."""

    def by_cues(self, scope: SearchScope, cues: Collection[str], limit: int) -> list[str]:
        """Belief ids about the most cues first (then newest)."""

    def most_important_about(
        self, scope: SearchScope, entities: Collection[str], limit: int
    ) -> list[str]:
        """Belief ids about any of `entities`, most important first (then newest): what a
        decision brings of the player and the place, however long ago it was formed."""

    def by_words(self, scope: SearchScope, text: str, limit: int) -> list[str]:
        """Belief ids whose content says any word of `text`, best match first: the query's
        words split and folded as the engine does the content's, so that a word is found as the
        content says it; of more than `MAX_WORDS` words the world's memories say, the rarest."""

    def by_meaning(self, scope: SearchScope, text: str, limit: int) -> list[str] | None:
        """Belief ids by cosine with `text`, best first, none below 0.3; None when the
        vector search cannot run (no embedder, or none of the world's model)."""

    def finds(
        self, scope: SearchScope, text: str, contents: Sequence[str]
    ) -> list[Collection[Search]]:
        """For each of `contents`, the searches by words and by meaning that would find a
        memory saying it for `text`: it says a word of `text` the word search finds by (not a
        filler word beside a rarer one), its cosine with `text` is 0.3 or more (all at once: a
        recall may ask of hundreds of faded memories)."""


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What a recall asks: the text, entity ids to cue on, how many memories at most."""

    text: str
    cues: tuple[str, ...] = ()
    limit: int = DEFAULT_LIMIT

    def check(self) -> None:
        """BadRead for a query recall cannot take."""
        if not visible(self.text):
            raise BadRead("'q' must not be empty")
        if len(self.text) > MAX_QUERY_CHARACTERS:
            raise BadRead(f"'q' must be at most {MAX_QUERY_CHARACTERS} characters")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise BadRead(f"'limit' must be from 1 to {MAX_LIMIT}")
        if len(self.cues) > MAX_CUE_PIECES:
            raise BadRead(f"'cues' must hold at most {MAX_CUE_PIECES} pieces between commas")


def named_in(text: str, names: Mapping[str, str]) -> list[str]:
    """The entity ids whose name (`names`: id -> declared name) the text mentions as words
    (`writing_systems.words`), a Korean one with a particle after it too ("민수는").

    Every word of the text counts, repeated ones too: "the guard" is said in "the inn and the
    guard" (the search's own words are each taken once, which would lose it)."""
    spoken = f" {' '.join(writing_systems.words(text))} "
    found = []
    for entity_id, name in sorted(names.items()):
        said = writing_systems.words(name)
        if said and writing_systems.says(spoken, said):
            found.append(entity_id)
    return found


def declared_named_in(text: str, declared: Mapping[str, EntityDeclaration]) -> list[str]:
    """`named_in` over the names `declared` gives (an entity declared without one is named by
    none): the cues a recall's query, or a decision's line, says."""
    names = {entity: found.name for entity, found in declared.items() if found.name is not None}
    return named_in(text, names)


def search_scope(keys: MemoryKeys, ancestry: Ancestry, character: str) -> SearchScope:
    return SearchScope(keys.tenant_id, keys.world_id, character, ancestry, keys.persistent_upto)


@dataclass(frozen=True, slots=True)
class Recalling:
    """A recall searched (steps 1 to 3), before its choice (step 5): the candidates a reranker
    may score (step 4), as the character holds them now."""

    text: str
    candidates: list[Candidate]
    now: int | None
    limit: int
    policy: Policy
    searched: SearchCounts

    def documents(self) -> list[str]:
        """What a reranker is shown of each candidate: its content as the character holds it
        (retold when faded: the detail a faded memory lost does not make it relevant)."""
        return [candidate.memory.content for candidate in self.candidates]

    def read(self, reranked: Sequence[float] | None = None) -> RecallRead:
        """The answer: chosen by the fused scores, or with `reranked`, a reranker's score of
        each candidate (`documents`), in their order."""
        chosen = choose(self.candidates, self.now, self.limit, self.policy, reranked)
        searched = self.searched
        if reranked is not None:
            searched = searched.model_copy(update={"reranked": len(reranked)})
        return RecallRead(memories=[recalled(one) for one in chosen], searched=searched)


def cue_ids(pieces: Sequence[str], known: Callable[[str], bool]) -> list[str]:
    """The entity ids `cues` names, given as the pieces its commas part (`a,b`): an id may hold
    commas itself (the contract allows any characters), so a run of pieces that, joined by
    their commas, names an entity of the world is that entity, the longest run first; every
    other piece is an id. Spaces around an id go, and empty pieces with them. Escaping cannot
    tell the commas apart: a client's form encoding escapes every comma (`%2C`)."""
    ids: list[str] = []
    start = 0
    while start < len(pieces):
        end = start + 1
        for longest in range(start + 2, len(pieces) + 1):
            joined = ",".join(pieces[start:longest]).strip()
            if len(joined) > MAX_ID_LENGTH:  # no id is longer: the pieces are ids of their own
                break
            if known(joined):
                end = longest
        cue = ",".join(pieces[start:end]).strip()
        if cue:
            ids.append(cue)
        start = end
    return ids


def recall(
    tx: StateTransaction,
    index: RecallIndex,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    query: RecallQuery,
    policy: Policy,
    as_of_seq: int | None = None,
) -> Recalling:
    """What `npc_id` recalls for `query` on the timeline (as of a position), up to its choice:
    `Recalling.read` chooses, with the scores of a reranker or without."""
    query.check()
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    index.catch_up(tx, keys)
    scope = search_scope(keys, ancestry, npc_id)
    if not index.holds_any(scope):
        raise NotFound(f"{npc_id!r} remembers nothing on timeline {timeline_id!r}")
    declared = StoredDeclarations(tx, tenant_id, world_id, ancestry).declared()

    def known(cue: str) -> bool:
        return (
            cue in declared
            or index.mentions(tenant_id, world_id, cue)
            or whereabouts.reported(tx, tenant_id, world_id, ancestry, cue)
        )

    asked = cue_ids(query.cues, known)
    for cue in asked:
        if not known(cue):
            raise BadRead(f"unknown cue {cue!r}: no entity of that id in this world")
    cues = list(dict.fromkeys([*asked, *declared_named_in(query.text, declared)]))
    candidates, now, searched = search(
        tx, index, keys, scope, query.text, cues, query.limit, policy
    )
    return Recalling(query.text, candidates, now, query.limit, policy, searched)


def search(
    tx: StateTransaction,
    index: RecallIndex,
    keys: MemoryKeys,
    scope: SearchScope,
    text: str,
    cues: Sequence[str],
    limit: int,
    policy: Policy,
) -> tuple[list[Candidate], int | None, SearchCounts]:
    """Steps 1 to 3 for a caught-up index: the candidates, the timeline's story now, and what
    each search found.

    Each search hands `SEARCH_DEPTH` memories on. When forgotten ones leave fewer candidates
    than wanted and a search had more to give, the searches run again, deeper (`SEARCH_DEPTHS`),
    and the fused ranking is walked anew: so a recall runs each search three times at most and
    works out the retention of at most 3 x (60 + 960 + 15,360) memories."""
    wanted = candidate_count(limit, policy.memory.recall.over_retrieve)
    now = story_now(tx, keys.tenant_id, keys.world_id, scope.ancestry)
    for depth in SEARCH_DEPTHS:
        rankings: dict[Search, list[str]] = {
            "cues": index.by_cues(scope, cues, depth) if cues else [],
            "words": index.by_words(scope, text, depth),
            "vectors": index.by_meaning(scope, text, depth) or [],
        }
        ranks = ranks_of(rankings)
        held = held_candidates(tx, keys, scope.ancestry, scope.character, fuse(ranks), now, policy)
        candidates = still_found(held, ranks, partial(index.finds, scope, text), wanted)
        if len(candidates) == wanted or all(len(found) < depth for found in rankings.values()):
            break
    searched = SearchCounts(
        cues=len(rankings["cues"]), words=len(rankings["words"]), vectors=len(rankings["vectors"])
    )
    return candidates, now, searched


RETOLD_SEARCHES: tuple[Search, ...] = ("words", "vectors")
"""The searches of a memory's content, which a faded memory holds retold (the detail gone)."""


FADED_BATCH = 64
"""How many candidates are taken at once once a faded one was scored down: those past the
first `wanted` may come before it now, and their faded ones are asked of together."""


def still_found(
    held: Iterable[Candidate],
    ranks: Ranks,
    finds: Callable[[Sequence[str]], list[Collection[Search]]],
    wanted: int,
) -> list[Candidate]:
    """The best `wanted` of the `held` candidates (in fused order), a faded one scored without
    the searches of its content that its content as held (`finds`) no longer answers: the
    index holds what was formed, and the detail a faded memory lost found it ("where is the
    old oak" found what the character holds as "item hidden at the inn"). Found by nothing
    it still holds, it is no candidate. The ranks of the others stay as each search gave them.
    Taken as they are needed: the first `wanted`, then `FADED_BATCH` at a time once one was
    scored down."""
    kept: list[Candidate] = []
    rescored = False
    answered: dict[str, Collection[Search]] = {}  # by content as held (faded ones share many)
    pending = iter(held)
    while batch := list(islice(pending, FADED_BATCH if rescored else wanted - len(kept))):
        retold = {c.memory.belief_id: c.memory.content for c in batch if _retold(c, ranks)}
        unasked = [content for content in dict.fromkeys(retold.values()) if content not in answered]
        answered.update(zip(unasked, finds(unasked) if unasked else [], strict=True))
        for candidate in batch:
            if len(kept) >= wanted and _fused_order(kept[wanted - 1]) < _fused_order(candidate):
                return kept[:wanted]  # the rest come after the `wanted`-th, however faded
            if (belief := candidate.memory.belief_id) in retold:
                found = answered[retold[belief]]
                searched = [search for search in RETOLD_SEARCHES if belief in ranks[search]]
                if lost := [search for search in searched if search not in found]:
                    candidate = replace(candidate, fused=fused_score(ranks, belief, lost))
                    rescored = True
                    if not candidate.fused:
                        continue
            insort(kept, candidate, key=_fused_order)
        if len(kept) >= wanted and not rescored:
            break  # in fused order: none after comes before them
    return kept[:wanted]


def _retold(candidate: Candidate, ranks: Ranks) -> bool:
    """Whether a candidate is faded and a search of its content found it."""
    belief = candidate.memory.belief_id
    return candidate.retention.state == "faded" and any(
        belief in ranks[search] for search in RETOLD_SEARCHES
    )


def _fused_order(candidate: Candidate) -> tuple[float, str]:
    return -candidate.fused, candidate.memory.belief_id


def held_candidates(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    character: str,
    fused: Iterable[tuple[str, float]],
    now: int | None,
    policy: Policy,
) -> Iterator[Candidate]:
    """The fused candidates the character holds at `now` and has not forgotten, in order,
    `diverging` judged on this timeline: worked out one by one as they are taken."""
    for belief_id, score in fused:
        memory = load_held(tx, keys, ancestry, character, belief_id)
        if memory is None:
            continue
        judged = diverging(tx, keys.tenant_id, keys.world_id, ancestry, memory)
        if judged != memory.diverging:
            memory = memory.model_copy(update={"diverging": judged})
        held = held_now(tx, keys, ancestry, memory, now, policy)
        if held.retention.state != "forgotten":
            yield Candidate(held.memory or memory, held.retention, score)


READ_FIELDS = set(BeliefRead.model_fields)
"""The fields of a memory a read shows."""
RETENTION_SCALE = 10_000
"""A retention is answered to 4 places."""


def shown_retention(value: float) -> float:
    """A retention to 4 places, rounded down: rounded to nearest, a faded memory just under the
    vivid threshold (0.49996) showed as 0.5, vivid, its content already retold. The float
    error of the scaling (0.29 x 10,000 is 2899.9999999999995) is rounded away first."""
    return math.floor(round(value * RETENTION_SCALE, 6)) / RETENTION_SCALE


def recalled(chosen: Chosen) -> RecalledMemory:
    """A chosen memory as recall answers it."""
    return RecalledMemory.model_validate(
        {
            **chosen.memory.model_dump(include=READ_FIELDS),
            "retention": shown_retention(chosen.retention),
            "score": chosen.score,
        }
    )
