"""The invention check's rules (section 12) on their own: which words of a reply are names, and
which of those its decision was not given."""

from __future__ import annotations

import orjson
import pytest

from projections.decision import decision
from projections.invention import CheckedReply, inventions, names_in, reply_check, with_relations
from projections.policy import resolve
from projections.projector import Projector
from schemas.policy import Policy
from streams.recall_index import SqliteRecallIndex
from streams.replay import replay_lines
from tests.projections.test_decision import ASKED, SAID, STATE, TAVERN

TOLD = "loreweaver.conversation.told"


@pytest.mark.parametrize(
    ("reply", "names"),
    [
        ("Ask Bertram at the harbour, he saw it.", ["Bertram"]),  # a sentence opens capitalised
        (
            "I told Ilse. The Crooked Lantern is shut! Old Tom knows.",
            ["Ilse", "Crooked Lantern", "Tom"],
        ),
        ("Yes, Mara and I saw him; Mara too.", ["Mara"]),  # each once, the pronoun left out
        ("I\u2019ll ask Jean-Luc of Vell.", ["Jean-Luc", "Vell"]),
        ("nobody here", []),
        ("Go ask Mara\u2019s cousin, or the Crooked Lantern's cook.", ["Mara", "Crooked Lantern"]),
        ("Tell Ilse I said so. Tell Ilse I'm sorry.", ["Ilse"]),  # I is no part of a name
        ("Ask Dr. Bertram, or Mrs Vell.", ["Bertram", "Vell"]),  # a title's stop ends nothing
        ("Jonas' boat sank.", []),  # the sentence's first word, possessive or not
        ("Nobody saw it; Bertram did, though.", ["Bertram"]),  # a semicolon opens nothing
        ("No; We never met. Ask Ilse; She\u2019ll say, They'll all say.", ["Ilse"]),  # pronouns
        ("No; Her brother came; My mother knew; Them sailors; There he was.", []),
        ("No; Mine burned; Himself came; Nobody knew; Someone did; Who knows.", []),
        ("Listen: The harbour, ask Bertram.", ["Bertram"]),  # a colon may open a sentence
        ("At 10:30 Bertram came, 3.5 Vell later.", ["Bertram", "Vell"]),  # not between digits
        ('She said, "Never trust Vell." Go.', ["Vell"]),  # a quote opens a sentence
        ("\u00ab Jamais \u00bb, dit Bertram; \u201cTrust no one.\u201d", ["Bertram"]),
        ("Ask Captain Rook or Lady Vell.", ["Rook", "Vell"]),  # titles spelled out
        ("I saw the Captain. Then Rook came.", ["Captain", "Rook"]),  # a title alone is a name
        ('They call him "Vell" at the docks.', ["Vell"]),  # a quotation of a name alone
        ('"Welcome," Zed says. "No."', ["Zed"]),  # a one-word line is no name
        ("On l'appelle \u00ab\u202fZed\u202f\u00bb au port.", ["Zed"]),
        ('Meet me at "Zed\'s" tonight.', ["Zed"]),
        ("She said, 'Never trust Vell.' Jonas' boat sank.", ["Vell"]),  # straight single quotes
        ("He asked, 'Where's the Mill?'", ["Mill"]),  # an apostrophe within, between letters
        ("Ask at 'Orla's', she'll know.", ["Orla"]),  # a name quoted alone, its possessive too
        ("'Don't,' Bertram told the guards' captain.", ["Bertram"]),  # a closing one, a plural
        ("Back in '82 Vell and the Baker boys' dog ran off.", ["Vell", "Baker"]),
        ("\u5979\u8bf4\u300cNever trust Vell\u300d and left.", ["Vell"]),  # corner brackets
        ('She screamed "thief" Vell ran off.', ["Vell"]),  # a quote glued to a word closes
        ("Only the King knows, Ilse.", ["King", "Ilse"]),
        ("Ask \u01c5emal.", ["\u01c5emal"]),  # a titlecase letter opens a name
    ],
)
def test_names_are_runs_of_capitalised_words_not_opening_a_sentence(
    reply: str, names: list[str]
) -> None:
    assert names_in(reply) == names


def test_a_name_is_given_when_each_of_its_words_is_given_case_aside() -> None:
    given = ["Ilse", "The Crooked Lantern", "npc-drunk-sailor"]
    reply = "So Ilse saw the Drunk Sailor at the Crooked Lantern, with Bertram Crooked."
    assert [one.name for one in inventions(reply, given)] == ["Bertram Crooked"]
    assert {one.kind for one in inventions(reply, given)} == {"name"}


def test_a_name_is_given_whatever_its_unicode_form() -> None:
    """The same name typed with combining accents, or in full-width letters, is the declared
    name: "Zo\u00eb" and "Zoe\u0308" were told apart, and the latter flagged as "Zoe"."""
    given = ["Caf\u00e9 \u00c9mile", "Zoe\u0308"]
    composed = "Welcome to Caf\u00e9 \u00c9mile, Zo\u00eb."
    decomposed = "Welcome to Cafe\u0301 E\u0301mile, Zoe\u0308."
    full_width = "Welcome back, \uff3a\uff4f\u00eb. Ask Bertrand."
    assert inventions(composed, given) == []
    assert inventions(decomposed, given) == []
    assert [one.name for one in inventions(full_width, given)] == ["Bertrand"]
    assert [one.name for one in inventions("Ask Zo\u00e9.", given)] == ["Zo\u00e9"]


def _checked(
    reply: str, seq: int, lines: list[bytes] | None = None, policy: Policy | None = None
) -> CheckedReply:
    """The reply check of Mara's `reply` at the tavern's position `seq` (or after `lines`,
    under `policy`)."""
    policy = policy or Policy()
    projector = Projector(policies=lambda tenant, world: policy)
    state = STATE if lines is None else replay_lines(lines, projector).state
    context = decision(
        state, SqliteRecallIndex(), "default", "save-1", "main", "npc-mara", seq, None, policy, 0
    )
    return reply_check(state, "default", "save-1", "main", "npc-mara", seq, context, reply, policy)


def test_a_name_the_character_said_in_the_recent_turns_is_no_invention() -> None:
    """README: a name is no invention when it is a word of the character's knowledge or of the
    recent turns: Mara sent the player to Bertram a turn ago, and naming him again was flagged."""
    reply = orjson.loads(ASKED) | {
        "seq": 7,
        "key": "loreweaver.conversation.npc-replied",
        "actor": "npc-mara",
        "target": "player-1",
        "payload": {"text": "Ask Bertram at the docks."},
        "game_time": "day 1, 22:01",
    }
    again = orjson.loads(ASKED) | {"seq": 8, "payload": {"text": "And then?"}}
    lines = [*TAVERN.splitlines(), ASKED, orjson.dumps(reply), orjson.dumps(again)]
    checked = _checked("As I said, Bertram knows.", 8, lines)
    assert (checked.found.inventions, checked.found.action) == ([], "allow")


def test_a_relation_the_model_found_twice_is_listed_once() -> None:
    found = with_relations(_checked("Ask my brother.", 6), ["my brother", "my brother"])
    assert [(one.name, one.kind) for one in found.inventions] == [("my brother", "relation")]


TO_MARA = {"actor": "player-1", "target": "npc-mara", "players": ["player-1"]}


def _event(seq: int, key: str, **fields: object) -> bytes:
    at = {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": key}
    return orjson.dumps(at | {"location": "loc-inn"} | fields)


THEFTS = [
    _event(seq, "crime.purse-stolen", game_time=f"day 1, 08:{seq:02d}", **TO_MARA)
    for seq in range(2, 12)
]
"""Ten thefts: what the decision knows of Ilse, more important than anything after them."""


def test_a_reply_may_name_what_the_event_it_answers_names_though_no_knowledge_is_of_it() -> None:
    """Ilse gives Mara the locket after ten thefts, which outrank the gift: no memory of the
    decision's knowledge is of the locket, and thanking her for it was flagged as invented."""
    declared = {
        "player-1": {"name": "Ilse"},
        "npc-mara": {"name": "Mara"},
        "item-locket": {"name": "Silver Locket", "kind": "item"},
    }
    gift = _event(12, "trade.gift-given", payload={"item": "item-locket"}, **TO_MARA)
    lines = [_event(1, "world.entity-declared", entities=declared), *THEFTS, gift]
    checked = _checked("Why, thank you for the Silver Locket.", 12, lines)
    assert (checked.found.inventions, checked.found.action) == ([], "allow")
    assert _checked("Why, thank you for the Silver Comb.", 12, lines).found.inventions


def test_news_spread_to_the_character_at_the_event_answered_is_not_given_to_the_reply() -> None:
    """Ilse's line opens a new interval of Mara's guild, whose exchange passes Mara the news of
    Bertram at the same position: the decision never gave it (ten thefts fill its knowledge),
    and naming Bertram or Rook passed as something the line said."""
    spreading = resolve(None, {"memory": {"spreading": {"enabled": True}}})
    declared = {
        "player-1": {"name": "Ilse"},
        "npc-mara": {"name": "Mara", "group": "guild"},
        "npc-tomas": {"name": "Tomas", "group": "guild"},
        "npc-bertram": {"name": "Bertram"},
        "npc-rook": {"name": "Rook"},
    }
    news = {"content": "Bertram sank the ferry", "about": ["npc-bertram"]}
    lines = [
        _event(1, "world.entity-declared", entities=declared, game_time="day 1, 08:00"),
        *THEFTS,
        _event(
            12, TOLD, actor="npc-rook", target="npc-tomas", payload=news, game_time="day 1, 08:30"
        ),
        _event(13, SAID, payload={"text": "Good evening."}, game_time="day 1, 14:00", **TO_MARA),
    ]
    checked = _checked("Yes, Bertram sank the ferry, said Rook.", 13, lines, spreading)
    assert [one.name for one in checked.found.inventions] == ["Bertram", "Rook"]
