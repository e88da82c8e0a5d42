"""The oracle's recall and decision (SPEC 8 to 10), as naive as the rest of `tests.oracle`.

Written from the spec and the documented choices, importing nothing of production but the
schemas. It works on the oracle's own memories (`tests.oracle.Oracle`): a recall is one pass
over the character's visible memories, with no index.

What it compares, and what it leaves out:
- retention: story time from `game_time` (a memory of an event without one: the story's "now"
  just before it), a timeline's "now" the story time of the latest event its ancestry saw
  with one; half-life 6 days x 2^(step-1), x4 for beliefs, x a
  variation in [0.8, 1.2] from the belief id (rumourmill documents the hash: blake2b of the id,
  8 bytes, person "retention", read as a share of 2^64 - 1); vivid / faded (retold, confidence
  x retention) / forgotten; the importance-5 floor; `memory.flaky` off holds everything exact
  (`tests.oracle.held`: the tellers of rumours hold their news by it too).
  Reinforcement: a `memory.recalled` event by the character naming the memory restarts its
  clock at the event's story time (untimed: the story's "now" just before it) and makes its
  half-life 1.5 times longer, each time.
- the searches: cues (the asked ids plus every declared name the query says as words, against
  `about`; most cues matched, then newest, then id); words, SQLite FTS5's bm25 written out
  (unicode61 tokens, k1 1.2, b 0.75, idf floored at 1e-6, over every memory of the world, best
  in billionths then id: rows whose words weigh alike tie whatever order the sum takes): the
  engine the spec asks for ranks by it, so the oracle names the formula instead of inventing
  another ranking; a word said by half the world's memories or more (its idf floored) finds
  none by itself beside a rarer one (a filler word is no relevance); vectors: both sides are
  fed the same test vectors (`Embed`, a one-hot bucket per text, so every cosine is exactly 0
  or 1), cosine below 0.3 finds nothing,
  best first then id; or vectors are off on both sides (no embedder: the search finds nothing).
- fusion 1 / 1 / 1.5 by reciprocal rank (offset 60) of each search's first 60, the first
  over_retrieve x limit (at most 60) memories not forgotten down the fused ranking as the
  candidates (forgotten ones take no place; while they leave too few and a search found as
  many as it was asked for, the same of each search's first 960, then 15,360), the choice by
  relevance (fused over the best candidate's), importance, retention and recency
  (1 / (1 + story days)), then story order;
  404 for a character holding nothing there, 400 for a cue neither declared, nor in any memory
  of the world, nor where anyone was reported (a character reported somewhere, a place someone
  was reported at); as of a position: the ancestry and the persistent memories cut there, "now" the
  story time seen up to it. The memories are the base oracle's fold, so a belief the referee
  weakened (SPEC 11) shows its weakened confidence from the line's position on.
- the decision: the event at `after_seq` on the timeline, its player, the character as its
  actor or target; knowledge = the most important memories about the player or the place
  (the event's, else where the character is), from the 60 most important about either (then
  newest), then the best scored recall of the event's words in story order, at most 10,
  forgotten never, none marked `diverging` (the record never reaches the model); the recall
  cues on what the character's memories of the event (not news spread there) are about or
  claim facts of, beside the names its words say (the character, the player and the place
  left out). The verdict, the recent turns and the prompt's wording are left to their own
  tests.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import Event
from schemas.policy import Policy
from tests.oracle import (
    MINUTES_PER_DAY,
    OMemory,
    Oracle,
    OracleNotFound,
    OWorld,
    belief_id,
    entity_kind,
    held,
    json_equal,
    retelling,
    shows,
)

SEARCH_WEIGHTS = {"cues": 1.0, "words": 1.0, "vectors": 1.5}
RANK_OFFSET = 60
DEPTH = 60
"""Each search hands at most 60 memories to fusion; at most 60 candidates go on."""
DEPTHS = (DEPTH, 16 * DEPTH, 256 * DEPTH)
"""While forgotten memories leave too few candidates and a search found as many as it was
asked for, the searches hand on the next of these and the fused ranking is walked again."""
KNOWLEDGE = 10
BM25_K1, BM25_B, IDF_FLOOR, BM25_GRID = 1.2, 0.75, 1e-6, 10**9


Embed = Callable[[str], Sequence[float]]
"""A text's unit vector, the same the production index is given."""
MIN_COSINE = 0.3


class OracleBadRead(Exception):
    """The read is a 400."""


# ================================================================ searches


def fts_tokens(text: str) -> list[str]:
    """SQLite's unicode61 tokens: runs of letters and digits, case folded, accents removed."""
    plain = "".join(
        char for char in unicodedata.normalize("NFKD", text) if not unicodedata.combining(char)
    )
    return re.findall(r"[^\W_]+", plain.lower())


def query_words(text: str) -> list[str]:
    """The query's words as the engine folds the content's (its tokens), each once: all of them
    (rumourmill keeps the 500 rarest in the world of a text saying more, which no query of
    1,000 characters does and no world here reaches)."""
    return list(dict.fromkeys(fts_tokens(text)))


UNSPACED_SCRIPTS = (
    "CJK UNIFIED",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "HENTAIGANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
)
"""Scripts written without spaces, by their characters' Unicode names: each character a word."""


def words_of(text: str) -> list[str]:
    """The words of a text as a reader of each script would part them: a character of a script
    written without spaces, with the combining marks on it, is a word; compatibility-composed,
    case folded."""
    words: list[str] = []
    spaced = ""
    cluster: str | None = None  # a character of a script without spaces, gathering its marks
    for character in unicodedata.normalize("NFKC", text):
        if cluster is not None and unicodedata.category(character).startswith("M"):
            cluster += character
            continue
        if cluster is not None:
            words.append(cluster)
            cluster = None
        if re.fullmatch(r"\w", character) is None:
            if spaced and unicodedata.category(character).startswith("M"):
                spaced += character  # a vowel sign on a letter of a spaced script
                continue
            words += [spaced] if spaced else []
            spaced = ""
        elif unicodedata.name(character, "").startswith(UNSPACED_SCRIPTS):
            words += [spaced] if spaced else []
            spaced, cluster = "", character
        else:
            spaced += character
    words += [word for word in (spaced, cluster) if word]
    return [word.casefold() for word in words]


KOREAN_PARTICLES = [
    "은",
    "는",
    "이",
    "가",
    "을",
    "를",
    "의",
    "에",
    "엔",
    "에게",
    "에겐",
    "에서",
    "에게서",
    "께",
    "께서",
    "한테",
    "한텐",
    "한테서",
    "와",
    "과",
    "랑",
    "이랑",
    "하고",
    "도",
    "만",
    "로",
    "으로",
    "론",
    "부터",
    "까지",
    "보다",
    "처럼",
    "밖에",
    "야",
    "아",
    "이야",
    "여",
    "이여",
    "씨",
    "님",
    "네",
    "라고",
    "이라고",
    "요",
    "이요",
]
PARTICLES_JOINED = re.compile(f"(?:{'|'.join(KOREAN_PARTICLES)}){{1,3}}")
"""One to three of Korean's particles and suffixes, one after another."""


def says_name(said: list[str], words: list[str], at: int) -> bool:
    """Whether the name's `words` are said from word `at` of `said`: a name ending in Hangul
    may have one of Korean's particles joined to its last word ("민수는")."""
    run = said[at : at + len(words)]
    if len(run) < len(words) or run[:-1] != words[:-1]:
        return False
    last = words[-1]
    if run[-1] == last:
        return True
    joined = run[-1][len(last) :] if run[-1].startswith(last) else ""
    hangul = "\uac00" <= last[-1] <= "\ud7a3" and len(last) > 1  # "나" is I as often
    return hangul and PARTICLES_JOINED.fullmatch(joined) is not None


def names_said(text: str, names: dict[str, str]) -> list[str]:
    """Ids whose declared name the text says: the name's words, in a row, among the text's."""
    said = words_of(text)
    found = []
    for entity, name in sorted(names.items()):
        words = words_of(name)
        if words and any(says_name(said, words, at) for at in range(len(said))):
            found.append(entity)
    return found


def by_cues(mine: list[OMemory], cues: Sequence[str]) -> list[str]:
    matched = [(sum(c in m.about for c in set(cues)), m) for m in mine]
    ranked = sorted(
        ((n, m) for n, m in matched if n), key=lambda p: (-p[0], -p[1].seq, p[1].belief_id)
    )
    return [m.belief_id for _, m in ranked]


def said_by(tokens: list[str], phrase: list[str]) -> int:
    """How many times the tokens say the phrase."""
    width = len(phrase)
    return sum(tokens[at : at + width] == phrase for at in range(len(tokens) - width + 1))


def finding_words(mine: list[OMemory], every: list[OMemory], words: Sequence[str]) -> list[str]:
    """The words that find memories: beside a rarer word that one of `mine` says, a word said
    by half the world's memories (`every`) or more finds none by itself; otherwise (no rarer
    word, or none of `mine` says one) every word does."""
    rows = [fts_tokens(m.content) for m in every]
    hits = {word: sum(1 for tokens in rows if said_by(tokens, fts_tokens(word))) for word in words}
    common = [word for word in words if hits[word] and hits[word] >= len(rows) * 0.5]
    rare = [word for word in words if 0 < hits[word] < len(rows) * 0.5]
    if common and any(
        said_by(fts_tokens(m.content), fts_tokens(word)) for m in mine for word in rare
    ):
        return rare
    return list(words)


def by_words(mine: list[OMemory], every: list[OMemory], words: Sequence[str]) -> list[str]:
    """bm25 of the words (each a phrase of its tokens) over `mine`, with the statistics of
    `every` memory of the world (the whole table), of the memories the `finding_words` say."""
    rows = [fts_tokens(m.content) for m in every]
    if not mine or not rows:
        return []
    average = sum(map(len, rows)) / len(rows)
    phrases = [fts_tokens(word) for word in words]
    count = said_by
    finding = set(finding_words(mine, every, words))
    idf = []
    for phrase in phrases:
        hits = sum(1 for tokens in rows if phrase and count(tokens, phrase))
        value = math.log((len(rows) - hits + 0.5) / (hits + 0.5))
        idf.append(value if value > 0 else IDF_FLOOR)
    scored = []
    for memory in mine:
        tokens = fts_tokens(memory.content)
        frequencies = [count(tokens, phrase) if phrase else 0 for phrase in phrases]
        if not any(freq for freq, word in zip(frequencies, words, strict=True) if word in finding):
            continue
        score = 0.0
        for weight, freq in zip(idf, frequencies, strict=True):
            length_norm = 1 - BM25_B + BM25_B * len(tokens) / average
            score += weight * ((freq * (BM25_K1 + 1.0)) / (freq + BM25_K1 * length_norm))
        scored.append((on_grid(-score), memory.belief_id))
    return [belief for _, belief in sorted(scored)]


def on_grid(score: float) -> int:
    """A bm25 score in billionths, as SQLite's `round(X)` rounds: half away from zero."""
    scaled = score * BM25_GRID
    return int(scaled - 0.5) if scaled < 0 else int(scaled + 0.5)


def by_meaning(mine: list[OMemory], text: str, embed: Embed | None) -> list[str]:
    """Memories by cosine with the text, best first then id, none below 0.3."""
    if embed is None:
        return []
    asked = embed(text)
    scored = []
    for memory in mine:
        cosine = sum(a * b for a, b in zip(embed(memory.content), asked, strict=True))
        if cosine >= MIN_COSINE:
            scored.append((-cosine, memory.belief_id))
    return [belief for _, belief in sorted(scored)]


def fused(rankings: dict[str, list[str]]) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for search, ranked in rankings.items():
        for rank, found in enumerate(ranked, start=1):
            scores[found] = scores.get(found, 0.0) + SEARCH_WEIGHTS[search] / (RANK_OFFSET + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


# ================================================================ recall and decision


@dataclass
class View:
    """What a read on a timeline (as of a position) sees."""

    world: OWorld
    mine: list[OMemory]
    every: list[OMemory]
    folded: dict[str, Any]
    now: int | None
    segments: list[tuple[str, int]]
    recalls: dict[str, list[int]]
    """The story minutes each of the character's memories was recalled at, by belief id."""

    def held(self, memory: OMemory, policy: Policy) -> tuple[float, str]:
        return held(memory, self.now, policy, self.recalls.get(memory.belief_id, []))


def view(
    oracle: Oracle, tenant: str, world_id: str, timeline: str, npc: str, upto: int | None
) -> View:
    """What `npc` sees on the timeline (as of `upto`): 404 for a timeline never seen, 400 for
    a position not processed yet."""
    world = oracle.worlds.get((tenant, world_id))
    if world is None or timeline not in world.timelines:
        raise OracleNotFound(timeline)
    line = world.timelines[timeline]
    reached = oracle.reached_seq(world, timeline)
    if upto is not None and upto > reached:
        raise OracleBadRead(f"as_of {upto} beyond {reached}")
    segments = oracle.ancestry(world, timeline, line.processed if upto is None else upto)
    folded = oracle._fold(world, segments)
    limit = line.processed if upto is None else upto
    visible: list[OMemory] = folded["memories"]  # the referee's weakenings as of the read
    if upto is not None:  # persistent memories as of a position: those formed up to it
        visible = [m for m in visible if not m.persistent or m.seq <= limit]
    every: dict[tuple[str, str], OMemory] = {}
    for item in world.applied:
        for memory in item.memories:
            every.setdefault((memory.character, memory.belief_id), memory)
    recalls = {  # the oracle's: for what `npc` held before each recall of it
        belief: minutes for (actor, belief), minutes in folded["recalls"].items() if actor == npc
    }
    return View(
        world,
        [m for m in visible if m.character == npc],
        list(every.values()),
        folded,
        folded["now"],
        segments,
        recalls,
    )


def shown(memory: OMemory, retention: float, state: str, record: dict[Any, Any]) -> dict[str, Any]:
    diverging = any(
        (f.subject, f.attribute) in record
        and not json_equal(record[(f.subject, f.attribute)], f.value)
        for f in memory.facts
    )
    read = memory.read(diverging)
    if state == "faded":
        read["content"] = retelling(memory.content)
        read["confidence"] = round(memory.confidence * retention, 2)
    return read


def cut(rankings: dict[str, list[str]], depth: int) -> dict[str, list[str]]:
    return {name: found[:depth] for name, found in rankings.items()}


def finds(
    search: str, content: str, text: str, embed: Embed | None, finding: Sequence[str]
) -> bool:
    """Whether the search by words (a token of the `finding` words of the text) or by meaning
    (cosine 0.3) finds a memory saying `content`."""
    if search == "words":
        return not set(fts_tokens(content)).isdisjoint(finding)
    if embed is None:
        return False
    return sum(a * b for a, b in zip(embed(content), embed(text), strict=True)) >= MIN_COSINE


def choose(
    view_: View,
    rankings: dict[str, list[str]],
    limit: int,
    policy: Policy,
    text: str,
    embed: Embed | None,
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Steps 2 to 5 over every memory each search found: the candidates, scored, the best
    `limit`, in story order; and the searches as fused. A faded memory gains nothing from the
    search by words or by meaning its retold content would not be found by (the others'
    ranks as the searches gave them), and found so by nothing, is no candidate."""
    weights = policy.memory.recall.weights
    by_id = {m.belief_id: m for m in view_.mine}
    finding = finding_words(view_.mine, view_.every, query_words(text))
    wanted = min(DEPTH, policy.memory.recall.over_retrieve * limit)
    for depth in DEPTHS:
        handed = cut(rankings, depth)
        candidates = []
        for belief, relevance in fused(handed):
            retention, state = view_.held(by_id[belief], policy)
            if state == "forgotten":
                continue
            if state == "faded":
                held = retelling(by_id[belief].content)
                relevance = 0.0  # summed in the searches' order, as `fused` sums
                for search, found in handed.items():
                    if belief in found and (
                        search == "cues" or finds(search, held, text, embed, finding)
                    ):
                        relevance += SEARCH_WEIGHTS[search] / (
                            RANK_OFFSET + found.index(belief) + 1
                        )
                if not relevance:
                    continue
            candidates.append((by_id[belief], relevance, retention, state))
        candidates.sort(key=lambda one: (-one[1], one[0].belief_id))
        candidates = candidates[:wanted]
        if len(candidates) == wanted or all(len(found) < depth for found in rankings.values()):
            break
    best = max((relevance for _, relevance, _, _ in candidates), default=0.0) or 1.0
    chosen = []
    for memory, relevance, retention, state in candidates:
        since = memory.minute
        recency = (
            1.0
            if since is None or view_.now is None
            else 1 / (1 + max(0, view_.now - since) / MINUTES_PER_DAY)
        )
        score = round(
            weights.relevance * relevance / best
            + weights.importance * memory.importance
            + weights.retention * retention
            + weights.recency * recency,
            6,
        )
        read = shown(memory, retention, state, view_.folded["record"])
        shown_retention = math.floor(round(retention * 10_000, 6)) / 10_000  # rounded down
        chosen.append((memory.minute, {**read, "retention": shown_retention, "score": score}))
    chosen.sort(key=lambda one: (-one[1]["score"], one[1]["belief_id"]))
    return [one for _, one in sorted(chosen[:limit], key=story_key)], handed


def story_key(chosen: tuple[int | None, dict[str, Any]]) -> tuple[int, int, str]:
    """Story time (the minute a memory was formed at: none first), then position, then id."""
    minute, one = chosen
    return -1 if minute is None else minute, one["seq"], one["belief_id"]


def recall(
    oracle: Oracle,
    tenant: str,
    world_id: str,
    timeline: str,
    npc: str,
    text: str,
    cues: Sequence[str] = (),
    limit: int = 10,
    embed: Embed | None = None,
    as_of: int | None = None,
) -> dict[str, Any]:
    """The recall answer (no vectors without `embed`), as of a position if given."""
    if not text.strip() or len(text) > 1000 or not 1 <= limit <= 50:
        raise OracleBadRead(text)
    seen = view(oracle, tenant, world_id, timeline, npc, as_of)
    if not seen.mine:
        raise OracleNotFound(npc)
    declared = seen.folded["declared"]
    reported = {*seen.folded["where"], *seen.folded["places"]}
    for cue in cues:
        if (
            cue not in declared
            and cue not in reported
            and not any(cue in m.about for m in seen.every)
        ):
            raise OracleBadRead(cue)
    names = {entity: d["name"] for entity, d in declared.items() if d.get("name") is not None}
    asked = list(dict.fromkeys([*cues, *names_said(text, names)]))
    rankings = {
        "cues": by_cues(seen.mine, asked),
        "words": by_words(seen.mine, seen.every, query_words(text)),
        "vectors": by_meaning(seen.mine, text, embed),
    }
    memories, handed = choose(seen, rankings, limit, oracle.policy, text, embed)
    return {
        "memories": memories,
        "searched": {**{name: len(found) for name, found in handed.items()}, "reranked": 0},
    }


def decision(
    oracle: Oracle,
    tenant: str,
    world_id: str,
    timeline: str,
    npc: str,
    after_seq: int,
    player_id: str | None = None,
    embed: Embed | None = None,
) -> list[dict[str, Any]]:
    """The knowledge of a decision context (no vectors without `embed`)."""
    seen = view(oracle, tenant, world_id, timeline, npc, after_seq)
    event = next(
        (
            item.event
            for item in oracle.history(seen.world, seen.segments)
            if item.event.seq == after_seq
        ),
        None,
    )
    if event is None:
        raise OracleBadRead(f"no event at {after_seq}")
    if npc not in (event.target, event.actor) or npc in event.players:
        raise OracleNotFound(npc)  # before the player is looked for: no character to decide
    kind = entity_kind(npc, event.players, seen.folded["declared"], oracle.policy)
    if kind != "character" and not seen.mine:
        raise OracleNotFound(npc)  # an item, a place, an id of no kind, holding no memory
    player = the_player(event, player_id)
    policy = oracle.policy
    place = event.location or seen.folded["where"].get(npc)
    entities = [entity for entity in (player, place) if entity is not None]
    about = [m for m in seen.mine if any(entity in m.about for entity in entities)]
    for depth in DEPTHS:  # deeper when forgotten ones leave too few
        found = {m.belief_id for m in sorted(about, key=importance_order)[:depth]}
        kept = []
        for memory in seen.mine:
            if memory.belief_id in found:
                retention, state = seen.held(memory, policy)
                if state != "forgotten":
                    kept.append(shown(memory, retention, state, seen.folded["record"]))
        if len(kept) >= KNOWLEDGE or len(about) <= depth:
            break
    knowledge = sorted(kept, key=lambda m: (-m["importance"], -m["seq"], m["belief_id"]))
    said = [event.payload.get(name) for name in ("text", "content")]
    words = next(
        (line for line in said if isinstance(line, str) and shows(line)),
        " ".join(event.key.replace(".", " ").replace("-", " ").split()),
    )
    declared = seen.folded["declared"]
    names = {entity: d["name"] for entity, d in declared.items() if d.get("name") is not None}
    # what the character's memories of the event are about or claim facts of cue too (but the
    # character, the player and the place), beside the names its words say
    holding = next(line for line, upto in reversed(seen.segments) if after_seq <= upto)
    # formed by the event: not the news spread to the character at the same position
    formed = [
        m
        for m in seen.mine
        if m.belief_id == belief_id(tenant, world_id, holding, after_seq, npc, m.kind)
    ]
    named = [
        *names_said(words, names),
        *(entity for m in formed for entity in m.about),
        *(fact.subject for m in formed for fact in m.facts),
    ]
    cued = [entity for entity in dict.fromkeys(named) if entity not in (npc, player, place)]
    rankings = {
        "cues": by_cues(seen.mine, cued),
        "words": by_words(seen.mine, seen.every, query_words(words)),
        "vectors": by_meaning(seen.mine, words, embed),
    }
    knowledge = knowledge[:KNOWLEDGE]
    taken = {one["belief_id"] for one in knowledge}
    recalled, _ = choose(seen, rankings, KNOWLEDGE, policy, words, embed)
    best = sorted(
        (one for one in recalled if one["belief_id"] not in taken),
        key=lambda one: (-one["score"], one["belief_id"]),
    )[: KNOWLEDGE - len(knowledge)]
    in_story_order = {one["belief_id"]: place for place, one in enumerate(recalled)}
    knowledge += sorted(best, key=lambda one: in_story_order[one["belief_id"]])
    return [{k: v for k, v in one.items() if k not in NOT_GIVEN} for one in knowledge]


NOT_GIVEN = ("retention", "score", "diverging")
"""What a decision model is not given of a memory: how it was chosen, and whether it agrees
with the world record (the record never reaches the model)."""


def importance_order(memory: OMemory) -> tuple[float, int, str]:
    """Most important first, then newest, then by id."""
    return -memory.importance, -memory.seq, memory.belief_id


def the_player(event: Event, player_id: str | None) -> str:
    if player_id is not None:
        if player_id not in event.players:
            raise OracleBadRead(player_id)
        return player_id
    if len(event.players) != 1:
        raise OracleBadRead("players")
    return event.players[0]
