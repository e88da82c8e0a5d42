"""Short-term dialogue (seed 003): scopes, skip rules, ten turns, real-time expiry, branches."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from projections.delivery import SourceMessage
from projections.dialogue import dialogue_read, normalised
from projections.event_keys import NPC_REPLIED, PLAYER_SAID
from projections.key_prefixes import DIALOGUE_TURNS, PLAYER_PRIVACY
from projections.keys import pack
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from schemas.policy import DialoguePolicy

START_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


def at(minutes: int) -> str:
    """The ISO time `minutes` after the story's start."""
    moment = datetime.fromtimestamp((START_MS + minutes * MINUTE_MS) / 1000, UTC)
    return moment.isoformat().replace("+00:00", "Z")


class Talk:
    """A world fed line by line through the projector."""

    def __init__(self) -> None:
        self.state = MemoryState()
        self.policy = resolve(None, {})
        """The policy of the world (every event takes it as it stands)."""
        self.projector = Projector(lambda tenant, world: self.policy)
        self.offset = 0
        self.seq: dict[str, int] = {}
        self.acks: list[dict[str, Any]] = []

    def send(self, timeline: str = "main", **fields: Any) -> int:
        seq = fields.pop("seq", self.seq.get(timeline, 0) + 1)
        self.seq[timeline] = seq
        timestamp_ms = fields.pop("ts", None)
        event = {"world_instance_id": "w", "timeline_id": timeline, "seq": seq} | fields
        message = SourceMessage("events", 0, self.offset, b"w", orjson.dumps(event), timestamp_ms)
        intake = self.projector.receive(self.state, message)
        self.offset += 1
        self.acks += [ack.model_dump(mode="json") for ack in intake.acks]
        return seq

    def player(
        self,
        text: str,
        *,
        player: str = "p1",
        npc: str = "npc-mara",
        minute: int | None = 0,
        location: str | None = "loc-inn",
        record_ms: int | None = None,
        timeline: str = "main",
        **payload: Any,
    ) -> int:
        """The player's line to the character (see `line`)."""
        return self.line(
            PLAYER_SAID, player, npc, text, minute, location, record_ms, payload, timeline
        )

    def reply(
        self,
        text: str,
        *,
        player: str = "p1",
        npc: str = "npc-mara",
        minute: int | None = 0,
        location: str | None = "loc-inn",
        record_ms: int | None = None,
        timeline: str = "main",
        **payload: Any,
    ) -> int:
        """The character's line to the player (see `line`)."""
        return self.line(
            NPC_REPLIED, npc, player, text, minute, location, record_ms, payload, timeline
        )

    def line(
        self,
        key: str,
        actor: str,
        target: str,
        text: str,
        minute: int | None,
        location: str | None,
        record_ms: int | None,
        payload: dict[str, Any],
        timeline: str = "main",
    ) -> int:
        """A line at `minute` of the story's real time; None: one with no `occurred_at`, timed
        by its Kafka record (`record_ms`), if any (a file replay's has neither)."""
        player = actor if key == PLAYER_SAID else target
        said = {} if minute is None else {"occurred_at": at(minute)}
        return self.send(
            timeline,
            key=key,
            actor=actor,
            target=target,
            players=[player],
            location=location,
            payload={"text": text} | payload,
            ts=record_ms,
            **said,
        )

    def summarise(self, summary: str, *, player: str = "p1", **payload: Any) -> int:
        """Mara's player scope with `player` summarised (scope and fields overridable)."""
        return self.send(
            key="loreweaver.memory.dialogue-summarised",
            actor="npc-mara",
            target=player,
            payload={"scope": "player", "summary": summary} | payload,
        )

    def read(
        self,
        *,
        player: str = "p1",
        npc: str = "npc-mara",
        location: str | None = "loc-inn",
        minute: float = 1,
        timeline: str = "main",
        as_of_seq: int | None = None,
    ) -> dict[str, Any]:
        return dialogue_read(
            self.state,
            "default",
            "w",
            timeline,
            npc,
            player,
            location,
            START_MS + int(minute * MINUTE_MS),
            self.policy.memory.dialogue,  # as the worker's read takes the world's
            as_of_seq,
        )


def texts(scope: dict[str, Any] | None) -> list[str]:
    assert scope is not None
    return [turn["text"] for turn in scope["turns"]]


def test_a_line_and_its_reply_land_in_the_player_scope_and_the_place_scope() -> None:
    talk = Talk()
    talk.player("Where is your son?")
    talk.reply("Gone to sea.", minute=1)
    read = talk.read(minute=2)
    assert texts(read["player"]) == texts(read["place"]) == ["Where is your son?", "Gone to sea."]
    assert [turn["speaker_id"] for turn in read["player"]["turns"]] == ["p1", "npc-mara"]
    assert read["player"]["turns"][1]["occurred_at"] == "2024-05-01T12:01:00Z"


def test_the_player_scope_follows_the_player_and_the_place_scope_is_shared() -> None:
    talk = Talk()
    talk.player("Hello at the inn", location="loc-inn")
    talk.player("Hello at the dock", location="loc-dock")
    talk.player("I am another player", player="p2", location="loc-inn")
    assert texts(talk.read(location="loc-inn")["player"]) == [
        "Hello at the inn",
        "Hello at the dock",
    ]
    assert texts(talk.read(location="loc-inn")["place"]) == [
        "Hello at the inn",
        "I am another player",
    ]
    assert texts(talk.read(location="loc-dock")["place"]) == ["Hello at the dock"]


def test_a_line_without_location_reaches_the_place_the_character_is_known_to_be() -> None:
    """The place is the character's as of the line (not the player's, not a later one)."""
    talk = Talk()
    talk.send(key="loreweaver.movement.location-entered", actor="npc-mara", location="loc-inn")
    talk.send(key="loreweaver.movement.location-entered", actor="p1", location="loc-dock")
    talk.player("Where is your son?", location=None)
    talk.reply("Gone to sea.", location=None)
    talk.send(key="loreweaver.movement.location-entered", actor="npc-mara", location="loc-dock")
    talk.reply("The tide is turning.", location=None)
    assert texts(talk.read(location="loc-inn")["place"]) == ["Where is your son?", "Gone to sea."]
    assert texts(talk.read(location=None)["place"]) == ["The tide is turning."]
    assert talk.read(location=None)["place"]["location"] == "loc-dock"


def test_a_place_summary_without_location_summarises_where_the_character_is() -> None:
    """As its lines without location are said there; it was refused as malformed."""
    talk = Talk()
    talk.send(key="loreweaver.movement.location-entered", actor="npc-mara", location="loc-inn")
    talk.player("Where is your son?", location=None)
    talk.summarise("Asked after her son", scope="place")
    assert talk.acks[-1]["reason"] is None
    assert talk.read(location=None)["place"]["summary"] == "Asked after her son"


def test_a_private_line_skips_the_place_scope_only() -> None:
    talk = Talk()
    talk.player("A secret", private=True)
    read = talk.read()
    assert texts(read["player"]) == ["A secret"]
    assert texts(read["place"]) == []


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"stopped": True}, "a stop turn"),
        ({"text": "   "}, "empty"),
        ({"text": "[sighs]"}, "only an annotation"),
        ({"text": "\u200b \ufeff\u2060"}, "nothing visible: zero-width spaces, a BOM"),
        ({"text": "\u3164\u2800\ufe0f"}, "nothing visible: a blank filler, a braille blank"),
    ],
)
def test_stop_turns_and_empty_lines_are_skipped(payload: dict[str, Any], why: str) -> None:
    talk = Talk()
    talk.player("kept")
    talk.send(
        key="loreweaver.conversation.player-said",
        actor="p1",
        target="npc-mara",
        players=["p1"],
        location="loc-inn",
        payload={"text": "dropped"} | payload,
    )
    assert texts(talk.read()["player"]) == ["kept"], why


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            {"key": NPC_REPLIED, "actor": "npc-mara", "payload": {"text": "Hello"}},
            "it needs actor (the character) and target (the player)",
        ),
        (
            {"key": PLAYER_SAID, "target": "npc-mara", "payload": {"text": "Hi"}},
            "it needs actor (the player) and target (the character)",
        ),
        (
            {"key": PLAYER_SAID, "actor": "p1", "target": "npc-mara", "payload": {"text": 42}},
            "payload.text must be the line as text",
        ),
        (
            {"key": NPC_REPLIED, "actor": "npc-mara", "target": "p1", "payload": {"content": "Hi"}},
            "payload.text must be the line as text (payload.content was sent: a line's words go "
            "in payload.text)",
        ),
        (  # read as false, a private line was shared with every player at the place
            {
                "key": PLAYER_SAID,
                "actor": "p1",
                "target": "npc-mara",
                "payload": {"text": "meet me alone", "private": "true"},
            },
            "payload.private must be true or false (it was sent as a string)",
        ),
        (  # read as false, a stop turn was kept as a line
            {"key": NPC_REPLIED, "actor": "npc-mara", "target": "p1", "payload": {"stopped": 1}},
            "payload.stopped must be true or false (it was sent as a number)",
        ),
    ],
)
def test_a_line_that_cannot_be_a_turn_is_acked_with_why(line: dict[str, Any], why: str) -> None:
    """It was dropped, acked `processed` with no reason: an operator could not tell a line sent
    wrongly from one the seed's rules skip."""
    talk = Talk()
    talk.player("kept")
    talk.send(location="loc-inn", **line)
    assert talk.acks[-1]["reason"] == f"dialogue line not kept: {why}"
    assert texts(talk.read()["player"]) == ["kept"]


def test_a_players_privacy_holds_on_a_save_loaded_from_before_it_was_declared() -> None:
    """Consent is no part of the story: a save loaded from before the player opted out kept
    their lines again (the declaration was the timeline's), and opting in again anywhere
    holds everywhere too."""
    talk = Talk()
    talk.player("hello")
    talk.send(key="world.entity-declared", entities={"p1": {"privacy": "full"}})
    talk.player("my address is 12 Elm St")
    branch = {"parent_timeline_id": "main", "after_seq": 1}
    talk.send(timeline="b", seq=2, key="weather.rain-began", branch=branch)
    talk.player("my address is 12 Elm St", timeline="b")
    assert texts(talk.read()["player"]) == texts(talk.read(timeline="b")["player"]) == ["hello"]
    talk.send(timeline="b", key="world.entity-declared", entities={"p1": {"privacy": None}})
    talk.player("I am back", minute=2)
    assert texts(talk.read(minute=3)["player"]) == ["hello", "I am back"]


def test_a_privacy_a_store_of_an_earlier_release_kept_with_its_timeline_holds_there() -> None:
    """Upgraded, a store holds no world-wide privacy for what was declared before: the
    timeline's declaration still keeps the player's lines out."""
    talk = Talk()
    talk.send(key="world.entity-declared", entities={"p1": {"privacy": "full"}})
    for key, _ in list(talk.state.scan(pack(PLAYER_PRIVACY))):
        talk.state.delete(key)  # as a store of the release before keeps it
    talk.player("You will not remember this")
    talk.player("Someone else speaks", player="p2")
    assert texts(talk.read()["player"]) == []


@pytest.mark.parametrize("privacy", ["full", "FULL", " Full "])
def test_a_player_declared_fully_private_is_never_captured(privacy: str) -> None:
    """However spelt: the seed's own level is `FULL`, and taken as another level the player's
    every line was kept, the ack saying nothing."""
    talk = Talk()
    talk.send(key="world.entity-declared", entities={"p1": {"name": "Ilse", "privacy": privacy}})
    talk.player("You will not remember this")
    talk.reply("Remember what?")
    talk.player("Someone else speaks", player="p2")
    read = talk.read()
    assert texts(read["player"]) == []
    assert texts(read["place"]) == ["Someone else speaks"]


def test_text_is_normalised_emoji_by_name_annotations_stripped_long_lines_capped() -> None:
    assert normalised("Hi <:wave:1234> [smiles warmly] there", 100) == "Hi :wave: there"
    assert normalised("<a:dance:99>", 100) == ":dance:"
    capped = normalised("x" * 50, 20)
    assert capped == "x" * 19 + "…"
    assert normalised("x" * 20, 20) == "x" * 20  # cut only when it is longer
    talk = Talk()
    talk.player("y" * 5000)
    assert texts(talk.read()["player"]) == ["y" * 999 + "…"]


def test_brackets_around_no_letter_are_what_was_said_not_an_annotation() -> None:
    """A dice roll, an index or a code lost its words: "I rolled a [20]!" was kept as "I rolled
    a!". An annotation holds a letter somewhere, in a pair nested in it too."""
    assert normalised("I rolled a [20]!", 100) == "I rolled a [20]!"
    assert (
        normalised("Set x[0] = 5 and the code [7-4-1]", 100) == "Set x[0] = 5 and the code [7-4-1]"
    )
    assert normalised("[[20]] ok [...]", 100) == "[[20]] ok [...]"
    assert normalised("hi [smiles [20]] there [[nods]]", 100) == "hi there"
    assert normalised("roll [1d20]", 100) == "roll"  # a letter in it: taken for an annotation


def test_an_annotation_taken_out_before_punctuation_leaves_no_space_before_it() -> None:
    """The game was handed "Well , fine." for "Well [sighs], fine.", and a space in a
    language written without any."""
    assert normalised("Well [sighs], fine.", 100) == "Well, fine."
    assert normalised("I know [leans in] [nods].", 100) == "I know."
    assert normalised("Hello [waves]! Come [beckons] in", 100) == "Hello! Come in"
    assert normalised('"I know [sighs]", she said.', 100) == '"I know", she said.'
    assert normalised('"[sighs] Hello," he said', 100) == '"Hello," he said'
    assert normalised("« [soupire] Oui »", 100) == "« Oui »"  # spaced as French writes it
    comma = "\uff0c"  # the full-width comma Chinese writes
    assert normalised(f"你好[笑]{comma}朋友。我知道[叹气]。", 100) == f"你好{comma}朋友。我知道。"
    assert normalised("你好[笑]朋友", 100) == "你好朋友"  # no space between such letters
    assert normalised("¿[duda] Qué quieres?", 100) == "¿Qué quieres?"
    assert normalised("هل رأيته [يتردد]؟", 100) == "هل رأيته؟"  # Arabic's question mark
    assert normalised('"[sighs][pause] Hello"', 100) == '"Hello"'  # no "[" left of the second
    assert normalised('He said "[sighs] Hello" to me', 100) == 'He said "Hello" to me'
    assert normalised("„[seufzt] Hallo“", 100) == "„Hallo“"  # German's low quote opens
    assert normalised("He said [whispers]“Hello”", 100) == "He said “Hello”"  # “ opens
    assert normalised("« Oui »[rit] et puis", 100) == "« Oui » et puis"  # a French » closes
    assert normalised('"[sighs] [pause] Hello"', 100) == '"Hello"'
    stop = "\u06d4"  # Urdu's full stop
    assert normalised(f"وہ گھر گیا [ہنستے ہوئے]{stop}", 100) == f"وہ گھر گیا{stop}"


def test_nested_annotations_are_stripped_whole_and_unmatched_brackets_stay() -> None:
    talk = Talk()
    talk.player("nested [a [b] c] end")
    talk.player("[[whispers] [to Mara]] Where is he? [a [b [c]]]")
    talk.player("a ] lone [ bracket")
    assert texts(talk.read()["player"]) == ["nested end", "Where is he?", "a ] lone [ bracket"]


def test_a_line_of_deeply_nested_annotations_is_stripped_in_time() -> None:
    """A hostile line well within the event size: stripping the innermost pair again and
    again took seconds (its length times its depth)."""
    depth = 50_000
    talk = Talk()
    started = time.perf_counter()
    talk.player("[" * depth + "x" + "]" * depth + " Hello")
    assert time.perf_counter() - started < 1
    assert texts(talk.read()["player"]) == ["Hello"]


def test_the_eleventh_turn_pushes_out_the_first() -> None:
    talk = Talk()
    for number in range(1, 12):
        talk.player(f"line {number}", minute=number)
    assert texts(talk.read(minute=12)["player"]) == [f"line {n}" for n in range(2, 12)]


def test_a_world_keeping_three_turns_shows_the_three_newest() -> None:
    talk = Talk()
    talk.policy = resolve(None, {"memory": {"dialogue": {"turns_kept": 3}}})
    for number in range(1, 7):
        talk.player(f"line {number}", minute=number)
    assert texts(talk.read(minute=7)["player"]) == ["line 4", "line 5", "line 6"]


def test_two_characters_in_one_place_keep_separate_scopes() -> None:
    talk = Talk()
    talk.player("to Mara", npc="npc-mara")
    talk.player("to Tomas", npc="npc-tomas")
    talk.reply("Tomas answers", npc="npc-tomas")
    assert texts(talk.read(npc="npc-mara")["place"]) == ["to Mara"]
    assert texts(talk.read(npc="npc-tomas")["place"]) == ["to Tomas", "Tomas answers"]
    assert texts(talk.read(npc="npc-tomas")["player"]) == ["to Tomas", "Tomas answers"]


def test_a_reply_to_a_player_who_never_spoke_opens_the_scope() -> None:
    talk = Talk()
    talk.reply("Welcome, stranger.", player="p9")
    assert texts(talk.read(player="p9")["player"]) == ["Welcome, stranger."]
    assert (talk.acks[-1]["outcome"], talk.acks[-1]["reason"]) == ("processed", None)
    with pytest.raises(NotFound):  # a speaker forms no memory of her own line
        runtime_read(talk.state, "default", "w", "main", "npc-mara")


def test_an_over_long_line_is_capped_by_the_policy_and_its_memory_keeps_every_word() -> None:
    capped = resolve(None, {"memory": {"dialogue": {"max_line_chars": 20}}})
    talk = Talk()
    talk.projector = Projector(policies=lambda tenant, world: capped)
    said = "The cellar key is under the third stone from the door"
    talk.player(said)
    assert texts(talk.read()["player"]) == ["The cellar key is u…"]
    assert (talk.acks[-1]["outcome"], talk.acks[-1]["reason"]) == ("processed", None)
    mind = runtime_read(talk.state, "default", "w", "main", "npc-mara")
    assert [m.content for m in mind.beliefs] == [said]


def test_turns_are_hidden_twelve_hours_after_the_last_turn_of_the_scope() -> None:
    talk = Talk()
    talk.player("early", minute=0)
    talk.player("later", minute=60)
    assert texts(talk.read(minute=60 + 12 * 60 - 1)["player"]) == ["early", "later"]
    hidden = talk.read(minute=60 + 12 * 60)["player"]
    assert hidden["turns"] == [] and hidden["expired"] is True
    assert hidden["expires_at"] == "2024-05-02T01:00:00Z"


def test_a_player_back_after_the_scope_expired_starts_a_new_conversation() -> None:
    """The seed's cache drops an expired entry: the last visit's lines came back word for word
    beside the new one (and into a decision's recent turns)."""
    talk = Talk()
    talk.player("My password for the vault is swordfish", minute=0)
    talk.reply("I'll keep it safe.", minute=1)
    talk.player("Hello again", minute=3 * 24 * 60)
    scope = talk.read(minute=3 * 24 * 60 + 1)["player"]
    assert (texts(scope), scope["expired"]) == (["Hello again"], False)
    # a summary before the gap made it 24 hours: 20 hours later it is the same conversation
    talk.summarise("Came back to talk.")
    talk.reply("Welcome back.", minute=3 * 24 * 60 + 20 * 60)
    talk.player("Still here.", minute=4 * 24 * 60 + 19 * 60)
    assert texts(talk.read(minute=4 * 24 * 60 + 19 * 60)["player"]) == [
        "Hello again",
        "Welcome back.",
        "Still here.",
    ]
    # a summary after the gap does not bring back what had expired before it
    later = Talk()
    later.player("one", minute=0)
    later.player("two", minute=20 * 60)
    later.summarise("Two visits.")
    assert texts(later.read(minute=20 * 60 + 1)["player"]) == ["two"]


def test_the_latest_line_in_real_time_keeps_the_scope_alive() -> None:
    """A reply stamped before the line it answers (two clocks) made the scope expire an hour
    after a line said a minute ago, and a line 11.5 hours after the latest began a new
    conversation (each turn was compared with the one before it, not with the latest)."""
    talk = Talk()
    talk.player("fresh", minute=24 * 60)
    talk.reply("an hour-old clock", minute=23 * 60)
    scope = talk.read(minute=24 * 60 + 1)["player"]
    assert (texts(scope), scope["last_turn_at"]) == (
        ["fresh", "an hour-old clock"],
        "2024-05-02T12:00:00Z",
    )
    talk.player("11.5 h later", minute=35 * 60 + 30)
    assert texts(talk.read(minute=35 * 60 + 31)["player"]) == [
        "fresh",
        "an hour-old clock",
        "11.5 h later",
    ]


def test_lines_without_time_neither_end_a_conversation_nor_let_the_scope_expire() -> None:
    """A line with no time (a file replay without `occurred_at`) between two visits bridged them,
    and as the newest line it no longer kept the scope alive, as documented."""
    talk = Talk()
    talk.player("Visit 1", minute=0)
    talk.reply("no clock", minute=None)
    assert talk.read(minute=13 * 60)["player"]["expired"] is False
    assert texts(talk.read(minute=13 * 60)["player"]) == ["Visit 1", "no clock"]
    talk.player("Visit 2", minute=3 * 24 * 60)
    assert texts(talk.read(minute=3 * 24 * 60 + 1)["player"]) == ["Visit 2"]


def test_a_conversation_starts_past_the_latest_line_before_it_shown_or_not() -> None:
    """Read off the turns shown: once the ended visit's timed lines were pushed out, its line
    without time showed again; once the latest line (a clock ahead) was pushed out, a line an
    hour later began a new conversation and hid nine live turns."""
    talk = Talk()
    talk.player("Visit 1: my vault password is swordfish", minute=0)
    talk.reply("no clock", minute=None)
    talk.player("Visit 2", minute=72 * 60)
    for chat in range(8):
        talk.player(f"chat {chat}", minute=72 * 60 + chat)
    assert texts(talk.read(minute=72 * 60 + 10)["player"]) == [
        "Visit 2",
        *(f"chat {chat}" for chat in range(8)),
    ]
    ahead = Talk()
    ahead.reply("a clock 20 h ahead", minute=20 * 60)
    for said in range(9):
        ahead.player(f"line {said}", minute=said)
    ahead.player("an hour later, 13 h in", minute=13 * 60)
    scope = ahead.read(minute=13 * 60 + 1)["player"]
    assert len(texts(scope)) == 10
    assert scope["expires_at"] == "2024-05-02T20:00:00Z"  # 12 h past the line 20 h ahead


def test_a_longer_expiry_alone_keeps_a_summarised_scope_as_long() -> None:
    """`expiry_hours: 36` beside the summarised default of 24: a summary shortened the scope's
    life to 24 hours (and refusing such a policy dropped documents a release had taken)."""
    talk = Talk()
    talk.policy = resolve(None, {"memory": {"dialogue": {"expiry_hours": 36}}})
    talk.player("one", minute=0)
    talk.summarise("Asked about the son.")
    policy = DialoguePolicy(expiry_hours=36)
    scope = dialogue_read(
        talk.state, "default", "w", "main", "npc-mara", "p1", "loc-inn",
        START_MS + 30 * HOUR_MS, policy,
    )  # fmt: skip
    assert texts(scope["player"]) == ["one"]


def test_a_summarised_scope_keeps_its_turns_as_long_as_the_world_says() -> None:
    """`summarised_expiry_hours: 36`: 30 hours after a summarised conversation its turns
    still show (the default of 24 hid them), and at 36 they go."""
    talk = Talk()
    talk.policy = resolve(None, {"memory": {"dialogue": {"summarised_expiry_hours": 36}}})
    talk.player("one", minute=0)
    talk.summarise("Asked about the son.")
    assert texts(talk.read(minute=30 * 60)["player"]) == ["one"]
    assert texts(talk.read(minute=36 * 60)["player"]) == []


def test_a_summary_of_null_categories_is_kept_as_one_of_none() -> None:
    """`categories` is optional: a game sending it as JSON null had its summary refused, and
    the scope expired after 12 hours instead of 24."""
    talk = Talk()
    talk.player("one", minute=0)
    talk.summarise("Asked about the son.", categories=None)
    assert talk.acks[-1]["reason"] is None
    scope = talk.read(minute=13 * 60)["player"]
    assert (scope["summary"], scope["categories"], texts(scope)) == (
        "Asked about the son.",
        [],
        ["one"],
    )


def test_a_summary_keeps_turns_for_twenty_four_hours_and_counts_replies_since() -> None:
    """The seed counts one turn per participation of the character (a line and its reply
    were two)."""
    talk = Talk()
    talk.player("one", minute=0)
    talk.reply("two", minute=1)
    talk.summarise("Asked about the son.", categories=["quest"])
    assert talk.acks[-1]["reason"] is None
    talk.player("three", minute=2)
    assert talk.read(minute=2)["player"]["turns_since_summary"] == 0
    talk.reply("four", minute=2)
    talk.player("five", minute=2)
    scope = talk.read(minute=2 + 13 * 60)["player"]
    assert texts(scope) == ["one", "two", "three", "four", "five"]
    assert (scope["summary"], scope["categories"], scope["turns_since_summary"]) == (
        "Asked about the son.",
        ["quest"],
        1,
    )
    gone = talk.read(minute=2 + 24 * 60)["player"]
    assert gone["turns"] == [] and gone["summary"] == "Asked about the son."
    assert talk.read(minute=3)["place"]["summary"] is None  # the place scope has none


def test_a_summary_sent_while_dialogue_is_off_records_nothing() -> None:
    """`memory.dialogue.enabled: false` captures nothing: a scope that had turns while it was
    on took a summary sent after it was turned off, and the read (a decision's too) showed it."""
    talk = Talk()
    talk.player("hello")
    talk.policy = resolve(None, {"memory": {"dialogue": {"enabled": False}}})
    talk.player("said while off")
    talk.summarise("p1 confessed to the murder", categories=["crime"])
    assert talk.acks[-1]["outcome"] == "processed"
    assert talk.acks[-1]["reason"] == (
        "dialogue summary not recorded: memory.dialogue.enabled is false in this world"
    )
    talk.policy = resolve(None, {})
    read = talk.read()["player"]
    assert (texts(read), read["summary"]) == (["hello"], None)


def test_a_summary_is_bookkeeping_no_character_remembers_it() -> None:
    """A summary of a private line, sent at the place: the summarising character and everyone
    there held a memory of it, its words in it, a bystander too (and a summary refused as not
    recorded was remembered all the same)."""
    talk = Talk()
    for character in ("npc-tomas", "npc-mara"):
        talk.send(key="loreweaver.movement.location-entered", actor=character, location="loc-inn")
    talk.player("I poisoned the mayor. Tell no one.", private=True)
    for player, summary in (("p1", "p1 admitted poisoning the mayor"), ("p7", "p7 is a spy")):
        talk.send(
            key="loreweaver.memory.dialogue-summarised",
            actor="npc-mara",
            target=player,
            location="loc-inn",
            payload={"scope": "player", "summary": summary},
        )
    assert [ack["reason"] is None for ack in talk.acks[-2:]] == [True, False]
    held = {
        character: [
            memory.content
            for memory in (read.beliefs + read.recollections)
            if "summarised" in memory.content
        ]
        for character in ("npc-tomas", "npc-mara")
        for read in [runtime_read(talk.state, "default", "w", "main", character)]
    }
    assert held == {"npc-tomas": [], "npc-mara": []}
    assert talk.read()["player"]["summary"] == "p1 admitted poisoning the mayor"


def test_a_summary_for_an_unknown_scope_is_acked_with_a_reason_and_records_nothing() -> None:
    talk = Talk()
    talk.player("hello")
    talk.summarise("Never met.", player="p7")
    assert talk.acks[-1]["outcome"] == "processed"
    assert talk.acks[-1]["reason"] == (
        "dialogue summary not recorded: 'npc-mara' has no player scope 'p7' on timeline 'main'"
    )
    assert talk.read(player="p7")["player"]["summary"] is None
    assert texts(talk.read()["player"]) == ["hello"]


@pytest.mark.parametrize(
    ("summary", "payload", "reason"),
    [
        (
            "x",
            {"scope": "guild"},
            "it needs actor (the character) and payload.scope 'player' (with target) or 'place' "
            "(with location, or the character's known place)",
        ),
        ("  ", {}, "payload.summary must be non-empty text"),
        ("\u200b\u3164", {}, "payload.summary must be non-empty text"),
        ("x", {"categories": [1]}, "payload.categories must be a list of strings"),
        ("x", {"categories": ""}, "payload.categories must be a list of strings"),
    ],
)
def test_a_malformed_summary_is_acked_with_why_and_the_turns_stay(
    summary: str, payload: dict[str, Any], reason: str
) -> None:
    talk = Talk()
    talk.player("hello")
    talk.summarise(summary, **payload)
    assert talk.acks[-1]["reason"] == f"dialogue summary not recorded: {reason}"
    assert texts(talk.read()["player"]) == ["hello"]
    assert talk.read()["player"]["summary"] is None


def test_the_kafka_record_time_stands_in_for_a_missing_occurred_at() -> None:
    talk = Talk()
    talk.player("no clock", minute=None, location=None, record_ms=START_MS + 5 * MINUTE_MS)
    assert talk.read()["player"]["turns"][0]["occurred_at"] == "2024-05-01T12:05:00Z"


@pytest.mark.parametrize("timestamp_ms", [10**15, 2**62], ids=["microseconds", "2**62"])
def test_a_record_time_no_clock_can_give_is_no_time(timestamp_ms: int) -> None:
    """A producer stamping microseconds as milliseconds (year 33658): the line's stamp raised
    out of the projector, and the worker stopped at it, again at every restart."""
    talk = Talk()
    talk.player("from the far future", minute=None, location=None, record_ms=timestamp_ms)
    assert talk.acks[-1]["outcome"] == "processed"
    [turn] = talk.read()["player"]["turns"]
    assert (turn["text"], turn["occurred_at"]) == ("from the far future", None)


def test_a_reload_before_a_line_forgets_it() -> None:
    talk = Talk()
    talk.player("before the save", minute=0)
    talk.player("after the save", minute=1)
    talk.send(
        timeline="reload",
        seq=2,
        key="world.entity-declared",
        branch={"parent_timeline_id": "main", "after_seq": 1},
    )
    talk.player("on the reload", minute=2, timeline="reload")
    assert texts(talk.read(timeline="reload", minute=3)["player"]) == [
        "before the save",
        "on the reload",
    ]
    assert texts(talk.read(timeline="main", minute=3)["player"]) == [
        "before the save",
        "after the save",
    ]
    assert texts(talk.read(timeline="main", minute=3, as_of_seq=1)["player"]) == ["before the save"]


def test_a_character_of_whom_nothing_is_known_is_not_found_as_in_every_read() -> None:
    talk = Talk()
    talk.player("Where is your son?")
    with pytest.raises(NotFound, match="nothing is known of 'npc-nobody' on timeline 'main'"):
        talk.read(npc="npc-nobody", minute=2)
    # a character who heard nothing here yet is known: an empty conversation, not a 404
    assert texts(talk.read(player="p2", minute=2)["player"]) == []


def test_a_character_known_only_by_a_private_line_to_one_player_is_known_to_all() -> None:
    """It was a 200 to the player it spoke to and a 404 to every other."""
    talk = Talk()
    talk.reply("Psst, the gate opens at midnight.", private=True)
    assert texts(talk.read()["player"]) == ["Psst, the gate opens at midnight."]
    assert talk.read(player="p2")["player"]["turns"] == []
    with pytest.raises(NotFound):
        talk.read(player="p2", npc="npc-tomas")


@pytest.mark.parametrize(
    ("key", "actor", "target", "players", "why"),
    [
        (PLAYER_SAID, "p1", "p2", ["p1", "p2"], "'p2' is a player, not a character"),
        (PLAYER_SAID, "p1", "loc-inn", ["p1"], "'loc-inn' is a place, not a character"),
        (PLAYER_SAID, "p1", "item-lamp", ["p1"], "'item-lamp' is an item, not a character"),
        (PLAYER_SAID, "p1", "guard-7", ["p1"], "'guard-7' is of no known kind (declare it"),
        (NPC_REPLIED, "npc-mara", "npc-tomas", [], "'npc-tomas' is a character, not the player"),
    ],
)
def test_a_line_not_between_a_character_and_a_player_is_not_kept_and_its_ack_says_why(
    key: str, actor: str, target: str, players: list[str], why: str
) -> None:
    """Only characters keep dialogue, as only they form memories: a line to another player, a
    place or an item was kept as theirs, read back as their dialogue (where the runtime read
    knew nothing of them), and one character's reply to another kept as a player's scope."""
    talk = Talk()
    said = {"key": key, "actor": actor, "target": target, "players": players}
    talk.send(**said, location="loc-inn", payload={"text": "Hello"}, occurred_at=at(0))
    assert talk.acks[-1]["outcome"] == "processed"
    assert str(talk.acks[-1]["reason"]).startswith(f"dialogue line not kept: {why}")
    assert list(talk.state.scan(pack(DIALOGUE_TURNS))) == []


def test_a_character_known_only_by_expired_lines_is_still_found_with_its_summary() -> None:
    """Only a line known the character: once hidden, its scopes answer expired, not a 404."""
    talk = Talk()
    talk.player("Let me pass", npc="npc-guard-7", minute=0)
    talk.send(
        key="loreweaver.memory.dialogue-summarised",
        actor="npc-guard-7",
        target="p1",
        payload={"scope": "player", "summary": "Wanted through the gate."},
    )
    assert talk.acks[-1]["reason"] is None
    read = talk.read(npc="npc-guard-7", minute=25 * 60)
    assert (read["player"]["turns"], read["player"]["expired"]) == ([], True)
    assert read["player"]["summary"] == "Wanted through the gate."
    assert read["place"] is not None and read["place"]["expired"] is True
    other = talk.read(npc="npc-guard-7", player="p2", minute=13 * 60)  # the place scope heard it
    assert (other["player"]["expired"], other["place"]["expired"]) == (False, True)


def test_a_line_said_at_the_end_of_time_is_read_with_its_expiry_at_the_last_moment() -> None:
    """The contract takes any time; twelve hours after late 9999 cannot be written, and the
    scope's reads (the dialogue, the decision) answered a 500 for ever."""
    late = datetime(9999, 12, 31, 23, 0, tzinfo=UTC).timestamp() * 1000 - START_MS
    talk = Talk()
    talk.player("Hello there", minute=int(late // MINUTE_MS))
    scope = talk.read()["player"]
    assert texts(scope) == ["Hello there"]
    assert scope["turns"][0]["occurred_at"] == "9999-12-31T23:00:00Z"
    assert scope["expires_at"] == "9999-12-31T23:59:59.999000Z"


def test_a_line_that_waited_for_an_earlier_seq_keeps_its_facts_of_value_null() -> None:
    """A line without `occurred_at` waits in the deferral buffer stamped with its record's time.
    Stored again without its null values, a fact lost its `value` (required: any JSON, null
    too), and applying it when the gap filled failed on every redelivery: the worker stopped,
    and every restart stopped again on the same message."""
    talk = Talk()
    line = {
        "key": "loreweaver.conversation.player-said",
        "actor": "p1",
        "target": "npc-mara",
        "players": ["p1"],
        "payload": {"text": "the door is open"},
        "facts": [{"subject": "door", "attribute": "state", "value": None}],
        "ts": START_MS,
    }
    talk.send(seq=2, **line)
    talk.send(seq=1, key="x", actor="npc-mara")
    assert [(ack["seq"], ack["outcome"]) for ack in talk.acks] == [
        (2, "deferred"),
        (1, "processed"),
        (2, "processed"),
    ]
    assert talk.read()["player"]["turns"][0]["occurred_at"] == "2024-05-01T12:00:00Z"


def test_a_line_said_before_the_first_moment_in_utc_is_read_at_the_first_moment() -> None:
    """The contract takes any time with an offset: the first moment of year 1 an hour east of
    UTC is before it in UTC, which no time can be written as, and every read of the scope (the
    dialogue, the decision) answered a 500 until the line was pushed out."""
    talk = Talk()
    talk.send(
        key="loreweaver.conversation.player-said",
        actor="p1",
        target="npc-mara",
        players=["p1"],
        payload={"text": "Long ago"},
        occurred_at="0001-01-01T00:00:00+01:00",
    )
    first_ms = int(datetime(1, 1, 1, tzinfo=UTC).timestamp() * 1000)
    scope = talk.read(minute=(first_ms - START_MS) / MINUTE_MS)["player"]
    assert texts(scope) == ["Long ago"]
    assert scope["turns"][0]["occurred_at"] == "0001-01-01T00:00:00Z"


def test_a_line_exactly_expiry_hours_after_the_last_starts_a_new_conversation() -> None:
    """Hidden 12 h after the last turn (SPEC 13): the read hid them at 12 h, and a line said at
    12 h on continued the old conversation, its turns shown again beside it."""
    talk = Talk()
    talk.player("Where is the smith?", minute=0)
    talk.reply("At the forge.", minute=1)
    talk.player("Hello again.", minute=1 + 12 * 60)
    assert texts(talk.read(minute=2 + 12 * 60)["player"]) == ["Hello again."]


def test_a_branch_counts_no_turn_its_parent_said_after_the_branch_point() -> None:
    """The child sees the parent's state up to its branch point, never after (SPEC 2, 6): a
    read of the branch counted the parent's later reply among its turns since the summary."""
    talk = Talk()
    talk.player("Where is the smith?", minute=0)
    talk.reply("At the forge.", minute=1)  # seq 2 of main, past the branch point
    branch = {"parent_timeline_id": "main", "after_seq": 1}
    talk.send(timeline="alt", seq=2, key="weather.rain-began", branch=branch)
    talk.seq["alt"] = 2
    talk.reply("Good day.", minute=2)  # main again: seq 3
    talk.reply("Good day to you.", minute=2, timeline="alt")
    scope = talk.read(minute=3, timeline="alt")["player"]
    assert (texts(scope), scope["turns_since_summary"]) == (
        ["Where is the smith?", "Good day to you."],
        1,  # the character's replies on the branch: its own
    )


def test_a_character_known_only_by_where_it_is_has_a_dialogue_to_read() -> None:
    """A character is known by a memory or by where it is: Mara, who only walked in, has a
    dialogue to read (empty), not a 404."""
    talk = Talk()
    talk.send(key="loreweaver.movement.location-entered", actor="npc-mara", location="loc-inn")
    read = talk.read()
    assert (read["npc_id"], read["player"]["turns"]) == ("npc-mara", [])
