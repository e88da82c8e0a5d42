"""Short-term dialogue (seed 003, SPEC 13): the last lines of a conversation, word for word.

Turns are `player-said` (player to character) and `npc-replied` (character to player) lines.
Each character keeps two scopes, like a persona: the player scope (character, player), which
follows the player across places, and the place scope (character, location), shared by every
player there (a line without `location` is said where the character in it was last reported
before it); a `payload.private: true` line skips the place scope. Two characters in one place
keep separate scopes. Skipped outright: a stop turn (`payload.stopped: true`), a line with no
text once normalised, and any line of a player declared `privacy: "full"` (on any timeline
of the world: consent is no part of the story, and loading a save does not take it back).

A reply to a player who never spoke is kept like any line: a character may speak first (a
greeting), and what the player heard is part of the conversation. Turns are stored by position
and read through the ancestry (`projections.versions`' way), so loading a save forgets what
was said after it. A scope shows its newest `turns_kept` turns; they are hidden once
`expiry_hours` of real time have passed since its last turn (`summarised_hours` once a
`dialogue-summarised` event gave the scope a summary). Real time is the event's `occurred_at`,
else the Kafka record's timestamp (`with_real_time`); a turn known by neither has no time and
its scope never expires (a file replay of lines without `occurred_at`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
from pydantic import JsonValue

from projections import whereabouts
from projections.catalogue import CHARACTER, UNKNOWN, Catalogue, Declarations
from projections.event_keys import DIALOGUE_SUMMARISED, DIALOGUE_TURN_KEYS, PLAYER_SAID
from projections.key_prefixes import DIALOGUE_SUMMARIES, DIALOGUE_TURNS, PLAYER_PRIVACY
from projections.keys import pack, unpack
from projections.runtime_read import known_of, nothing_known, timeline_view
from projections.state import StateTransaction
from projections.timelines import Ancestry, as_of
from projections.wording import cut, without_brackets
from schemas import Event
from schemas.memory import Speaker
from schemas.policy import DialoguePolicy
from schemas.text import visible

ScopeKind = Literal["player", "place"]

CUSTOM_EMOJI = re.compile(r"<a?:([A-Za-z0-9_~]+):[0-9]+>")
"""A custom emoji as chat platforms send it, `<:name:id>`: kept as `:name:`."""
HOUR_MS = 3_600_000


def normalised(text: str, max_chars: int) -> str:
    """A line as the conversation keeps it: emoji by name, bracketed annotations injected around
    it (`[whispers]`, `[context: ... [more]]`) gone (brackets around no letter, a dice roll's
    `[20]`, stay: said, not an annotation), spaces collapsed, cut to `max_chars` (the last one
    an ellipsis) when longer; empty when nothing of it is visible."""
    emoji_named = CUSTOM_EMOJI.sub(r":\1:", text)
    text = " ".join(without_brackets(emoji_named, "[", "]", " ", wordless_kept=True).split())
    if not visible(text):
        return ""  # zero-width spaces, a BOM, blank fillers: an empty line
    return cut(text, max_chars)


@dataclass(frozen=True, slots=True)
class Turn:
    """One line to keep: who said it to whom, what, where, and when in real time."""

    character_id: str
    player_id: str
    speaker: Speaker
    text: str
    location: str | None
    private: bool
    at_ms: int | None


def turn_of(
    tx: StateTransaction,
    event: Event,
    ancestry: Ancestry,
    catalogue: Catalogue,
    policy: DialoguePolicy,
) -> Turn | str | None:
    """The turn an event's line makes; None when the seed's rules skip it (a stop turn, a
    player declared fully private, no text once normalised); else why the line, not a turn as
    sent, was not kept (for its ack: it was dropped without a word), as a line between a
    character and someone not a character is (only characters keep dialogue, as only they
    form memories: a line to another player, or to a place, was kept as theirs). A line
    without `location` is said where the character in it is known to be as of the event
    (state before it, so a replay keeps it in the same place)."""
    if not policy.enabled or event.key not in DIALOGUE_TURN_KEYS:
        return None
    for flag in ("stopped", "private"):
        if not isinstance(sent := event.payload.get(flag, False), bool | None):
            return _not_a_flag(flag, sent)
    if event.payload.get("stopped") is True:
        return None
    said_by_player = event.key == PLAYER_SAID
    if event.actor is None or event.target is None:
        roles = (
            ("the player", "the character") if said_by_player else ("the character", "the player")
        )
        return f"dialogue line not kept: it needs actor ({roles[0]}) and target ({roles[1]})"
    player, character = (
        (event.actor, event.target) if said_by_player else (event.target, event.actor)
    )
    if (kind := catalogue.kind_of(character)) != CHARACTER:
        return (
            f"dialogue line not kept: {character!r} is {_a_kind(kind)}, not a character (only"
            " characters keep dialogue)"
        )
    if catalogue.kind_of(player) == CHARACTER:
        return (
            f"dialogue line not kept: {player!r} is a character, not the player a line is"
            " between a character and"
        )
    if _fully_private(tx, event, player, catalogue):
        return None
    text = event.payload.get("text")
    if not isinstance(text, str):
        sent_as_content = "text" not in event.payload and "content" in event.payload
        hint = " (payload.content was sent: a line's words go in payload.text)"
        return "dialogue line not kept: payload.text must be the line as text" + (
            hint if sent_as_content else ""
        )
    line = normalised(text, policy.max_line_chars)
    if not line:
        return None
    return Turn(
        character_id=character,
        player_id=player,
        speaker="player" if said_by_player else "character",
        text=line,
        location=whereabouts.place_of(
            tx, event.tenant_id, event.world_instance_id, ancestry, character, event.location
        ),
        private=event.payload.get("private") is True,
        at_ms=_epoch_ms(event.occurred_at),
    )


def _not_a_flag(flag: str, sent: object) -> str:
    """Why a line whose `flag` is not a JSON boolean (or null) is not kept: `"true"` or 1,
    read as false, shared a private line with every player at the place, and kept a stop turn
    as a line."""
    sent_as = {str: "a string", int: "a number", float: "a number", list: "an array"}
    return (
        f"dialogue line not kept: payload.{flag} must be true or false (it was sent as"
        f" {sent_as.get(type(sent), 'an object')})"
    )


def record_privacy(tx: StateTransaction, event: Event) -> None:
    """Keep the `privacy` each entity of the event is declared with, for the whole world: a
    player's consent is no part of the story, and loading a save from before it is given does
    not take it back (kept with the timeline's declarations, it did: the player's lines were
    kept again on the loaded save). The last declared, on any timeline, holds."""
    for entity, declared in event.entities.items():
        extra = declared.model_extra or {}
        if "privacy" in extra:
            key = pack(PLAYER_PRIVACY, event.tenant_id, event.world_instance_id, entity)
            tx.put(key, orjson.dumps(extra["privacy"]))


def _a_kind(kind: str) -> str:
    """A kind as a sentence names it: "a player", "an item", "of no known kind"."""
    if kind == UNKNOWN:
        return "of no known kind (declare it, or give it an id the policy's patterns know)"
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _fully_private(
    tx: StateTransaction, event: Event, player: str, declarations: Declarations
) -> bool:
    """Whether the player is declared `privacy: "full"` (`record_privacy`), however cased and
    spaced (the seed's own spelling is `FULL`: taken as another level, every line was kept).
    A store of an earlier release kept it with the timeline's declarations alone: read there
    for a player declared nothing since."""
    stored = tx.get(pack(PLAYER_PRIVACY, event.tenant_id, event.world_instance_id, player))
    if stored is not None:
        privacy = orjson.loads(stored)
    else:
        declared = declarations.get(player)
        privacy = None if declared is None else (declared.model_extra or {}).get("privacy")
    return isinstance(privacy, str) and privacy.strip().casefold() == "full"


def _epoch_ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def with_real_time(
    event: Event, raw: bytes, record_timestamp_ms: int | None
) -> tuple[Event, bytes]:
    """A dialogue line without `occurred_at` stamped with the Kafka record's timestamp, so that
    it keeps that time even when it waits in the deferral buffer (stored as `raw`). The time is
    added to the line as it was sent, which is kept whole: written anew from the event, it lost
    what no field of ours says (a fact's `value` of null was dropped, and the stored line no
    longer read as an event)."""
    if event.key not in DIALOGUE_TURN_KEYS or event.occurred_at is not None:
        return event, raw
    if record_timestamp_ms is None or not 0 <= record_timestamp_ms <= LAST_MS:
        return event, raw  # none, or no clock's (microseconds sent as milliseconds): no time
    occurred_at = datetime.fromtimestamp(record_timestamp_ms / 1000, UTC)
    stamped = event.model_copy(update={"occurred_at": occurred_at})
    sent = orjson.loads(raw)
    sent["occurred_at"] = occurred_at.isoformat()
    return stamped, orjson.dumps(sent)


def _scope_prefix(
    prefix: str, where: tuple[str, str, str], character: str, kind: str, scope_id: str
) -> bytes:
    """The key scope of one dialogue scope on one timeline (`where`: tenant, world, timeline)."""
    return pack(prefix, *where, character, kind, scope_id)


def _scopes_of(turn: Turn) -> list[tuple[ScopeKind, str]]:
    scopes: list[tuple[ScopeKind, str]] = [("player", turn.player_id)]
    if turn.location is not None and not turn.private:
        scopes.append(("place", turn.location))
    return scopes


def record_dialogue(
    tx: StateTransaction,
    event: Event,
    ancestry: Ancestry,
    catalogue: Catalogue,
    policy: DialoguePolicy,
) -> str | None:
    """Keep the privacy the event declares (`record_privacy`), then its line in its scopes, or
    a summary for its scope. Returns why an event that asked for something was not recorded
    (for its ack), else None."""
    record_privacy(tx, event)
    if event.key == DIALOGUE_SUMMARISED:
        if not policy.enabled:
            return "dialogue summary not recorded: memory.dialogue.enabled is false in this world"
        return _record_summary(tx, event, ancestry)
    turn = turn_of(tx, event, ancestry, catalogue, policy)
    if not isinstance(turn, Turn):
        return turn
    where = (event.tenant_id, event.world_instance_id, event.timeline_id)
    seen = (event.tenant_id, event.world_instance_id)
    before_it = as_of(ancestry, event.seq - 1)  # applied again, the event meets its own turn
    for kind, scope_id in _scopes_of(turn):
        newest = _newest(tx, seen, before_it, DIALOGUE_TURNS, turn.character_id, kind, scope_id)
        summary = _newest(tx, seen, ancestry, DIALOGUE_SUMMARIES, turn.character_id, kind, scope_id)
        since = int(turn.speaker == "character")  # the seed's count: one per reply
        if newest is not None and (summary is None or int(summary["seq"]) < int(newest["seq"])):
            since += int(newest["since_summary"])
        latest_before = None if newest is None else _latest_ms(newest)
        stored: dict[str, JsonValue] = {
            "seq": event.seq,
            "speaker": turn.speaker,
            "player_id": turn.player_id,
            "text": turn.text,
            "at_ms": turn.at_ms,
            "since_summary": since,
            "before_ms": latest_before,
            "latest_ms": _later(latest_before, turn.at_ms),
        }
        tx.put(
            _scope_prefix(DIALOGUE_TURNS, where, turn.character_id, kind, scope_id)
            + pack(event.seq),
            orjson.dumps(stored),
        )
    return None


def _record_summary(tx: StateTransaction, event: Event, ancestry: Ancestry) -> str | None:
    """Keep a scope's summary; a summary of a scope with no turns on the timeline is refused."""
    payload = event.payload
    kind, summary = payload.get("scope"), payload.get("summary")
    categories = payload.get("categories")
    categories = [] if categories is None else categories  # optional: absent or null, none
    scope_id = event.target if kind == "player" else None
    if kind == "place" and event.actor is not None:  # where its lines were said: `turn_of`
        scope_id = whereabouts.place_of(
            tx, event.tenant_id, event.world_instance_id, ancestry, event.actor, event.location
        )
    if event.actor is None or scope_id is None:
        return (
            "dialogue summary not recorded: it needs actor (the character) and payload.scope "
            "'player' (with target) or 'place' (with location, or the character's known place)"
        )
    if not isinstance(summary, str) or not visible(summary):
        return "dialogue summary not recorded: payload.summary must be non-empty text"
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        return "dialogue summary not recorded: payload.categories must be a list of strings"
    seen = (event.tenant_id, event.world_instance_id)
    if _newest(tx, seen, ancestry, DIALOGUE_TURNS, event.actor, str(kind), scope_id) is None:
        return (
            f"dialogue summary not recorded: {event.actor!r} has no {kind} scope "
            f"{scope_id!r} on timeline {event.timeline_id!r}"
        )
    where = (event.tenant_id, event.world_instance_id, event.timeline_id)
    tx.put(
        _scope_prefix(DIALOGUE_SUMMARIES, where, event.actor, str(kind), scope_id)
        + pack(event.seq),
        orjson.dumps({"seq": event.seq, "summary": summary.strip(), "categories": categories}),
    )
    return None


def _latest_ms(turn: dict[str, Any]) -> int | None:
    """The latest real time of the scope's lines up to `turn`, `turn`'s own among them (a turn
    an earlier release stored keeps only its own time)."""
    latest = turn.get("latest_ms", turn["at_ms"])
    return None if latest is None else int(latest)


def _later(one: int | None, other: int | None) -> int | None:
    """The later of two real times, either of which may be unknown."""
    known = [moment for moment in (one, other) if moment is not None]
    return max(known) if known else None


def _newest(
    tx: StateTransaction,
    world: tuple[str, str],
    ancestry: Ancestry,
    prefix: str,
    character: str,
    kind: str,
    scope_id: str,
) -> dict[str, Any] | None:
    found = _newest_many(tx, world, ancestry, prefix, character, kind, scope_id, 1)
    return found[0] if found else None


def _newest_many(
    tx: StateTransaction,
    world: tuple[str, str],
    ancestry: Ancestry,
    prefix: str,
    character: str,
    kind: str,
    scope_id: str,
    limit: int,
) -> list[dict[str, Any]]:
    """The newest `limit` entries of a scope the timeline sees, newest first (as stored)."""
    found: list[dict[str, Any]] = []
    for segment in ancestry:
        scope = _scope_prefix(prefix, (*world, segment.timeline_id), character, kind, scope_id)
        for _, raw in tx.scan(scope, reverse=True, start=scope + pack(segment.upto_seq)):
            found.append(orjson.loads(raw))
            if len(found) == limit:
                return found
    return found


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
LAST_MS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
"""The first and last milliseconds a time can be written at (the start of year 1, the end of
year 9999, in UTC). A line may say it occurred late in 9999, or early in year 1 east of UTC
(the contract takes any time with an offset): its scope's expiry, hours later, or the line's
own time in UTC, is written as the nearest of these rather than failing every read of the
scope."""


def _iso(at_ms: int | None) -> str | None:
    if at_ms is None:
        return None
    moment = EPOCH + timedelta(milliseconds=max(FIRST_MS, min(at_ms, LAST_MS)))
    return moment.isoformat().replace("+00:00", "Z")


def scope_read(
    tx: StateTransaction,
    world: tuple[str, str],
    ancestry: Ancestry,
    character: str,
    kind: ScopeKind,
    scope_id: str,
    now_ms: int,
    policy: DialoguePolicy,
) -> dict[str, JsonValue]:
    """One scope as a read shows it at real time `now_ms`: its newest turns (oldest first) of
    the conversation still going on, unless that expired too, its summary, and how many
    replies came since the summary. The scope lives on from its latest turn in real time (two
    clocks may stamp a reply before the line it answers); a newest turn with no time keeps it
    alive for good, as a scope of such turns alone."""
    newest_first = _newest_many(
        tx, world, ancestry, DIALOGUE_TURNS, character, kind, scope_id, policy.turns_kept
    )
    summary = _newest(tx, world, ancestry, DIALOGUE_SUMMARIES, character, kind, scope_id)

    def expiry_ms_at(turn: dict[str, Any]) -> int:
        """How long the scope lived after a turn before `turn`: longer once summarised."""
        seq = int(turn["seq"])
        before = summary
        if before is not None and int(before["seq"]) > seq:  # the one in force at `turn`
            earlier = as_of(ancestry, seq)
            before = _newest(tx, world, earlier, DIALOGUE_SUMMARIES, character, kind, scope_id)
        hours = policy.expiry_hours if before is None else policy.summarised_hours
        return int(hours * HOUR_MS)

    turns = _conversation(newest_first[::-1], expiry_ms_at)
    last = turns[-1] if turns else None
    since = 0
    if last is not None and (summary is None or int(summary["seq"]) < int(last["seq"])):
        since = int(last["since_summary"])
    hours = policy.expiry_hours if summary is None else policy.summarised_hours
    last_at = None if last is None or last["at_ms"] is None else _latest_ms(last)
    expires_ms = None if last_at is None else last_at + int(hours * HOUR_MS)
    expired = expires_ms is not None and now_ms >= expires_ms
    return {
        "scope": kind,
        "player_id" if kind == "player" else "location": scope_id,
        "turns": []
        if expired
        else [
            {
                "seq": turn["seq"],
                "speaker": turn["speaker"],
                "speaker_id": character if turn["speaker"] == "character" else turn["player_id"],
                "text": turn["text"],
                "occurred_at": _iso(None if turn["at_ms"] is None else int(turn["at_ms"])),
            }
            for turn in turns
        ],
        "expired": expired,
        "last_turn_at": _iso(last_at),
        "expires_at": _iso(expires_ms),
        "summary": None if summary is None else summary["summary"],
        "categories": [] if summary is None else summary["categories"],
        "turns_since_summary": since,
    }


def _conversation(
    oldest_first: list[dict[str, Any]], expiry_ms_at: Callable[[dict[str, Any]], int]
) -> list[dict[str, Any]]:
    """The turns of the conversation still going on: from the last turn said once the scope had
    expired, past the latest line before it in real time, whether or not that line is among
    the turns shown (the seed's cache had dropped what came before: a player back days later
    was shown the last visit's lines again). Turns with no time neither end a conversation nor
    start one. A turn an earlier release stored knows no latest time before it: the latest of
    the turns shown before it stands in."""
    start, shown_latest = 0, None
    for index, turn in enumerate(oldest_first):
        if turn["at_ms"] is None:
            continue
        at = int(turn["at_ms"])
        latest = turn.get("before_ms", shown_latest)
        if latest is not None and at - int(latest) >= expiry_ms_at(turn):
            start = index
        shown_latest = _later(shown_latest, at)
    return oldest_first[start:]


def _spoke_or_heard(
    tx: StateTransaction, world: tuple[str, str], ancestry: Ancestry, character: str
) -> bool:
    """Whether the timeline kept any line of the character's, in any scope, expired or not:
    known to one player, it is known to all (a character who spoke to one player alone was
    a 404 to the others)."""
    for segment in ancestry:
        prefix = pack(DIALOGUE_TURNS, *world, segment.timeline_id, character)
        for key, _ in tx.scan(prefix):
            if int(unpack(key[len(prefix) :])[-1]) <= segment.upto_seq:
                return True
    return False


def dialogue_read(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    player_id: str,
    location: str | None,
    now_ms: int,
    policy: DialoguePolicy,
    as_of_seq: int | None = None,
) -> dict[str, JsonValue]:
    """Both scopes of a character for one player: the player scope, and the place scope of
    `location` (default: where the character is; none when that is unknown). Expiry is judged
    at real time `now_ms` (the wall clock when served), whatever `as_of_seq` cuts. NotFound for
    a character of whom nothing is known there and who heard no line, expired or not."""
    record, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    world = (tenant_id, world_id)
    place = whereabouts.place_of(tx, tenant_id, world_id, ancestry, npc_id, location)
    player_scope = scope_read(tx, world, ancestry, npc_id, "player", player_id, now_ms, policy)
    place_scope = (
        None
        if place is None
        else scope_read(tx, world, ancestry, npc_id, "place", place, now_ms, policy)
    )
    if not known_of(tx, keys, ancestry, npc_id) and not _spoke_or_heard(
        tx, world, ancestry, npc_id
    ):
        raise nothing_known(npc_id, timeline_id)
    return {
        "world_instance_id": world_id,
        "timeline_id": timeline_id,
        "npc_id": npc_id,
        "processed_seq": record.processed_seq,
        "now": _iso(now_ms),
        "player": player_scope,
        "place": place_scope,
    }
