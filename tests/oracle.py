"""A reference oracle: a deliberately naive, obviously-correct model of rumourmill's memory.

Written from SPEC.md (sections 2 to 7, and 8 for what tellers still hold), seed 001 and the
README ("The rules, in short", "Policies"), not from `projections/`: it imports nothing of
production but the schemas (the event contract, and the policy model with its defaults and
weighing table). Every rule it
checks has its own naive version here, written for plainness, not speed:

- ids: a memory's `belief_id` from its position, holder and kind; the origin of news from the
  event that started it; a rumour's id from where it was heard, by whom, and what news;
- the catalogue: players first, then a declared kind, then the policy's id patterns; names;
- wording: the event as a sentence ("Ilse enemy defeated at The Crooked Lantern (enemy:
  npc-drunk-sailor)"), the words said for a conversation; a retelling keeps the statement and
  drops the detail (quoted words, parenthesised details);
- weighing: the kind read off the key's words, the policy's table by the character's part,
  confidence by how it was learned, a retelling's as the teller's times `retelling_factor`;
- perception, memory formation, impressions, "already knows", persistence;
- rumours: who meets, what passes at a meeting and in a group, what a teller still holds of
  its news (retention, SPEC 8), how a listener keeps it, and seeded distortion;
- sequencing, ancestry folds, the world record, `diverging`, relations, caps, ordering, 404s;
- the referee (SPEC 11): which beliefs a player's line challenges, the rules verdict, what it
  does to the line and, as of the line's position, to the beliefs it weakens.

It keeps the whole list of events and every memory each formed; a read on a timeline is one
fold over the events of its ancestry (its own, then each ancestor's up to its branch point) in
position order, with no index.

Where the spec leaves a choice open, the oracle takes the one rumourmill documents (README,
module docstrings); each such choice is named where it is made:
- a conversation (`told`, `player-said`) is heard by its target and named witnesses only, never
  by bystanders at the location and never by the speaker;
- declarations go to the catalogue of the timeline they were made on, seen by its descendants
  up to the branch point (never world-wide), a later one changing the fields it gives (a
  field given as null is cleared); persistent memories join the world-wide scope in
  the order events are applied;
- ids are blake2b (16 bytes) over their parts packed as rumourmill packs its keys; a retold
  confidence is shown to 2 decimals (half up); news passed on (a `told`, a rumour) is weighed
  as `heard` by the kind it tells of;
- rumours: a character's news is its memories but impressions, newest first (by position, then
  by id, highest first), held as recall holds them (SPEC 8) at the event's story time (else the
  story's now just before it): forgotten news is left out, faded news told retold at confidence
  x retention; a teller offers the `per_meeting` newest it holds among its 16 x `per_meeting`
  newest at a meeting; in a group each member offers what it holds of its `group_exchange_limit`
  newest, then of twice as many, up to 16 x the limit, while fewer than the limit pieces some
  member lacks are found; the group exchange comes first, once
  per game-time interval on a timeline's ancestry, then the meetings, each pair (a, b) in id
  order, a telling b then b telling a; a listener never takes in news it knows, news that came
  through it, or news about it alone;
- "already knows" (a `told`, a rumour): the listener holds a memory of the news, not an
  impression, that it has not forgotten at the event's story time (else the story's now just
  before it): news it forgot can reach it again;
- a `told` without `belief_id` passes on the teller's memory of the news its claim is of, as a
  `told` naming it would: of the teller's memories of that origin, not impressions, those it
  has not forgotten at the event's story time, as it holds them (faded: retold, confidence x
  retention), the fewest hops, then the surest, then the newest (by position, then the smallest
  id); a teller holding none tells it as news of its own (one hop, the `told` confidence);
  a `told` naming a memory passes it on as its teller holds it at the event likewise (faded:
  retold, confidence x retention; forgotten: as news of its own); naming one the teller does
  not hold (or forgot), with no words and no claimed fact, it passes nothing;
- an eyewitness's memory holds the event's facts one value per subject and attribute, the last.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from fnmatch import fnmatchcase
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from schemas import EntityDeclaration, Event, Fact
from schemas.events import Branch
from schemas.policy import Policy

LOCATION_ENTERED = "loreweaver.movement.location-entered"
CHARACTER_ENTERED = "loreweaver.movement.character-entered-location"
MOVEMENT = {LOCATION_ENTERED, CHARACTER_ENTERED}
TOLD = "loreweaver.conversation.told"
PLAYER_SAID = "loreweaver.conversation.player-said"
CONVERSATION = {TOLD, PLAYER_SAID}
NPC_REPLIED = "loreweaver.conversation.npc-replied"
SPOKEN = CONVERSATION | {NPC_REPLIED}
"""Words said to the target: heard by it and named witnesses only, never by the speaker."""
DECLARED = "world.entity-declared"
MET = "loreweaver.social.characters-met"
"""A meeting: with spreading on it passes news on; it is not news itself (no memory)."""
RECALLED = "loreweaver.memory.recalled"
"""The actor brought `payload.belief_ids` to mind (their clocks restart): no memory either."""
SUMMARISED = "loreweaver.memory.dialogue-summarised"
"""A dialogue scope's summary (short-term dialogue's bookkeeping): no memory."""
MET_FIELD = "characters"
"""The payload field of `characters-met` that may name more characters who met."""
MOST_MET = 32
"""A `characters-met` naming more ids than this is no meeting (everyone would meet everyone)."""
FARTHEST_HOPS = 32
"""News this many hops from its start is passed on no further, by a `told` or a meeting."""
DESCRIBED_AT_MOST = 2000
"""The most characters an event described in words takes (names in place of ids)."""
MOST_ABOUT = MOST_FACTS = 64
"""A memory is about its first 64 entities and keeps its first 64 facts."""
SPOKEN_FIELD = {TOLD: "content", PLAYER_SAID: "text"}
MAX_EVENT_BYTES = 256 * 1024
MAX_BELIEFS, MAX_RECOLLECTIONS, MAX_RELATIONS = 50, 20, 50
READ_FIELDS = (
    "belief_id",
    "kind",
    "content",
    "about",
    "source",
    "source_entity",
    "hops",
    "confidence",
    "importance",
    "feeling",
    "arousal",
    "diverging",
    "uncertain",
    "seq",
    "game_time",
    "persistent",
)

Names = Callable[[str], str]
Kinds = Callable[[str], str]


# ================================================================ ids


def packed(*parts: str | int) -> bytes:
    """The parts as rumourmill packs a stored key: a string is 0x02, its UTF-8 bytes (a NUL
    written 00 ff) and 0x00; a number is 0x15 and its 8 bytes, big-endian."""
    out = b""
    for part in parts:
        if isinstance(part, int):
            out += b"\x15" + part.to_bytes(8, "big")
        else:
            out += b"\x02" + part.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00"
    return out


def hashed(*parts: str | int) -> bytes:
    return hashlib.blake2b(packed(*parts), digest_size=16).digest()


def belief_id(tenant: str, world: str, timeline: str, seq: int, character: str, kind: str) -> str:
    """The id of the `kind` memory a character formed at a position (SPEC 4)."""
    return hashed("belief", tenant, world, timeline, seq, character, kind).hex()


def origin_id(event: Event) -> str:
    """The news an event starts (what it shows, or the claim it makes)."""
    return hashed(
        "origin", event.tenant_id, event.world_instance_id, event.timeline_id, event.seq
    ).hex()


def claimed_facts(event: Event) -> list[Fact]:
    """The facts a conversation's payload claims (those that read as facts)."""
    claims = event.payload.get("facts")
    facts = []
    for claim in claims if isinstance(claims, list) else []:
        try:
            facts.append(Fact.model_validate(claim))
        except ValidationError:
            continue
    return facts


def whole_as_int(value: Any) -> Any:
    """A JSON value with each whole float as an int: 100.0 claims what 100 claims."""
    if isinstance(value, float) and value == int(value) and abs(value) < 2**63:
        return int(value)
    if isinstance(value, list):
        return [whole_as_int(item) for item in value]
    if isinstance(value, dict):
        return {key: whole_as_int(item) for key, item in value.items()}
    return value


def claim_origin(event: Event, facts: list[Fact], about: list[str]) -> str:
    """The news a `told` starts when no memory of the teller stands behind it: the claim
    itself (its facts and whom it is about; its words too when it claims no fact)."""
    canonical = {
        (
            f.subject,
            f.attribute,
            json.dumps(whole_as_int(f.value), sort_keys=True, separators=(",", ":")),
        )
        for f in facts
    }
    said = spoken(event)
    if said is not None:
        words = " ".join(said.split()).casefold()
    else:  # what was sent in place of words (or the whole payload): each such claim its own
        rest = {k: v for k, v in event.payload.items() if k not in ("about", "facts")}
        sent = event.payload.get(SPOKEN_FIELD.get(event.key, ""), rest)
        words = json.dumps(
            whole_as_int(sent), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    claim = {
        "about": sorted(set(about)),
        "facts": [list(f) for f in sorted(canonical)],
        "words": None if facts else words,
    }
    text = json.dumps(claim, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    whole = packed("claim", event.tenant_id, event.world_instance_id) + text.encode("utf-8")
    return hashlib.blake2b(whole, digest_size=16).hexdigest()


def rumour_id(event: Event, listener: str, origin: str) -> str:
    """The id of the rumour `listener` heard at `event`: one per piece of news."""
    return hashed(
        "rumour",
        event.tenant_id,
        event.world_instance_id,
        event.timeline_id,
        event.seq,
        listener,
        origin,
    ).hex()


# ================================================================ the catalogue


def entity_kind(
    entity: str, players: Iterable[str], declared: dict[str, dict[str, Any]], policy: Policy
) -> str:
    """A player if the event lists it, else its declared kind, else the first kind whose id
    pattern matches (SPEC 2), else unknown."""
    if entity in players:
        return "player"
    kind = declared.get(entity, {}).get("kind")
    if kind is not None:
        return str(kind)
    for kind, patterns in policy.memory.entity_patterns.items():
        for pattern in patterns:
            if fnmatchcase(entity, pattern):
                return kind
    return "unknown"


def redeclared(
    earlier: dict[str, Any], declaration: EntityDeclaration, player: bool
) -> dict[str, Any]:
    """A declaration over an earlier one: each field it gives wins, one given as null is
    cleared, one it leaves out stays; a kind given to an id the event lists as a `player` is
    left out (its kind stays as it was)."""
    given = declaration.model_dump(exclude_unset=True)
    if player and given.get("kind") not in (None, "player"):
        del given["kind"]
    merged = earlier | given
    return {field: value for field, value in merged.items() if value is not None}


def entity_name(entity: str, declared: dict[str, dict[str, Any]]) -> str:
    return str(declared.get(entity, {}).get("name", entity))


# ================================================================ wording


def spoken(event: Event) -> str | None:
    """What was said in a conversation (`told` content, `player-said` text), if anything."""
    if event.key not in SPOKEN_FIELD:
        return None
    words = event.payload.get(SPOKEN_FIELD[event.key])
    if isinstance(words, str) and shows(words):
        return words
    return None


SHOWING_NOTHING = {"\u034f", "\u115f", "\u1160", "\u2800", "\u3164", "\uffa0"} | {
    chr(point) for point in [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
}
"""Blank fillers and joiners, variation selectors: no whitespace, and they show nothing."""
WRITTEN_FORMATS = {
    chr(point) for point in [*range(0x600, 0x606), 0x6DD, 0x70F, 0x890, 0x891, 0x8E2]
}


def shows(words: str) -> bool:
    """Whether words show anything: not only whitespace, control characters, format
    characters (zero-width spaces, a byte-order mark; the prepended number marks of Arabic and
    Syriac are written) and blanks."""
    return any(
        not char.isspace()
        and char not in SHOWING_NOTHING
        and unicodedata.category(char) != "Cc"
        and (unicodedata.category(char) != "Cf" or char in WRITTEN_FORMATS)
        for char in words
    )


def sentence(event: Event, name: Names) -> str:
    """An event in words (seed 001): actor, the key's last part, target, "at" place, then the
    payload in brackets, names for ids, cut to `DESCRIBED_AT_MOST` characters (an ellipsis, then
    the quotation and the parentheses the cut left open closed); a conversation is remembered as
    what was said, cut alike."""
    said = spoken(event)
    words = []
    if event.actor is not None:
        words.append(name(event.actor))
    words.append(event.key.split(".")[-1].replace("-", " "))
    if event.target is not None:
        words.append(name(event.target))
    if event.location is not None:
        words.append("at")
        words.append(name(event.location))
    if event.payload:
        details = [f"{field}: {in_words(value, name)}" for field, value in event.payload.items()]
        words.append("(" + ", ".join(details) + ")")
    described = " ".join(words) if said is None else said
    if len(described) <= DESCRIBED_AT_MOST:
        return described
    for end in range(DESCRIBED_AT_MOST - 1, 0, -1):  # what the cut left open closed after "…"
        shown = described[:end].rstrip()
        still_open: list[str] = []  # what closes each bracket left open, innermost first
        closing = ""
        index = 0
        while index < len(shown):
            close_at = quotation_end(described, index)
            if close_at is None:  # not a quotation: a bracket counts, each kind paired apart
                if shown[index] in BRACKETS:
                    still_open.insert(0, BRACKETS[shown[index]])
                elif shown[index] in still_open:
                    still_open.remove(shown[index])
                index += 1
            elif close_at >= len(shown):  # the cut is inside this quotation
                closing = QUOTATION_CLOSED_BY[shown[index]][0]
                break
            else:
                index = close_at + 1
        if len(shown) + 1 + len(closing) + len(still_open) <= DESCRIBED_AT_MOST:
            return shown + "…" + closing + "".join(still_open)
    return "…"


BRACKETS = {"(": ")", "\uff08": "\uff09"}
"""The brackets a retelling drops with what they hold (full width: Chinese, Japanese)."""


def in_words(value: Any, name: Names) -> str:
    if isinstance(value, str):
        return name(value)
    if isinstance(value, list) and value:
        items = [in_words(item, name) for item in value]
        if len(items) == 1:
            return items[0]
        return ", ".join(items[:-1]) + " and " + items[-1]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def passed_on(memory: OMemory, name: Names) -> str:
    """A memory's words as its holder passes them on: a player's line in the player's name."""
    if memory.source == "player" and memory.source_entity is not None:
        spoke = " ".join(without_quotation_marks(name(memory.source_entity)).split())
        return f"{spoke or 'someone'} said: {retelling(memory.content)}"
    return retelling(memory.content)


def retelling(content: str) -> str:
    """The statement without its detail: quoted words become "something", a parenthesised
    detail goes with the space before it, spaces collapse; if nothing is left, as it was. A
    content that is one quotation whole is the statement: what it quotes, told so."""
    whole = content.strip()
    if whole and quotation_end(whole, 0) == len(whole) - 1 and whole[1:-1].strip():
        return retelling(whole[1:-1])
    kept = each_quotation(content, lambda quoted: "something")
    for opening, closing in (("(", ")"), ("\uff08", "\uff09")):  # then the full-width ones (CJK)
        unquoted, kept, index = kept, "", 0
        while index < len(unquoted):
            end = None
            if unquoted[index] == opening:
                end = closing_bracket(unquoted, index, opening, closing)
            if end is None:
                kept += unquoted[index]
                index += 1
            else:
                kept = kept.rstrip()
                index = end + 1
    told = " ".join(kept.split())
    return told if told else content


QUOTATION_CLOSED_BY = {
    '"': '"',
    "“": "”",
    "«": "»",
    "»": "«",
    "„": "“”",
    "「": "」",
    "『": "』",
    "\N{LEFT SINGLE QUOTATION MARK}": "\N{RIGHT SINGLE QUOTATION MARK}",
}
"""Each mark that opens a quotation, and those that close it (a straight single quote is no
quotation mark: it is an apostrophe as often)."""
SINGLE_QUOTED_AT_MOST = 200


def quotation_end(text: str, start: int) -> int | None:
    """Where the quotation opening at `start` closes, if one opens there: at the first closing
    mark, unless another opening of its kind comes first (then none opens here). A single one
    closes before no letter (its closing mark is an apostrophe too), on its line, within
    `SINGLE_QUOTED_AT_MOST` characters."""
    opening = text[start]
    closing = QUOTATION_CLOSED_BY.get(opening)
    if closing is None:
        return None
    single = opening == "\N{LEFT SINGLE QUOTATION MARK}"
    last = start + SINGLE_QUOTED_AT_MOST + 1 if single else len(text) - 1
    for end in range(start + 1, min(len(text) - 1, last) + 1):
        if text[end] in closing:
            if not single or end + 1 == len(text) or not _word_character(text[end + 1]):
                return end
        elif text[end] == opening or (single and text[end] == "\n"):
            return None
    return None


def _word_character(character: str) -> bool:
    return character.isalnum() or character == "_"


def each_quotation(text: str, told: Callable[[str], str]) -> str:
    """`text` with each quotation (`quotation_end`) as `told` tells what it quotes."""
    unquoted = ""
    index = 0
    while index < len(text):
        end = quotation_end(text, index)
        if end is None:
            unquoted += text[index]
            index += 1
        else:
            unquoted += told(text[index + 1 : end])
            index = end + 1
    return unquoted


def without_quotation_marks(name: str) -> str:
    """A name as a retelling says who spoke: each quotation's marks and its brackets gone, and
    every mark that is never an apostrophe."""
    unquoted = each_quotation(name, lambda quoted: f" {quoted} ")
    marks = '"“”«»„\N{LEFT SINGLE QUOTATION MARK}()「」『』\uff08\uff09'
    return "".join(" " if character in marks else character for character in unquoted)


def closing_bracket(text: str, start: int, opening: str = "(", closing: str = ")") -> int | None:
    depth = 0
    for index in range(start, len(text)):
        if text[index] == opening:
            depth += 1
        elif text[index] == closing:
            depth -= 1
            if depth == 0:
                return index
    return None


# ================================================================ weighing

KIND_WORDS: dict[str, set[str]] = {
    "theft": {
        "theft",
        "thief",
        "steal",
        "stole",
        "stolen",
        "rob",
        "robbed",
        "robbery",
        "pickpocket",
        "pickpocketed",
        "burgled",
        "looted",
    },
    "fight": {
        "combat",
        "fight",
        "fought",
        "attack",
        "attacked",
        "brawl",
        "duel",
        "defeated",
        "killed",
        "wounded",
        "hit",
        "struck",
        "beat",
        "beaten",
        "punched",
        "stabbed",
        "slain",
        "murdered",
    },
    "threat": {"threat", "threatened", "insult", "insulted", "intimidated", "mocked", "cursed"},
    "help": {"help", "helped", "heal", "healed", "rescue", "rescued", "aid", "aided", "protected"},
    "gift": {"gift", "gifted", "give", "gave", "given", "donated", "rewarded"},
    "movement": {"movement", "moved", "entered", "arrived", "left", "departed"},
    "conversation": {"conversation", "said", "told", "talked", "spoke", "asked"},
}
"""The words of an event key, or of news, that say what kind of thing happened (README: theft,
fight, threat, help, gift, conversation, movement, else generic). The README names the kinds,
not every word: the vocabulary is rumourmill's (`projections/weighing.py`), kept in step."""


def event_kind(key: str) -> str:
    if key in MOVEMENT:
        return "movement"
    if key in CONVERSATION:
        return "conversation"
    words = key.lower()
    for separator in ".-_/":
        words = words.replace(separator, " ")
    for kind, known in KIND_WORDS.items():
        if any(word in known for word in words.split()):
            return kind
    return "generic"


def news_kind(content: str, facts: Iterable[Fact]) -> str:
    """What news tells of, by its words and the facts it claims: the first kind (in the
    table's order) one of whose words it uses, else generic."""
    texts = [content]
    for fact in facts:
        texts.append(fact.attribute)
        if isinstance(fact.value, str):
            texts.append(fact.value)
    words = {word.lower() for text in texts for word in re.findall(r"[^\W_]+", text)}
    for kind, known in KIND_WORDS.items():
        if words & known:
            return kind
    return "generic"


def tells_of(memory: Any) -> str:
    """The kind of event a memory is of, or tells of (its words when it does not say)."""
    kept: str | None = memory.event_kind
    return kept if kept is not None else news_kind(memory.content, memory.facts)


def impact(kind: str, part: str, policy: Policy) -> tuple[float, float, float]:
    """(importance, feeling, arousal) from the policy's table, by kind and part."""
    cell = getattr(getattr(policy.memory.weights, kind), part)
    return cell.importance, cell.feeling, cell.arousal


def first_confidence(learned: str, policy: Policy) -> float:
    """How sure a character is of what it saw, was told, or heard from a player."""
    return float(getattr(policy.memory.confidence, learned))


def retold_confidence(teller_confidence: float, policy: Policy) -> float:
    """The teller's confidence times `retelling_factor`, to 2 decimals, and a factor below 1
    costs at least 0.01 (never below 0): each retelling loses confidence."""
    teller = Decimal(str(teller_confidence))
    factor = Decimal(str(policy.memory.retelling_factor))
    retold = (teller * factor).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    if factor < 1:
        least_loss = (teller - Decimal("0.01")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        retold = max(Decimal(0), min(retold, least_loss))
    return float(retold)


# ================================================================ distortion


class Draws:
    """Choices read off a retelling's seed in turn: turn i reads bytes 2i and 2i + 1 (around
    64) of the seed's 64-byte blake2b, big-endian, modulo the number of choices."""

    def __init__(self, seed: bytes) -> None:
        self.stream = hashlib.blake2b(seed, digest_size=64).digest()
        self.turn = 0

    def pick(self, count: int) -> int:
        start = (2 * self.turn) % 64
        self.turn += 1
        return (self.stream[start] * 256 + self.stream[start + 1]) % count


def is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def mentions(text: str, phrase: str) -> list[int]:
    """Where `phrase` stands in `text` as whole words, left to right, never overlapping."""
    found: list[int] = []
    index = text.find(phrase)
    while index != -1:
        before = text[index - 1] if index > 0 else " "
        after = text[index + len(phrase)] if index + len(phrase) < len(text) else " "
        if not is_word_char(before) and not is_word_char(after):
            found.append(index)
            index = text.find(phrase, index + len(phrase))
        else:
            index = text.find(phrase, index + 1)
    return found


def replaced(text: str, spans: list[tuple[int, int]], by: Callable[[int], str]) -> str:
    """`text` with each (start, end), left to right, replaced by `by(start)`."""
    out, index = "", 0
    for start, end in spans:
        out += text[index:start] + by(start)
        index = end
    return out + text[index:]


def place_word_before(text: str, at: int) -> int | None:
    """Where a whole word "at " or "in " starts that ends at `at`, if one does."""
    for word in ("at ", "in "):
        start = at - len(word)
        if (
            start >= 0
            and text[start:at] == word
            and (start == 0 or not is_word_char(text[start - 1]))
        ):
            return start
    return None


def story_numbers(text: str) -> list[tuple[int, int, int | float]]:
    """(start, end, value) of the numbers a story tells: digits, maybe with commas between
    groups of three ("1,000" is a thousand) and decimals, not part of a word, an id ("npc-2"),
    a time ("21:05"), or digits a comma runs on otherwise ("3,4")."""
    found: list[tuple[int, int, int | float]] = []
    index = 0
    while index < len(text):
        if not text[index].isdecimal():
            index += 1
            continue
        end = index
        while end < len(text) and text[end].isdecimal():
            end += 1
        if end - index <= 3:
            while thousands_at(text, end):
                end += 4
        if end + 1 < len(text) and text[end] == "." and text[end + 1].isdecimal():
            end += 1
            while end < len(text) and text[end].isdecimal():
                end += 1
        before = text[index - 1] if index > 0 else " "
        after = text[end] if end < len(text) else " "
        digit_after = after in ".," and end + 1 < len(text) and text[end + 1].isdecimal()
        if not (is_word_char(before) or before in ".,:-") and not (
            is_word_char(after) or after in ":-" or digit_after
        ):
            token = text[index:end].replace(",", "")
            found.append((index, end, float(token) if "." in token else int(token)))
        index = end
    return found


def thousands_at(text: str, at: int) -> bool:
    """Whether a comma and exactly three digits stand at `at` (a group of thousands)."""
    group = text[at : at + 4]
    after = text[at + 4 : at + 5]
    return len(group) == 4 and group[0] == "," and group[1:].isdecimal() and not after.isdecimal()


def as_written(number: int | float, like: str) -> str:
    """A grown number in words: with commas between thousands if the number it replaces had
    them."""
    return f"{number:,}" if "," in like else str(number)


def fact_number(fact: Fact) -> int | float | None:
    value = fact.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def grown(number: int | float, by_half: bool, more: int) -> int | float:
    """Half again (rounded up) or `more` on top; a whole number stays whole, any other keeps
    two decimals; always more than it was."""
    exact = Decimal(str(number)) * Decimal("1.5") if by_half else Decimal(str(number)) + more
    if float(number).is_integer():
        result: int | float = int(exact.to_integral_value(rounding=ROUND_CEILING))
        return result if result > number else int(number) + 1
    result = float(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    return result if result > number else round(number + 1, 2)


def distorted(
    content: str, facts: list[Fact], about: list[str], seed: bytes, name: Names, kind: Kinds
) -> tuple[str, list[Fact]]:
    """A retelling with maybe one detail shifted (README, `spreading.distortion`): one in four
    passes unchanged; else a number grows (its facts too), someone named (a character or a
    player, by the catalogue) becomes "a stranger", or a place (by the catalogue) named after
    "at" or "in" blurs, chosen among the details the telling has. An id of no known kind is a
    place when named after "at" or "in", else someone."""
    draws = Draws(seed)
    if draws.pick(4) == 0:
        return content, facts
    first: dict[str, str] = {}  # name -> the first entity in `about` so called
    for entity in about:
        first.setdefault(name(entity), entity)
    # where each name stands; longer names take their words first: in "Mara Vell robbed Mara"
    # Mara is named once (of two names as long, the first in `about` goes first)
    stands: dict[str, list[int]] = {}
    in_names: list[tuple[int, int]] = []
    for n in sorted(first, key=lambda n: -len(n)):
        stands[n] = [
            at
            for at in mentions(content, n)
            if all(at + len(n) <= start or end <= at for start, end in in_names)
        ]
        in_names += [(at, at + len(n)) for at in stands[n]]
    said_at: dict[str, list[tuple[int, int]]] = {}  # "at X" / "in X"
    for n in first:
        for at in stands[n]:
            start = place_word_before(content, at)
            if start is not None:
                said_at.setdefault(n, []).append((start, at + len(n)))
    named = {n: kind(entity) for n, entity in first.items() if stands[n]}
    for n, k in named.items():
        if k == "unknown":  # the catalogue cannot say: the words do
            named[n] = "place" if n in said_at else "character"
    places = [n for n, k in named.items() if k == "place" and n in said_at]
    people = [n for n, k in named.items() if k in ("character", "player")]
    # a number inside a name ("Agent 47", "The 3 Bells") is the name's, not the story's
    told_numbers = [
        (start, end, value)
        for start, end, value in story_numbers(content)
        if all(end <= begins or ends <= start for begins, ends in in_names)
    ]
    numbers: list[int | float] = []
    candidates = [value for _, _, value in told_numbers]
    candidates += [n for n in map(fact_number, facts) if n is not None and n >= 0]
    for number in candidates:
        if number not in numbers:
            numbers.append(number)
    rules = [
        rule
        for rule, possible in (("number", numbers), ("stranger", people), ("place", places))
        if possible
    ]
    if not rules:
        return content, facts
    rule = rules[draws.pick(len(rules))]
    if rule == "number":
        number = numbers[draws.pick(len(numbers))]
        by_half = draws.pick(2) == 0
        bigger = grown(number, by_half, 1 + draws.pick(3))
        grows = [(start, end) for start, end, value in told_numbers if value == number]
        grows_to = dict(grows)
        told = replaced(content, grows, lambda at: as_written(bigger, content[at : grows_to[at]]))
        shifted = [
            fact
            if fact_number(fact) != number
            else Fact(
                subject=fact.subject,
                attribute=fact.attribute,
                value=float(bigger) if isinstance(fact.value, float) else int(bigger),
            )
            for fact in facts
        ]
        return told, shifted
    if rule == "stranger":
        person = people[draws.pick(len(people))]
        spans = [(at, at + len(person)) for at in stands[person]]
        return replaced(content, spans, lambda at: "A stranger" if at == 0 else "a stranger"), facts
    near = draws.pick(2) == 0
    place = places[draws.pick(len(places))]
    vaguer = f"somewhere near {place}" if near else "somewhere"
    return replaced(content, said_at[place], lambda at: vaguer), facts


# ================================================================ retention (SPEC 8)

MINUTES_PER_DAY = 24 * 60
BELIEF_KINDS = {"knowledge", "impression"}


def story_minutes(game_time: str | None) -> int | None:
    """Minutes since day 0, 00:00 of a "day D, HH:MM" (no story time: None)."""
    if game_time is None:
        return None
    day, clock = game_time.removeprefix("day ").split(", ")
    hours, minutes = clock.split(":")
    return (int(day) * 24 + int(hours)) * 60 + int(minutes)


def step_of(importance: float) -> int:
    steps = (Decimal(repr(importance)) * 5).to_integral_value(ROUND_CEILING)
    return max(1, int(steps))


def variation(belief_id: str, policy: Policy) -> float:
    digest = hashlib.blake2b(belief_id.encode(), digest_size=8, person=b"retention").digest()
    rules = policy.memory.retention
    share = int.from_bytes(digest, "big") / (2**64 - 1)
    return rules.variation_low + (rules.variation_high - rules.variation_low) * share


def held(
    memory: OMemory, now: int | None, policy: Policy, recalled: Sequence[int] = ()
) -> tuple[float, str]:
    """Retention and state of `memory` at story minute `now`, recalled at `recalled` minutes
    (each restarts the clock and lengthens the half-life 1.5 times)."""
    since = memory.minute
    if not policy.memory.flaky or since is None or now is None:
        return 1.0, "vivid"
    rules = policy.memory.retention
    half_life = rules.half_life_days * rules.step_factor ** (step_of(memory.importance) - 1)
    if memory.kind in BELIEF_KINDS:
        half_life *= rules.belief_factor
    half_life *= rules.reinforcement_factor ** len(recalled) * variation(memory.belief_id, policy)
    since = max([since, *recalled])
    value = 0.5 ** ((max(0, now - since) / MINUTES_PER_DAY) / half_life)
    floor = rules.never_forgotten_step
    if floor is not None and step_of(memory.importance) >= floor:
        value = max(value, rules.forgotten_below)
    if value >= rules.vivid_from:
        return value, "vivid"
    return value, "faded" if value >= rules.forgotten_below else "forgotten"


def held_state(
    memory: OMemory, now: int | None, policy: Policy, recalls: dict[tuple[str, str], list[int]]
) -> str:
    """The state of `memory` at `now`, recalled as `recalls` says so far."""
    return held(memory, now, policy, recalls.get((memory.character, memory.belief_id), []))[1]


# ================================================================ memories


class OracleNotFound(Exception):
    """The read is a 404."""


@dataclass
class OMemory:
    """One memory as the oracle keeps it."""

    character: str
    timeline: str
    seq: int
    kind: str
    belief_id: str
    content: str
    about: list[str]
    source: str
    source_entity: str | None
    hops: int
    confidence: float
    importance: float
    feeling: float
    arousal: float
    uncertain: bool
    game_time: str | None
    persistent: bool
    facts: list[Fact]
    origin: str
    tellers: list[str]
    """Who passed it on, first teller first; empty for what was seen."""
    event_kind: str
    """What it is of, or tells of (not shown in reads; news is weighed by it)."""
    minute: int | None = None
    """The story minute it was formed at: its event's, else the story's now just before it
    (None: the timeline had no story time yet, and it never fades)."""

    def read(self, diverging: bool) -> dict[str, Any]:
        shown = {name: getattr(self, name) for name in READ_FIELDS if name != "diverging"}
        shown["about"] = list(self.about)
        shown["diverging"] = diverging
        return {name: shown[name] for name in READ_FIELDS}


@dataclass
class Applied:
    """One applied event and what it formed."""

    event: Event
    memories: list[OMemory]
    rumours: int = 0
    """How many of `memories` are rumours spread at the event (they come last)."""
    exchange: int | None = None
    """The story minute of the group exchange this event held, if it held one."""
    weakened: list[tuple[str, str, float]] = field(default_factory=list)
    """(character, belief id, new confidence) of each belief the referee weakened here."""


@dataclass
class OTimeline:
    timeline: str
    parent: str | None = None
    after: int = 0
    attached: bool = False
    received: dict[int, Event] = field(default_factory=dict)
    top: int = 0
    acknowledged: int = 0

    @property
    def processed(self) -> int:
        return max(self.after if self.attached else 0, self.top)

    @property
    def waiting_count(self) -> int:
        return sum(1 for seq in self.received if seq > self.top)


@dataclass
class OWorld:
    timelines: dict[str, OTimeline] = field(default_factory=dict)
    applied: list[Applied] = field(default_factory=list)
    """Every applied event, in the order applied (the world's history as it happened)."""
    folds: dict[tuple[tuple[tuple[str, int], ...], int], dict[str, Any]] = field(
        default_factory=dict
    )
    """Folds already made, by segments and how many events were applied then."""


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is not `1`, `1` is `1.0`, key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | dict) or isinstance(b, list | dict):
        return False
    return bool(a == b)


def unique(items: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item is not None and item not in out:
            out.append(item)
    return out


def ids_in(values: Iterable[Any]) -> list[str]:
    """The strings among `values` (and inside lists among them) that could be ids."""
    found: list[str] = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and 1 <= len(item) <= 128:
                found.append(item)
    return found


def is_news(memory: OMemory) -> bool:
    """Anything but an impression: a feeling is not news."""
    return memory.kind != "impression"


LOOKS_DEEPER = 16
"""How many times as deep as the news it would pass a character looks for news it has not
forgotten (a teller), or for news some member lacks (a group), as rumourmill documents."""


def newest_news(memories: list[OMemory], character: str, limit: int) -> list[OMemory]:
    """A character's newest news, newest first (by position, then by id, highest first)."""
    news = [m for m in memories if m.character == character and is_news(m)]
    news.sort(key=lambda m: (m.seq, m.belief_id), reverse=True)
    return news[:limit]


def worth_telling(memory: OMemory, listener: str) -> bool:
    """News not yet `FARTHEST_HOPS` from its start that is not the listener's own, did not come
    through it, is not about it alone."""
    if not is_news(memory) or memory.hops >= FARTHEST_HOPS or memory.character == listener:
        return False
    if listener == memory.source_entity or listener in memory.tellers:
        return False
    return set(memory.about) != {listener}


def meeting_pairs(event: Event, present: set[str], kind: Kinds) -> list[tuple[str, str]]:
    """Who meets at an event, each pair once, the smaller id first, in order: a character
    entering a place meets every character already there; `characters-met` makes everyone
    it names meet everyone else it names, unless it names more than `MOST_MET` ids."""
    if event.key in MOVEMENT:
        mover = event.actor
        if mover is None or event.location is None or mover in present:
            return []
        if kind(mover) != "character":
            return []
        pairs = [
            (min(mover, other), max(mover, other))
            for other in present
            if kind(other) == "character"
        ]
        return sorted(pairs)
    if event.key == MET:
        named = event.payload.get(MET_FIELD)
        more = [item for item in named if isinstance(item, str)] if isinstance(named, list) else []
        ids = {who for who in [event.actor, event.target, *more] if who is not None}
        if len(ids) > MOST_MET:
            return []
        met = sorted(who for who in ids if kind(who) == "character")
        return [(one, other) for i, one in enumerate(met) for other in met[i + 1 :]]
    return []


def group_names(value: Any) -> list[str]:
    """A declared group: a name, or (in a custom field) a list of names."""
    names = value if isinstance(value, list) else [value]
    return [name for name in names if isinstance(name, str) and name != ""]


class Oracle:
    """Feed it raw messages in delivery order; ask it for reads."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self.worlds: dict[tuple[str, str], OWorld] = {}
        self.reached: Counter[str] = Counter()
        """How often a cap, a group exchange or a long ancestry came into play (coverage)."""

    # ---------------------------------------------------------------- sequencing

    def deliver(self, raw: bytes) -> list[tuple[str | None, int | None, str]]:
        """Take one message in: its own outcome first, then every event it released."""
        if len(raw) > MAX_EVENT_BYTES:
            return [(None, None, "rejected")]
        try:
            event = Event.model_validate_json(raw)
        except ValidationError:
            return [(None, None, "rejected")]
        world = self.worlds.setdefault((event.tenant_id, event.world_instance_id), OWorld())
        me = (event.timeline_id, event.seq)
        line = world.timelines.get(event.timeline_id)
        started = line is not None and (line.attached or line.top > 0)
        branch = event.branch
        if line is not None and started:
            if branch is not None and (
                not line.attached
                or branch.parent_timeline_id != line.parent
                or branch.after_seq != line.after
            ):
                return [(*me, "rejected")]
        elif branch is not None:
            if branch.parent_timeline_id not in world.timelines:
                return [(*me, "rejected")]
            if self._descends(world, branch.parent_timeline_id, event.timeline_id):
                return [(*me, "rejected")]
            if event.seq != branch.after_seq + 1:
                return [(*me, "rejected")]
        if line is None:
            line = OTimeline(event.timeline_id)
        known = event.timeline_id in world.timelines
        placing = branch is not None and not line.attached
        # what waited at positions the branch inherits: duplicates once it is placed
        inherited = [seq for seq in line.received if placing and seq <= branch.after_seq]
        if known and (event.seq <= line.processed or event.seq in line.received):
            if not placing:
                return [(*me, "duplicate")]
            dropped = self._attach(line, branch)
            released = self._run(world, event.timeline_id)
            return [(*me, "duplicate"), *dropped, *((t, s, "processed") for t, s in released)]
        if (
            not self._can_apply(world, line, event.seq, branch)
            and line.waiting_count - len(inherited) >= self.policy.sequencing.max_deferred
        ):
            return [(*me, "rejected")]
        # accepted: the timeline now exists, attached if this is its branch event
        world.timelines[event.timeline_id] = line
        dropped = self._attach(line, branch) if placing else []
        line.acknowledged = max(line.acknowledged, event.seq)
        line.received[event.seq] = event
        first = "processed" if self._can_apply(world, line, event.seq, None) else "deferred"
        released = self._run(world, event.timeline_id)
        assert (first == "processed") == (me in released)
        return [
            (*me, first),
            *dropped,
            *((t, s, "processed") for t, s in released if (t, s) != me),
        ]

    @staticmethod
    def _attach(line: OTimeline, branch: Branch) -> list[tuple[str | None, int | None, str]]:
        """Attach `line` to its parent as `branch` says; what waited on it at a position it
        inherits leaves, a duplicate each."""
        line.parent, line.after, line.attached = branch.parent_timeline_id, branch.after_seq, True
        line.acknowledged = max(line.acknowledged, branch.after_seq)
        inherited = sorted(seq for seq in line.received if seq <= branch.after_seq)
        for seq in inherited:
            del line.received[seq]
        return [(line.timeline, seq, "duplicate") for seq in inherited]

    def _descends(self, world: OWorld, timeline: str, ancestor: str) -> bool:
        current: str | None = timeline
        while current is not None:
            if current == ancestor:
                return True
            line = world.timelines.get(current)
            current = line.parent if line is not None and line.attached else None
        return False

    def _reached(self, world: OWorld, timeline: str, seq: int) -> bool:
        """Whether `timeline` has everything up to `seq` of its visible history applied."""
        if seq == 0:
            return True
        line = world.timelines[timeline]
        if line.attached and seq <= line.after:
            assert line.parent is not None
            return self._reached(world, line.parent, seq)
        return line.top >= seq

    def reached_seq(self, world: OWorld, timeline: str) -> int:
        """How far `timeline` has come: its processed position, or, while its branch point is
        not made yet, as far as its parent has come towards it."""
        line = world.timelines[timeline]
        waiting = (
            line.attached
            and line.parent is not None
            and line.top <= line.after
            and not self._reached(world, line.parent, line.after)
        )
        if waiting:
            assert line.parent is not None
            return min(line.after, self.reached_seq(world, line.parent))
        return line.processed

    def _can_apply(self, world: OWorld, line: OTimeline, seq: int, branch: Any) -> bool:
        if seq != line.processed + 1 and not (branch is not None and not line.attached):
            return False
        parent, after = (line.parent, line.after) if line.attached else (None, 0)
        if branch is not None and not line.attached:
            parent, after = branch.parent_timeline_id, branch.after_seq
            if seq != after + 1:
                return False
        if parent is not None and line.top <= after:
            return self._reached(world, parent, after)
        return True

    def _run(self, world: OWorld, start: str) -> list[tuple[str, int]]:
        """Apply everything that can be applied, the delivered timeline first."""
        released: list[tuple[str, int]] = []
        progress = True
        while progress:
            progress = False
            order = [start, *self._children_order(world, start)]
            order += sorted(t for t in world.timelines if t not in order)
            for name in order:
                line = world.timelines[name]
                while line.processed + 1 in line.received and self._can_apply(
                    world, line, line.processed + 1, None
                ):
                    event = line.received[line.processed + 1]
                    self._apply(world, event)
                    line.top = event.seq
                    released.append((name, event.seq))
                    progress = True
        return released

    def _children_order(self, world: OWorld, start: str) -> list[str]:
        order: list[str] = []
        frontier = [start]
        while frontier:
            current = frontier.pop(0)
            kids = sorted(
                t for t, line in world.timelines.items() if line.attached and line.parent == current
            )
            for kid in kids:
                if kid not in order and kid != start:
                    order.append(kid)
                    frontier.append(kid)
        return order

    # ---------------------------------------------------------------- ancestry and folds

    def ancestry(self, world: OWorld, timeline: str, upto: int) -> list[tuple[str, int]]:
        segments = [(timeline, upto)]
        line = world.timelines[timeline]
        while line.attached and line.parent is not None:
            segments.append((line.parent, min(line.after, segments[-1][1])))
            line = world.timelines[line.parent]
        return segments

    def history(self, world: OWorld, segments: list[tuple[str, int]]) -> list[Applied]:
        """The applied events a timeline sees, in position order (seqs never overlap)."""
        limits = dict(segments)
        seen = [
            item
            for item in world.applied
            if item.event.timeline_id in limits and item.event.seq <= limits[item.event.timeline_id]
        ]
        return sorted(seen, key=lambda item: item.event.seq)

    @staticmethod
    def _persistent_before(world: OWorld, item: Applied) -> Iterator[OMemory]:
        """The persistent memories stored before `item` was applied, by any timeline."""
        for earlier in world.applied:
            if earlier is item:
                return
            yield from (memory for memory in earlier.memories if memory.persistent)

    def _fold(self, world: OWorld, segments: list[tuple[str, int]]) -> dict[str, Any]:
        """One pass over the visible history: where everyone is, the record, the memories."""
        remembered = world.folds.get((tuple(segments), len(world.applied)))
        if remembered is not None:
            return remembered
        where: dict[str, str] = {}
        places: set[str] = set()  # every place someone was reported at, left empty since or not
        record: dict[tuple[str, str], Any] = {}
        made: dict[tuple[str, str], Event] = {}
        said_again: set[tuple[str, str]] = set()
        declared: dict[str, dict[str, Any]] = {}
        memories: list[OMemory] = []
        exchange: int | None = None
        revised: dict[tuple[str, str], float] = {}
        now: int | None = None
        recalls: dict[tuple[str, str], list[int]] = {}
        for item in self.history(world, segments):
            event = item.event
            minute = story_minutes(event.game_time)
            named = event.payload.get("belief_ids")
            if event.key == RECALLED and event.actor is not None and isinstance(named, list):
                at = now if minute is None else minute  # untimed: the story's now just before it
                held = {  # a recall counts for what its actor held before it, not forgotten
                    memory.belief_id
                    for memory in [*memories, *self._persistent_before(world, item)]
                    if memory.character == event.actor
                    and held_state(memory, at, self.policy, recalls) != "forgotten"
                }
                for belief in {one for one in named if isinstance(one, str) and one} & held:
                    if at is not None:
                        recalls.setdefault((event.actor, belief), []).append(at)
            if minute is not None:
                now = minute
            if event.key in MOVEMENT and event.actor is not None and event.location is not None:
                where[event.actor] = event.location
                places.add(event.location)
            if self.policy.memory.world:
                said = {(fact.subject, fact.attribute): fact.value for fact in event.facts}
                for place, value in said.items():
                    if place not in record or not json_equal(record[place], value):
                        made[place] = event
                        said_again.discard(place)
                    else:  # a value said again unchanged makes nothing
                        said_again.add(place)
                    record[place] = value
            for entity, declaration in event.entities.items():
                declared[entity] = redeclared(
                    declared.get(entity, {}), declaration, entity in event.players
                )
            memories += [memory for memory in item.memories if not memory.persistent]
            if item.exchange is not None:
                exchange = item.exchange
            for character, belief, confidence in item.weakened:
                revised[(character, belief)] = confidence
        memories += [
            memory for item in world.applied for memory in item.memories if memory.persistent
        ]
        memories = [
            replace(m, confidence=revised[(m.character, m.belief_id)])
            if (m.character, m.belief_id) in revised
            else m
            for m in memories
        ]
        folded = {
            "where": where,
            "places": places,
            "record": record,
            "made": made,
            "said again": said_again,
            "declared": declared,
            "memories": memories,
            "exchange": exchange,
            "now": now,
            "recalls": recalls,
        }
        world.folds[(tuple(segments), len(world.applied))] = folded
        return folded

    # ---------------------------------------------------------------- memory formation

    def _apply(self, world: OWorld, event: Event) -> None:
        policy = self.policy
        segments = self.ancestry(world, event.timeline_id, event.seq - 1)
        before = self._fold(world, segments)
        declared = dict(before["declared"])
        for entity, declaration in event.entities.items():
            declared[entity] = redeclared(
                declared.get(entity, {}), declaration, entity in event.players
            )

        def kind(entity: str) -> str:
            return entity_kind(entity, event.players, declared, policy)

        def name(entity: str) -> str:
            return entity_name(entity, declared)

        formed: list[OMemory] = []
        for character, part in self._perceivers(event, kind, before["where"]):
            memory = (
                self._heard(event, character, part, before, name)
                if event.key in CONVERSATION
                else self._seen(event, character, part, kind, name)
            )
            if memory is None:
                continue
            formed.append(memory)
            actor = event.actor
            if (
                part == "target"
                and memory.source not in ("told", "rumour")
                and actor is not None
                and actor != character
                and memory.feeling != 0
                and abs(memory.feeling) >= policy.memory.impression_threshold
            ):
                how = "warmly" if memory.feeling > 0 else "badly"
                formed.append(
                    replace(
                        memory,
                        kind="impression",
                        belief_id=self._id(event, character, "impression"),
                        content=f"I feel {how} about {name(actor)}",
                        about=[actor],
                        facts=[],
                        persistent=self._persistent(character, "impression"),
                    )
                )
        applied = Applied(event, formed)
        if event.key == PLAYER_SAID and event.actor is not None:
            for number, memory in enumerate(formed):
                if memory.kind == "knowledge" and memory.character == event.target:
                    formed[number], applied.weakened = self._referee(event, memory, before)
        if policy.memory.npc and policy.memory.spreading.enabled:
            rumours = self._spread(world, event, before, applied, kind, name)
            applied.rumours = len(rumours)
            formed += rumours
        minute = story_minutes(event.game_time)
        formed[:] = [replace(m, minute=before["now"] if minute is None else minute) for m in formed]
        world.applied.append(applied)

    # ---------------------------------------------------------------- the referee

    def _referee(
        self, event: Event, line: OMemory, before: dict[str, Any]
    ) -> tuple[OMemory, list[tuple[str, str, float]]]:
        """A player's line to a character judged against the uncertain or diverging beliefs it
        challenges (SPEC 11): the line as kept, and the beliefs weakened.

        Choices the oracle takes from `projections/referee.py`'s docstring: the beliefs are
        those the character holds at the line among its 800 most important (kinds knowledge
        and impression; those forgotten by the line's story time, or the story's now just
        before it without one, left out); a belief is
        challenged by a claimed fact of the same subject and attribute, or by being about an
        entity the line names (its `about`, its claimed facts' subjects; not the player nor the
        listener: a fact claimed of them still challenges), unless the line confirms it; the
        firmest as held at the line (then the newest, then by id) is judged; pull = (1 - its
        confidence as held: x retention when faded) + trust_weight
        x feeling toward the player (the relation as the read shows it, 2 decimals, halves up)
        + truth_weight x (+1 agrees with the record, -1 contradicts, 0 neither), facts about
        entities never declared weighed as any; `convinced` weakens each challenged belief's
        stored confidence.
        """
        player, listener = str(event.actor), line.character
        referee = self.policy.memory.referee
        record = before["record"]
        claimed = line.facts
        named = {e for e in [*line.about, *(f.subject for f in claimed)]} - {player, listener}
        if not named and not claimed:
            return line, []
        mine = [m for m in before["memories"] if m.character == listener]
        shown = sorted(
            (m for m in mine if m.kind != "event"),
            key=lambda m: (-m.importance, -m.seq, m.belief_id),
        )[: 16 * MAX_BELIEFS]  # looked for past forgotten ones, so deep
        now = before["now"] if event.story_minutes is None else event.story_minutes
        firmly: dict[str, float] = {}  # each belief's confidence as held at the line
        for m in shown:
            retention, state = held(
                m, now, self.policy, before["recalls"].get((listener, m.belief_id), [])
            )
            if state != "forgotten":  # a forgotten belief is absent from decisions, the verdict
                vivid = state == "vivid"
                firmly[m.belief_id] = m.confidence if vivid else round(m.confidence * retention, 2)
        shown = [m for m in shown if m.belief_id in firmly]

        def wrong(memory: OMemory) -> bool:
            return any(
                (f.subject, f.attribute) in record
                and not json_equal(record[(f.subject, f.attribute)], f.value)
                for f in memory.facts
            )

        said = {(f.subject, f.attribute): f.value for f in claimed}
        challenged = []
        for memory in shown:
            if not (memory.uncertain or wrong(memory)):
                continue
            spoken_of = [f for f in memory.facts if (f.subject, f.attribute) in said]
            if spoken_of and all(
                json_equal(f.value, said[(f.subject, f.attribute)]) for f in spoken_of
            ):
                continue
            if spoken_of or named & set(memory.about):
                challenged.append(memory)
        if not challenged:
            return line, []
        challenged.sort(key=lambda m: (-firmly[m.belief_id], -m.seq, m.belief_id))
        feelings = [m.feeling for m in mine if player in unique([*m.about, m.source_entity])]
        feeling = shown_feeling(mean_feeling(feelings)) if feelings else 0.0
        recorded = [
            json_equal(record[(f.subject, f.attribute)], f.value)
            for f in claimed
            if (f.subject, f.attribute) in record
        ]
        truth = 0 if not recorded else (1 if all(recorded) else -1)
        pull = (
            1
            - Decimal(str(firmly[challenged[0].belief_id]))
            + Decimal(str(referee.trust_weight)) * Decimal(str(feeling))
            + Decimal(str(referee.truth_weight)) * truth
        )
        if pull >= Decimal(str(referee.convinced_from)):
            verdict = "convinced"
        elif pull >= Decimal(str(referee.doubting_from)):
            verdict = "doubting"
        else:
            verdict = "unconvinced"
        if verdict == "convinced" and truth == -1 and not self.policy.memory.lies_believable:
            verdict = "doubting"
        self.reached[f"referee {verdict}"] += 1

        def weakened(confidence: float) -> float:
            exact = Decimal(str(confidence)) * Decimal(str(referee.weaken))
            return float(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

        if verdict == "convinced":
            return replace(line, uncertain=False), [
                (listener, m.belief_id, weakened(m.confidence)) for m in challenged
            ]
        if verdict == "doubting":
            return replace(line, confidence=weakened(line.confidence)), []
        return replace(line, confidence=0.0), []

    # ---------------------------------------------------------------- rumours

    def _spread(
        self,
        world: OWorld,
        event: Event,
        before: dict[str, Any],
        applied: Applied,
        kind: Kinds,
        name: Names,
    ) -> list[OMemory]:
        """The rumours `event` spreads, from what everyone knew just before it: nobody is told
        news they knew, took in at this very event, or were told at it already. A teller tells
        news as it holds it at the event's story time (else the story's now just before it):
        forgotten news takes no place among its newest, faded news is told retold and less sure.
        """
        spreading = self.policy.memory.spreading
        visible: list[OMemory] = before["memories"]
        heard: list[OMemory] = []
        now = before["now"] if event.story_minutes is None else event.story_minutes

        forgotten: set[tuple[str, str]] = set()
        faded: set[tuple[str, str]] = set()

        def telling(teller: str, count: int, within: int) -> list[OMemory]:
            """The teller's newest `count` pieces of news it holds, among its newest `within`."""
            kept = []
            for memory in newest_news(visible, teller, within):
                recalled = before["recalls"].get((teller, memory.belief_id), [])
                retention, state = held(memory, now, self.policy, recalled)
                if state == "forgotten":
                    forgotten.add((teller, memory.belief_id))
                    continue
                if state == "faded":
                    faded.add((teller, memory.belief_id))
                    memory = replace(
                        memory,
                        content=retelling(memory.content),
                        confidence=round(memory.confidence * retention, 2),
                    )
                kept.append(memory)
            return kept[:count]

        def knows(character: str, origin: str) -> bool:
            told_now = applied.memories + heard
            if any(m.character == character and m.origin == origin for m in told_now):
                return True
            return self._holds_news(before, character, origin, now)

        def tell(memory: OMemory, teller: str, listener: str) -> None:
            if (teller, memory.belief_id) in faded:
                self.reached["faded news told"] += 1
            if self._held_once(before, listener, memory.origin):
                self.reached["forgotten news told again"] += 1
            heard.append(self._retold(memory, teller, listener, event, kind, name))

        minutes = event.story_minutes
        if minutes is not None:
            length = spreading.group_interval_minutes
            last = before["exchange"]  # its story minute: its interval in today's length
            if last is None or last // length < minutes // length:
                applied.exchange = minutes
                exchange = self._group_exchange(before["declared"], telling, kind, knows)
                for teller, listener, memory in exchange:
                    tell(memory, teller, listener)
        present = {who for who, place in before["where"].items() if place == event.location}
        for one, other in meeting_pairs(event, present, kind):
            for teller, listener in ((one, other), (other, one)):
                deepest = LOOKS_DEEPER * spreading.per_meeting
                offered = telling(teller, spreading.per_meeting, deepest)
                newest = newest_news(visible, teller, spreading.per_meeting)
                if any((teller, m.belief_id) in forgotten for m in newest):
                    self.reached["forgotten news passed over"] += 1
                taken: list[str] = []
                for memory in offered:
                    if (
                        memory.origin not in taken
                        and worth_telling(memory, listener)
                        and not knows(listener, memory.origin)
                    ):
                        taken.append(memory.origin)
                        tell(memory, teller, listener)
                if len(taken) == spreading.per_meeting > 0:
                    wanted = {
                        m.origin
                        for m in telling(teller, len(visible), len(visible))
                        if worth_telling(m, listener) and not knows(listener, m.origin)
                    }
                    if wanted:
                        self.reached["meeting cap"] += 1
        return heard

    def _group_exchange(
        self,
        declarations: dict[str, dict[str, Any]],
        telling: Callable[[str, int, int], list[OMemory]],
        kind: Kinds,
        knows: Callable[[str, str], bool],
    ) -> Iterable[tuple[str, str, OMemory]]:
        """Each group (by the declared `spreading.group_field`) shares its newest news: at most
        `group_exchange_limit` pieces, newest first, each from the member who has it freshest
        (fewest hops, then newest, then smallest id) to every member who lacks it and through whom
        none of the copies came. Members are
        the characters of the timeline's catalogue as it stood before the event. Each member
        offers what it holds of its newest `limit` pieces of news; while that makes fewer than
        `limit` pieces some member lacks, twice as many, up to `LOOKS_DEEPER` x `limit`."""
        spreading = self.policy.memory.spreading
        limit = spreading.group_exchange_limit
        groups: dict[str, list[str]] = {}
        for entity, declared in declarations.items():
            if kind(entity) == "character":
                for group in group_names(declared.get(spreading.group_field)):
                    groups.setdefault(group, []).append(entity)
        for group in sorted(groups):
            members = sorted(set(groups[group]))
            if len(members) < 2:
                continue
            depth, passed, reached_limit = limit, 0, False
            deliveries: list[tuple[str, str, OMemory]] = []
            newest_only: set[str] | None = None  # what the newest `limit` of each passed
            while depth:
                offered = [(who, m) for who in members for m in telling(who, depth, depth)]
                passed, reached_limit, deliveries = self._group_pieces(
                    offered, members, limit, knows
                )
                if newest_only is None:
                    newest_only = {memory.origin for _, _, memory in deliveries}
                if passed == limit or depth == LOOKS_DEEPER * limit:
                    break
                depth = min(2 * depth, LOOKS_DEEPER * limit)
            deeper = {memory.origin for _, _, memory in deliveries} - (newest_only or set())
            for what, reached in (
                ("group limit", reached_limit),
                ("group exchange", passed),
                ("group looked deeper", deeper),
            ):
                if reached:  # a key counts as reached (`reached`): only when it was
                    self.reached[what] += 1
            yield from deliveries

    @staticmethod
    def _group_pieces(
        offered: list[tuple[str, OMemory]],
        members: list[str],
        limit: int,
        knows: Callable[[str, str], bool],
    ) -> tuple[int, bool, list[tuple[str, str, OMemory]]]:
        """What a group passes of what its members offer: how many pieces, whether more were
        left that some member lacks, and the deliveries."""
        pieces = unique(memory.origin for _, memory in offered)
        pieces.sort(key=lambda o: (-max(m.seq for _, m in offered if m.origin == o), o))
        passed, deliveries = 0, list[tuple[str, str, OMemory]]()
        for origin in pieces:
            copies = [(m.hops, -m.seq, who, m) for who, m in offered if m.origin == origin]
            _, _, teller, freshest = min(copies, key=lambda copy: copy[:3])
            listeners = []
            for member in members:
                holds = any(who == member for _, _, who, _ in copies)
                if holds or knows(member, origin) or not worth_telling(freshest, member):
                    continue
                if any(member == m.source_entity or member in m.tellers for *_, m in copies):
                    continue  # any copy of it came through them: their own story
                listeners.append(member)
            if listeners and passed == limit:
                return passed, limit > 0, deliveries
            passed += 1 if listeners else 0
            deliveries += [(teller, listener, freshest) for listener in listeners]
        return passed, False, deliveries

    def _retold(
        self, memory: OMemory, teller: str, listener: str, event: Event, kind: Kinds, name: Names
    ) -> OMemory:
        """What `listener` keeps when `teller` passes `memory` on at `event`: knowledge, unsure,
        one hop further, less sure, weighed as news of what it tells of, the statement without its
        detail (maybe distorted)."""
        retold = passed_on(memory, name)
        content, facts = retold, list(memory.facts)
        told_of = tells_of(memory)
        importance, feeling, arousal = impact(told_of, "heard", self.policy)
        if self.policy.memory.spreading.distortion:
            seed = hashed("distortion", memory.origin, listener, event.timeline_id, event.seq)
            content, facts = distorted(content, facts, memory.about, seed, name, kind)
            if (content, facts) != (retold, memory.facts):
                self.reached["distortion"] += 1
        return replace(
            memory,
            character=listener,
            timeline=event.timeline_id,
            seq=event.seq,
            kind="knowledge",
            belief_id=rumour_id(event, listener, memory.origin),
            content=content,
            source="told" if memory.hops == 0 else "rumour",
            source_entity=teller,
            hops=memory.hops + 1,
            confidence=retold_confidence(memory.confidence, self.policy),
            importance=importance,
            feeling=feeling,
            arousal=arousal,
            event_kind=told_of,
            uncertain=True,
            game_time=event.game_time,
            persistent=self._persistent(listener, "knowledge"),
            facts=facts,
            tellers=[*memory.tellers, teller],
        )

    # ---------------------------------------------------------------- perception

    def _perceivers(
        self, event: Event, kind: Kinds, where: dict[str, str]
    ) -> list[tuple[str, str]]:
        memory = self.policy.memory
        if not memory.npc or event.key in (DECLARED, MET, RECALLED, SUMMARISED):
            return []
        if event.key in MOVEMENT and not memory.remember_movement:
            return []
        spoken = event.key in SPOKEN
        candidates = [(event.actor, "actor"), (event.target, "target")]
        if event.witnesses is not None:
            candidates += [(w, "witness") for w in sorted(set(event.witnesses))]
        elif not spoken and event.location is not None and memory.perception_location_fallback:
            present = sorted(who for who, place in where.items() if place == event.location)
            candidates += [(who, "witness") for who in present]
        out: list[tuple[str, str]] = []
        taken: set[str] = set()
        for character, part in candidates:
            if character is None or character in taken:
                continue
            if spoken and character == event.actor:
                continue
            if kind(character) != "character":
                continue
            taken.add(character)
            out.append((character, part))
        return out

    def _id(self, event: Event, character: str, kind: str) -> str:
        return belief_id(
            event.tenant_id,
            event.world_instance_id,
            event.timeline_id,
            event.seq,
            character,
            kind,
        )

    def _persistent(self, character: str, kind: str) -> bool:
        persistent = self.policy.memory.persistent
        return character in persistent.characters or kind in persistent.kinds

    def _seen(self, event: Event, character: str, part: str, kind: Kinds, name: Names) -> OMemory:
        importance, feeling, arousal = impact(event_kind(event.key), part, self.policy)
        payload_ids = [i for i in ids_in(event.payload.values()) if kind(i) != "unknown"]
        return OMemory(
            character=character,
            timeline=event.timeline_id,
            seq=event.seq,
            kind="event",
            belief_id=self._id(event, character, "event"),
            content=sentence(event, name),
            about=unique([event.actor, event.target, event.location, *payload_ids])[:MOST_ABOUT],
            source="seen",
            source_entity=None,
            hops=0,
            confidence=first_confidence("seen", self.policy),
            importance=importance,
            feeling=feeling,
            arousal=arousal,
            uncertain=False,
            game_time=event.game_time,
            persistent=self._persistent(character, "event"),
            facts=list({(f.subject, f.attribute): f for f in event.facts}.values())[:MOST_FACTS],
            origin=origin_id(event),
            tellers=[],
            event_kind=event_kind(event.key),
        )

    def _heard(
        self,
        event: Event,
        character: str,
        part: str,
        before: dict[str, Any],
        name: Names,
    ) -> OMemory | None:
        """What a listener takes from a conversation: a player's line as a conversation; a
        `told` as news of what the teller's memory is of, or of what the claim suggests."""
        now = before["now"] if event.story_minutes is None else event.story_minutes
        teller = None if event.key == PLAYER_SAID else self._teller_memory(event, before, now)
        claimed = claimed_facts(event)
        named = isinstance(event.payload.get("belief_id"), str)
        if event.key == TOLD and named and teller is None and not claimed and not spoken(event):
            self.reached["told naming a memory not held, saying nothing"] += 1
            return None  # it passes nothing
        claim = bare = ""
        if event.key == TOLD and teller is None:
            claim = self._claim_origin(event, claimed, before)
            about = ids_in([event.payload["about"]]) if "about" in event.payload else []
            bare = claim_origin(event, claimed, about)  # the claim itself, the record aside
            if event.actor is not None and not isinstance(event.payload.get("belief_id"), str):
                teller = self._news_passed_on(before, event.actor, claim, now)
                if teller is None and bare != claim:  # learned before the record held it
                    teller = self._news_passed_on(before, event.actor, bare, now)
        if event.key == PLAYER_SAID:
            source, origin = "player", origin_id(event)
            confidence = first_confidence("player", self.policy)
            told_of = news_kind(sentence(event, name), claimed)
            importance, feeling, arousal = impact("conversation", part, self.policy)
        elif teller is None:
            source, origin = "told", claim
            confidence = first_confidence("told", self.policy)
            told_of = news_kind(sentence(event, name), claimed)
            self.reached[f"told news of {told_of}"] += 1
            importance, feeling, arousal = impact(told_of, "heard", self.policy)
        else:
            source, origin = ("rumour" if teller.hops > 0 else "told"), teller.origin
            confidence = retold_confidence(teller.confidence, self.policy)
            told_of = tells_of(teller)
            importance, feeling, arousal = impact(told_of, "heard", self.policy)
        if self._holds_news(before, character, origin, now):
            return None
        if (
            bare
            and bare != claim
            and (
                self._holds_news(before, character, bare, now)
                or self._holds_news(before, character, claim, now)
            )
        ):
            return None  # SPEC 4, already known: told the claim, or saw what made it true
        if teller is not None and teller.hops >= FARTHEST_HOPS:
            return None
        if teller is not None and (
            character == teller.source_entity or character in teller.tellers
        ):
            return None  # SPEC 4: news they know, their own story told back
        if self._held_once(before, character, origin):
            self.reached["forgotten news told again"] += 1
        if teller is not None and spoken(event) is None:
            content = passed_on(teller, name)
        else:
            content = sentence(event, name)
        if "about" in event.payload:
            about_more = ids_in([event.payload["about"]])
        else:
            about_more = [] if teller is None else teller.about
        if event.payload.get("facts") is None and teller is not None:
            claimed = list(teller.facts)
        return OMemory(
            character=character,
            timeline=event.timeline_id,
            seq=event.seq,
            kind="knowledge",
            belief_id=self._id(event, character, "knowledge"),
            content=content,
            about=unique([event.actor, event.target, *about_more])[:MOST_ABOUT],
            source=source,
            source_entity=event.actor,
            hops=1 if teller is None else teller.hops + 1,
            confidence=confidence,
            importance=importance,
            feeling=feeling,
            arousal=arousal,
            uncertain=True,
            game_time=event.game_time,
            persistent=self._persistent(character, "knowledge"),
            facts=claimed[:MOST_FACTS],
            origin=origin,
            tellers=[
                *([] if teller is None else teller.tellers),
                *([] if event.actor is None else [event.actor]),
            ],
            event_kind=told_of,
        )

    def _teller_memory(
        self, event: Event, before: dict[str, Any], now: int | None
    ) -> OMemory | None:
        """The teller's memory a `told` names in `belief_id`, as the teller holds it at story
        minute `now` (`_as_held`); for an impression (no news), the teller's news it was formed
        beside, so held. None if it holds none, or has forgotten it."""
        named = event.payload.get("belief_id")
        if event.actor is None or not isinstance(named, str):
            return None
        mine = [m for m in before["memories"] if m.character == event.actor]
        named_ones = [m for m in mine if m.belief_id == named]
        if named_ones and named_ones[0].kind == "impression":
            impression = named_ones[0]
            named_ones = [
                m
                for m in mine
                if is_news(m)
                and (m.timeline, m.seq, m.origin)
                == (impression.timeline, impression.seq, impression.origin)
            ]
        if not named_ones:
            return None
        as_held = self._as_held(before, named_ones[0], now)
        if as_held is None:
            self.reached["named news forgotten"] += 1
        elif as_held is not named_ones[0]:
            self.reached["named news told faded"] += 1
        return as_held

    def _as_held(self, before: dict[str, Any], memory: OMemory, now: int | None) -> OMemory | None:
        """`memory` as its character holds it at story minute `now` (SPEC 8): None when
        forgotten, retold at confidence x retention when faded."""
        recalled = before["recalls"].get((memory.character, memory.belief_id), [])
        retention, state = held(memory, now, self.policy, recalled)
        if state == "forgotten":
            return None
        if state == "faded":
            return replace(
                memory,
                content=retelling(memory.content),
                confidence=round(memory.confidence * retention, 2),
            )
        return memory

    def _news_passed_on(
        self, before: dict[str, Any], teller: str, origin: str, now: int | None
    ) -> OMemory | None:
        """The teller's memory of the news `origin` that a `told` naming no memory passes on, as
        rumourmill documents it: of its memories of it, not impressions, those it has not
        forgotten at story minute `now`, as it holds them; the fewest hops, then the surest,
        then the newest (by position, then the smallest id). None if it holds none."""
        kept = []
        for memory in before["memories"]:
            if memory.character != teller or memory.origin != origin:
                continue
            if memory.kind == "impression":
                continue
            as_held = self._as_held(before, memory, now)
            if as_held is not None:
                kept.append(as_held)
        if not kept:
            return None
        passed = min(kept, key=lambda m: (m.hops, -m.confidence, -m.seq, m.belief_id))
        self.reached["told news its teller held"] += 1
        if passed.hops > 0:
            self.reached["told news its teller had second-hand"] += 1
        return passed

    def _holds_news(
        self, before: dict[str, Any], character: str, origin: str, now: int | None
    ) -> bool:
        """Whether `character` knows the news `origin` at story minute `now`, as rumourmill
        documents it: it holds a memory of it, not an impression (a feeling is no news), that
        it has not forgotten (its recalls counted); news it forgot can reach it again."""
        return any(
            m.character == character
            and m.origin == origin
            and m.kind != "impression"
            and held(m, now, self.policy, before["recalls"].get((character, m.belief_id), []))[1]
            != "forgotten"
            for m in before["memories"]
        )

    @staticmethod
    def _held_once(before: dict[str, Any], character: str, origin: str) -> bool:
        """Whether `character` learned the news `origin` before (it may have forgotten it)."""
        return any(
            m.character == character and m.origin == origin and m.kind != "impression"
            for m in before["memories"]
        )

    def _claim_origin(self, event: Event, claimed: list[Fact], before: dict[str, Any]) -> str:
        """Where news told with no known memory behind it started: the one event that made
        every claimed fact what the record has now (the first of the events in a row that said
        its value), else the claim itself."""
        record, made = before["record"], before["made"]
        makers: set[tuple[str, int] | None] = set()
        for fact in claimed:
            place = (fact.subject, fact.attribute)
            if place not in record or not json_equal(record[place], fact.value):
                makers.add(None)
            else:
                maker = made[place]
                makers.add((maker.timeline_id, maker.seq))
        if claimed and len(makers) == 1 and None not in makers:
            self.reached["news from the record"] += 1
            if any((fact.subject, fact.attribute) in before["said again"] for fact in claimed):
                self.reached["news of a fact said again"] += 1
            return origin_id(made[(claimed[0].subject, claimed[0].attribute)])
        about = ids_in([event.payload["about"]]) if "about" in event.payload else []
        return claim_origin(event, claimed, about)

    def fresh_claim_origin(self, tenant: str, world_id: str, event: Event) -> str:
        """The origin a `told` at `event` gives news no memory of the teller stands behind."""
        world = self.worlds[(tenant, world_id)]
        before = self._fold(world, self.ancestry(world, event.timeline_id, event.seq - 1))
        return self._claim_origin(event, claimed_facts(event), before)

    # ---------------------------------------------------------------- the read

    def timeline_ids(self, tenant: str, world_id: str) -> list[str]:
        world = self.worlds.get((tenant, world_id))
        return [] if world is None else sorted(world.timelines)

    def visible_memories(
        self, tenant: str, world_id: str, timeline: str, npc: str
    ) -> list[OMemory]:
        """Every memory of `npc` a read on `timeline` sees now (before caps)."""
        world = self.worlds.get((tenant, world_id))
        if world is None or timeline not in world.timelines:
            return []
        line = world.timelines[timeline]
        folded = self._fold(world, self.ancestry(world, timeline, line.processed))
        return [m for m in folded["memories"] if m.character == npc]

    def recorded_facts(self, tenant: str, world_id: str, timeline: str) -> list[dict[str, Any]]:
        """The world record a read on `timeline` sees now, as facts an event could state."""
        world = self.worlds.get((tenant, world_id))
        if world is None or timeline not in world.timelines:
            return []
        line = world.timelines[timeline]
        record = self._fold(world, self.ancestry(world, timeline, line.processed))["record"]
        return [
            {"subject": subject, "attribute": attribute, "value": value}
            for (subject, attribute), value in record.items()
        ]

    def read(self, tenant: str, world_id: str, timeline: str, npc: str) -> dict[str, Any]:
        world = self.worlds.get((tenant, world_id))
        if world is None or timeline not in world.timelines:
            raise OracleNotFound(timeline)
        line = world.timelines[timeline]
        segments = self.ancestry(world, timeline, line.processed)
        folded = self._fold(world, segments)
        mine = [m for m in folded["memories"] if m.character == npc]
        location = folded["where"].get(npc)
        if not mine and location is None:
            raise OracleNotFound(npc)
        record = folded["record"]

        def diverging(memory: OMemory) -> bool:
            return any(
                (f.subject, f.attribute) in record
                and not json_equal(record[(f.subject, f.attribute)], f.value)
                for f in memory.facts
            )

        events = sorted(
            (m for m in mine if m.kind == "event"), key=lambda m: (m.seq, m.belief_id), reverse=True
        )
        beliefs = sorted(
            (m for m in mine if m.kind != "event"),
            key=lambda m: (-m.importance, -m.seq, m.belief_id),
        )
        totals: dict[str, list[Any]] = {}
        for memory in mine:
            for entity in unique([*memory.about, memory.source_entity]):
                if entity == npc:
                    continue
                total = totals.setdefault(entity, [[], 0, 0])
                total[0].append(memory.feeling)
                total[1] += 1
                total[2] = max(total[2], memory.seq)
        ordered = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][2], item[0]))
        relations = [
            {
                "entity_id": entity,
                "feeling": mean_feeling(feelings),
                "memories": count,
                "last_seq": last,
            }
            for entity, (feelings, count, last) in ordered
        ]
        for what, shown, cap in (
            ("beliefs cap", beliefs, MAX_BELIEFS),
            ("recollections cap", events, MAX_RECOLLECTIONS),
            ("relations cap", relations, MAX_RELATIONS),
        ):
            if len(shown) > cap:
                self.reached[what] += 1
        if len(segments) >= 4 and mine:
            self.reached["ancestry of 4 timelines"] += 1
        return {
            "world_instance_id": world_id,
            "timeline_id": timeline,
            "npc_id": npc,
            "acknowledged_seq": line.acknowledged,
            "processed_seq": self.reached_seq(world, timeline),
            "location": location,
            "beliefs": [m.read(diverging(m)) for m in beliefs[:MAX_BELIEFS]],
            "relations": relations[:MAX_RELATIONS],
            "recollections": [m.read(diverging(m)) for m in events[:MAX_RECOLLECTIONS]],
        }


def mean_feeling(feelings: list[float]) -> Fraction:
    """The exact mean of the feelings as written (shown by `shown_feeling`)."""
    return sum((Fraction(str(f)) for f in feelings), Fraction(0)) / len(feelings)


def shown_feeling(exact: Fraction) -> float:
    """A relation's feeling as a read shows it: 2 decimals, halves up (rumourmill's rule for
    every 2-decimal number: 0.075 is 0.08)."""
    quotient = Decimal(exact.numerator) / Decimal(exact.denominator)
    return float(quotient.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def compare_reads(actual: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """The differences between a production read and the oracle's, as plain lines."""
    problems: list[str] = []
    if list(actual) != list(expected):
        problems.append(f"keys {list(actual)} != {list(expected)}")
    for name in expected:
        if name == "relations":
            continue
        if actual.get(name) != expected[name]:
            problems.append(f"{name}: production {actual.get(name)!r} != oracle {expected[name]!r}")
    got, want = actual.get("relations", []), expected["relations"]
    plain = [(r["entity_id"], r["memories"], r["last_seq"]) for r in got]
    if plain != [(r["entity_id"], r["memories"], r["last_seq"]) for r in want]:
        problems.append(f"relations: production {got!r} != oracle {want!r}")
    else:
        for shown, expected_relation in zip(got, want, strict=True):
            if shown["feeling"] != shown_feeling(expected_relation["feeling"]):
                problems.append(
                    f"relation {shown['entity_id']} feeling {shown['feeling']} != "
                    f"{shown_feeling(expected_relation['feeling'])}"
                )
    return problems
