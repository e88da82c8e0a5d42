"""The invention check, rules variant (section 12): does a reply name what nobody gave it?

A character's reply to the event at `after_seq` may name only what its decision was given: the
character, the player, the place, every entity its knowledge is about or came from or the
event it answers names (by declared name and by id), and the words of its knowledge, of the
recent turns and of the line it answers (the player gave them, though a player of `privacy:
"full"` keeps no turns, and ten more important memories can keep the line's out of the
knowledge). The rules look for names: runs of capitalised words. A run at the start of a
sentence loses its first word (a sentence, or what follows a colon, starts capitalised whatever
it is: "Ask Bertram" names Bertram, "Ask" names nobody).
An opening quotation mark opens a sentence too ('She said, "Never trust a sailor."'), but for
a quotation of a name alone ('They call him "Vell"'). A pronoun ("I'm", "We'll", "No; We never
met", "No; My mother") and a title ("Dr", "Mrs", whose full stop ends no sentence) are no part of
a name, nor a title spelled out before one ("Captain Rook" names Rook; "the Baron" is a name),
and a possessive ending is none of its words ("Mara's" names Mara). A name is known when each of its
words is among the given words, case and Unicode forms aside ("the Crooked Lantern" is given by
"The Crooked Lantern", "Ilse" by Ilse's declaration, "Zoë" typed with a combining diaeresis or in
full-width letters by a declared "Zoë").

The answer's action is the policy's (`memory.invention`) when anything is invented, else
`allow`. Unnamed new relations ("her brother") take a model; the rules do not look for them.
With a model configured and the world's weighing `model` (section 12: in rules mode the check
is the rules'), the shell asks it (`RELATIONS_INSTRUCTIONS`, `relations_question`) and adds what
it finds that the reply says (`with_relations`); without an answer, the rules'
check stands. The reply check is a read: it writes nothing, so nothing is recorded.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from projections.catalogue import StoredDeclarations, display_name
from projections.decision import named_at
from projections.event_log import event_at
from projections.runtime_read import BadRead, timeline_view
from projections.state import StateTransaction
from projections.whereabouts import place_of
from projections.wording import QUOTED, one_line, quoted
from schemas.memory import DecisionRead, Invention, InventionRead
from schemas.policy import InventionPolicy, Policy
from schemas.text import visible

MAX_REPLY_CHARS = 10_000
"""A longer reply is refused (a reply is a few lines a character says)."""

_SENTENCE_END = re.compile(r"[!?…\n]|(?<!\d)[.:]|[.:](?!\d)")
"""What ends a sentence, or opens one as a colon may ("Listen: The man..."), but a point or a
colon between digits ("at 10:30 Bertram came", "3.5 gold"); after a semicolon a capitalised
word is a name ("Nobody saw it; Bertram did")."""
_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")
_PIECE = re.compile(r"[^\W\d_]+")
"""A name's and a given phrase's words are compared piece by piece: `npc-drunk-sailor` gives
"Drunk Sailor", `Jean-Luc` needs both Jean and Luc."""
_PRONOUN = re.compile(
    r"(?:I|You|He|She|It|We|They|Me|Him|Her|Us|Them|Mine|Yours|Hers|Ours|Theirs"
    r"|Myself|Yourself|Himself|Herself|Itself|Ourselves|Yourselves|Themselves"
    r"|Everyone|Everybody|Everything|Someone|Somebody|Something|Anyone|Anybody|Anything"
    r"|Nobody|Nothing|Who|Whom|Whose|What|Which)(?:['\u2019].*)?"
)
"""A personal pronoun ("I'm", "We'll") is no name, though capitalised after a semicolon
("No; We never met") as "I" is anywhere."""
POINTING_WORDS = frozenset(
    {"My", "Your", "His", "Its", "Our", "Their", "This", "That", "These", "Those", "There", "Here"}
)
"""Possessives and pointing words, no names either ("No; My mother knew", "Aye; There he
was")."""
_POSSESSIVE = re.compile(r"['\u2019](?:s['\u2019]?)?$")
"""A possessive ending ("Mara's", "Jonas'"), with the closing quote a word may take in
("'Orla's'")."""
TITLES = frozenset(
    {"Dr", "Mr", "Mrs", "Ms", "Mx", "Mme", "Mlle", "St", "Sr", "Jr", "Prof", "Capt", "Col", "Gen"}
    | {"Lt", "Sgt", "Rev", "Fr", "Mt", "Hon"}
)
"""Titles before a name, often abbreviated with a full stop that ends no sentence."""
SPELLED_TITLES = frozenset(
    {"Sir", "Dame", "Lady", "Lord", "Master", "Mistress", "Madam", "Madame", "Captain", "Doctor"}
    | {"Father", "Mother", "Brother", "Sister", "King", "Queen", "Prince", "Princess", "Duke"}
    | {"Duchess", "Baron", "Baroness", "Count", "Countess", "Sergeant", "Lieutenant", "General"}
    | {"Commander", "Elder", "Professor", "Mister", "Miss", "Saint", "Reverend"}
)
"""Titles written out: no part of a name they come before ("Ask Captain Rook" names Rook), but a
name alone ("the Baron", "the King"), and their full stop ends a sentence."""


@dataclass(frozen=True, slots=True)
class _Word:
    text: str
    start: int
    end: int
    opens_sentence: bool
    quoting: str | None
    """What the quotation says whose first word it is (`QUOTED`), if it is one's."""


def names_in(text: str) -> list[str]:
    """The names a text uses: runs of capitalised words one space apart, each once, in order;
    a sentence's first word and the pronoun I left out."""
    names: list[str] = []
    run: list[_Word] = []

    def close() -> None:
        kept = run
        if run and run[0].opens_sentence:  # unless a name is all the quotation says
            quoting = run[0].quoting
            said = None if quoting is None else _POSSESSIVE.sub("", quoting.strip(_SPACES))
            kept = run if said == text[run[0].start : run[-1].end] else run[1:]
        while len(kept) > 1 and kept[0].text in SPELLED_TITLES:
            kept = kept[1:]
        if kept:
            name = text[kept[0].start : kept[-1].end]
            if name not in names:
                names.append(name)

    for word in _words(text):
        first = word.text[0]
        capitalised = (first.isupper() or first.istitle()) and not _no_name(word.text)
        if (
            capitalised
            and run
            and not word.opens_sentence
            and text[run[-1].end : word.start] == " "
        ):
            run.append(word)
            continue
        close()
        run = [word] if capitalised else []
    close()
    return names


def inventions(text: str, given: Iterable[str]) -> list[Invention]:
    """The names in `text` (composed: a letter and its combining accent are one letter) whose
    words are not all among the words of `given`, compared in compatibility form, case aside
    (full-width "Ｚｏë" is "Zoë")."""
    known = {piece for phrase in given for piece in _pieces(phrase)}
    return [
        Invention(name=name, kind="name")
        for name in names_in(unicodedata.normalize("NFC", text))
        if not all(piece in known for piece in _pieces(name))
    ]


def _pieces(phrase: str) -> list[str]:
    """The words of a phrase as names are compared: NFKC, case-folded."""
    return [piece.casefold() for piece in _PIECE.findall(unicodedata.normalize("NFKC", phrase))]


def reply_check(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    after_seq: int,
    context: DecisionRead,
    text: str,
    policy: Policy,
) -> CheckedReply:
    """The invention check of a reply by `npc_id` to the event at `after_seq`: what its
    decision `context` (`projections.decision`) was given, against the names the reply uses
    (the rules' answer is `found`; a model may add relations, `with_relations`)."""
    if not visible(text):
        raise BadRead("'text' must not be empty")
    if len(text) > MAX_REPLY_CHARS:
        raise BadRead(f"'text' must be at most {MAX_REPLY_CHARS} characters")
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, after_seq)
    event = event_at(tx, tenant_id, world_id, ancestry, after_seq)
    entities = {npc_id, *(event.players if event is not None else [])}
    if event is not None:
        place = place_of(tx, tenant_id, world_id, ancestry, npc_id, event.location)
        entities |= {e for e in (event.actor, event.target, place) if e is not None}
        # what the event answered names, as the character took it in: the locket of a gift
        entities |= set(named_at(tx, keys, ancestry, npc_id, after_seq))
    said = event.words if event is not None else None
    for memory in context.knowledge:
        entities |= {*memory.about, *([memory.source_entity] if memory.source_entity else [])}
    declarations = StoredDeclarations(tx, tenant_id, world_id, ancestry)
    given = [
        *entities,
        *(display_name(entity, declarations) for entity in entities),
        *(memory.content for memory in context.knowledge),
        *(turn.text for turn in context.recent_turns),
        *([said] if said is not None else []),
    ]
    found = inventions(text, given)
    return CheckedReply(
        found=InventionRead(inventions=found, action=policy.memory.invention if found else "allow"),
        reply=text,
        prompt=relations_question(text, context, said),
        action=policy.memory.invention,
        deadline_ms=policy.memory.model.deadline_ms,
        model_joins=policy.memory.weighing == "model",
    )


RELATIONS_INSTRUCTIONS = (
    "A character in a game replies to a player. Find each relation of someone that the reply "
    "(quoted as a JSON string) brings in and that the character was not given: kin, marriage, "
    "friendship, service "
    '("her brother", "my cousin", "the smith\'s wife"). Answer with one JSON object and nothing '
    'else: {"relations": [each such phrase exactly as the reply writes it]}; an empty list when '
    "there is none."
)
"""What the model is told when it joins the invention check (relations need no name)."""


@dataclass(frozen=True, slots=True)
class CheckedReply:
    """The rules' check of a reply, and the question the model may add relations to it by."""

    found: InventionRead
    reply: str
    prompt: str
    """The model's question: what the character was given, and the reply."""
    action: InventionPolicy
    """The policy's action when anything is invented."""
    deadline_ms: int
    """How long the model may take (the world's `memory.model.deadline_ms`)."""
    model_joins: bool
    """Whether a configured model is asked (the world weighs by the model)."""


def relations_question(text: str, context: DecisionRead, said: str | None) -> str:
    """What the model is asked about a reply: what the decision gave and the line it answers
    (`said`: a `privacy: "full"` player's is in no turn), then the reply."""
    given = [memory.content for memory in context.knowledge]
    given += [turn.text for turn in context.recent_turns]
    given += [said] if said is not None else []
    listed = "\n".join(f"- {one_line(line)}" for line in given) or "- nothing"
    return f"What the character was given:\n{listed}\nThe reply, quoted: {quoted(text)}"


def with_relations(check: CheckedReply, relations: Iterable[str]) -> InventionRead:
    """The check with the relations a model found: each once, only what the reply says."""
    inventions = list(check.found.inventions)
    said = " ".join(check.reply.split()).casefold()  # "her\nbrother" says "her brother"
    for relation in relations:
        phrase = " ".join(relation.split())
        known = {invention.name.casefold() for invention in inventions}
        whole = re.compile(rf"(?<!\w){re.escape(phrase.casefold())}(?!\w)")  # not in "another"
        if phrase and whole.search(said) and phrase.casefold() not in known:
            inventions.append(Invention(name=phrase, kind="relation"))
    return InventionRead(inventions=inventions, action=check.action if inventions else "allow")


def _no_name(word: str) -> bool:
    """Whether a capitalised word is no part of a name: a personal pronoun, a possessive or
    pointing word, or a title."""
    return _PRONOUN.fullmatch(word) is not None or word in TITLES or word in POINTING_WORDS


_SPACES = " \t\u00a0\u202f"
"""What may stand between quotation marks and the words they hold ("\u00ab Zed \u00bb")."""


_MORE_QUOTED = re.compile(
    r"\u300c[^\u300c\u300d]*\u300d|\u300e[^\u300e\u300f]*\u300f"
    r"|(?<![\w.,!?;:\u2026])'(?=[^\W\d_])(?:[^'\n]|(?<=\w)'(?=\w)){1,200}'(?!\w)"
)
"""Quotations `QUOTED` leaves out (a retelling keeps their words): in corner brackets, and in
straight single quotes, opened after no letter or stop and before a letter, holding apostrophes
between letters ("Don't"), closed before no letter (a straight one is an apostrophe as often:
"Jonas' boat", "back in '82", "'Don't,' Bertram told the guards' captain")."""


def _quotations(text: str) -> dict[int, str]:
    """Where the first word of each quotation starts, and what the quotation says (between its
    marks): its first word opens a sentence ('She said, "Never trust a sailor."'), but for a
    quotation of a name alone ('They call him "Vell"'), which is the name."""
    found = {}
    for quotation in (*QUOTED.finditer(text), *_MORE_QUOTED.finditer(text)):
        said = text[quotation.start() + 1 : quotation.end() - 1]
        first = _WORD.search(said)
        if first is not None:
            found[quotation.start() + 1 + first.start()] = said
    return found


def _words(text: str) -> list[_Word]:
    """The words of `text` (a possessive ending cut off), each marked when it opens a
    sentence."""
    words: list[_Word] = []
    boundary = 0
    quotations = _quotations(text)
    for match in _WORD.finditer(text):
        between = text[boundary : match.start()]
        if words and words[-1].text in TITLES and between.startswith("."):
            between = between[1:]  # "Dr. Bertram": the title's full stop
        opens = not words or _SENTENCE_END.search(between) is not None
        quoting = None if opens else quotations.get(match.start())  # a sentence opens anyway
        opens = opens or quoting is not None
        word = match.group()
        if not _PRONOUN.fullmatch(word):
            word = _POSSESSIVE.sub("", word)
        words.append(_Word(word, match.start(), match.start() + len(word), opens, quoting))
        boundary = match.end()
    return words
