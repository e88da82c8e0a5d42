"""The event contract: what a game server publishes on `rumourmill.events`.

Events are validated straight from the message bytes (`Event.model_validate_json`), strictly:
a wrong type is an error, not something to coerce, and an unknown field is refused so that a
misspelt optional field (`witness` for `witnesses`) cannot silently change who perceives what.

The exported JSON Schemas (`schemas.export`) are the contract for producers in other languages,
so every check here is a constraint JSON Schema can state: types, lengths, ranges and patterns,
no validator of our own that a schema validator could not repeat.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StringConstraints,
    Tag,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypeAliasType

MAX_SEQ = 2**63 - 1
"""The largest position a timeline can reach (positions are stored as signed 64-bit)."""

MAX_ID_LENGTH = 128
"""The most characters of a tenant, world, timeline or entity id."""
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]
"""A tenant, world, timeline or entity id: 1 to `MAX_ID_LENGTH` characters."""

NAMEABLE_ID_PATTERN = r"^(?:[^.]|\.[^.]|\.\.[\s\S])"
"""Any id but `.` and `..`: every HTTP client and server folds those away as a URL path's dot
segments (RFC 3986, 5.2.4), so no read could name a character, timeline or world called so.
Written without lookaround, which the regex engine pydantic checks patterns with lacks."""

NameableId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=NAMEABLE_ID_PATTERN)
]
"""An `Identifier` an event brings in: one a URL can name. Records stored from events keep
`Identifier`, so a store written before the rule was made still reads."""


def _integral(value: object) -> object:
    """A number with no fraction as the int it is; anything else is left for strict checking."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


AsInteger = BeforeValidator(_integral)
"""Takes an integer as JSON Schema counts one: `3` and `3.0` alike, never `true` or `"3"`.
Place it last, after the bounds (`Annotated[int, Field(ge=1), AsInteger]`), so that the
exported schema keeps them."""

Seq = Annotated[int, Field(ge=1, le=MAX_SEQ), AsInteger]


@dataclass(frozen=True)
class WholeMatch:
    """A string that `pattern` (anchored `^...$`) matches whole, alike in pydantic and in every
    JSON Schema validator. Python's `$` also matches before a final line break, ECMA-262's does
    not: pydantic matches the whole string, and the exported schema refuses any line break
    (`not`), which Python's `jsonschema`, searching with Python's `re`, would let through."""

    pattern: re.Pattern[str]
    expected: str
    """What a string must be, for the error: `should be {expected}`."""
    read: Callable[[str], object] = str
    """What a matching string is taken for. The check comes first, so the type's own validation
    is given a Python value, not JSON: a strict `datetime` takes no string then, and is given
    one read here as pydantic reads a JSON string (`TypeAdapter.validate_strings`)."""

    def _check(self, value: object) -> object:
        if not isinstance(value, str):
            return value
        if self.pattern.fullmatch(value) is None:
            raise PydanticCustomError(
                "string_pattern_mismatch",
                "String should be {expected}",
                {"expected": self.expected},
            )
        return self.read(value)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        exported = handler(schema)
        exported["pattern"] = self.pattern.pattern
        exported["not"] = {"pattern": r"\n"}
        return exported


GAME_TIME_PATTERN = re.compile(r"^day ([0-9]{1,6}), ([01][0-9]|2[0-3]):([0-5][0-9])$")
"""Story time, `"day D, HH:MM"`."""

GameTime = Annotated[
    str, WholeMatch(GAME_TIME_PATTERN, "story time 'day D, HH:MM' (such as 'day 1, 21:05')")
]

_YEAR = "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_AND_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE_TIME_PATTERN = re.compile(
    f"^(?:{_YEAR}-{_MONTH_AND_DAY}|{_LEAP_YEAR}-02-29)"
    "[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?"
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
"""An RFC 3339 date-time with its offset (`Z` or `+HH:MM`), on a day the calendar has (February
29 in leap years alone), in years 1 to 9999: what Python's `datetime` holds. A leap second
(`23:59:60`), which RFC 3339 allows, is refused: `datetime` cannot hold it. As a pattern, not as
`format: date-time` alone, which draft 2020-12 makes an annotation most validators do not check."""

RealTime = Annotated[
    AwareDatetime,
    WholeMatch(
        DATE_TIME_PATTERN,
        "an RFC 3339 date-time with Z or an offset (such as '2024-05-01T21:05:00Z'; "
        "no leap second)",
        TypeAdapter(AwareDatetime).validate_strings,
    ),
]

SMALLEST_NUMBER, LARGEST_NUMBER = -(2**63), 2**64 - 1
"""What an integral number in a payload or a fact may be (JSON Schema's `integer`: `5` and
`5.0` alike): within 64-bit integers, which every encoder downstream (orjson, the state's and
the change feed's) writes. A larger one stopped the worker at the first encoding, on every
redelivery; it is refused instead, and dead-lettered."""


_Integer = Annotated[int, Field(ge=SMALLEST_NUMBER, le=LARGEST_NUMBER)]
_Fractional = Annotated[
    float,
    Field(ge=SMALLEST_NUMBER, lt=LARGEST_NUMBER + 1),
    WithJsonSchema(
        {
            "type": "number",
            "not": {"type": "integer"},
            "minimum": SMALLEST_NUMBER,
            "maximum": LARGEST_NUMBER,
        }
    ),
]
"""A number written with a fraction or an exponent (`0.5`, `1e3`). An integral one (`5.0`) is
held by the schema to `_Integer`'s range, and here to the float bounds, which agree: no float
lies between `LARGEST_NUMBER` and `LARGEST_NUMBER + 1` (which orjson could not write)."""


def _json_kind(value: object) -> str:
    """Which kind of JSON value `value` is: its error is that kind's alone, not one per kind."""
    if value is None:
        return "null"
    for kind in (bool, int, float, str, list, dict):  # bool first: True is an int too
        if isinstance(value, kind):
            return kind.__name__
    return "unknown"


JsonData = TypeAliasType(
    "JsonData",
    "Annotated["
    "Annotated[str, Tag('str')] | Annotated[bool, Tag('bool')] | Annotated[_Integer, Tag('int')]"
    " | Annotated[_Fractional, Tag('float')] | Annotated[list[JsonData], Tag('list')]"
    " | Annotated[dict[str, JsonData], Tag('dict')] | Annotated[None, Tag('null')],"
    " Discriminator(_json_kind)]",
)
"""Any JSON value, its numbers within `SMALLEST_NUMBER` and `LARGEST_NUMBER`."""


class Contract(BaseModel):
    """Base of every message model: immutable, strict, no unknown fields; a field's docstring is
    its description in the exported JSON Schema."""

    model_config = ConfigDict(
        frozen=True, strict=True, extra="forbid", use_attribute_docstrings=True
    )


@lru_cache(maxsize=1 << 12)
def story_minutes(game_time: str) -> int:
    """Minutes of story time since day 0, 00:00, for a `"day D, HH:MM"` string."""
    match = GAME_TIME_PATTERN.fullmatch(game_time)
    if match is None:
        raise ValueError(f"game_time must read 'day D, HH:MM', got {game_time!r}")
    day, hour, minute = (int(part) for part in match.groups())
    return (day * 24 + hour) * 60 + minute


class Fact(Contract):
    """One thing the event makes true in the world record: subject.attribute = value."""

    subject: Identifier
    attribute: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    value: JsonData


class EntityDeclaration(Contract):
    """A name, kind and group for an id; persists in the world's catalogue."""

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    kind: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    group: Identifier | None = None
    __pydantic_extra__: dict[str, JsonData]  # checked as payload values are: NaN was kept as null


class Branch(Contract):
    """Where a new timeline leaves its parent: it sees the parent up to `after_seq`."""

    parent_timeline_id: NameableId
    after_seq: Annotated[int, Field(ge=0, le=MAX_SEQ - 1), AsInteger]


def _names_checked(schema: dict[str, Any]) -> None:
    """An `entities` schema that refuses a declaration under an id a URL cannot name: pydantic
    writes a dict's key pattern as `patternProperties`, which lets other keys through."""
    (declaration,) = schema.pop("patternProperties").values()
    schema["additionalProperties"] = declaration
    schema["propertyNames"]["pattern"] = NAMEABLE_ID_PATTERN


class Event(Contract):
    """One thing that happened in a game, as the game server reports it."""

    tenant_id: NameableId = "default"
    world_instance_id: NameableId
    timeline_id: NameableId
    seq: Seq
    key: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    actor: NameableId | None = None
    target: NameableId | None = None
    witnesses: list[NameableId] | None = None
    """Who else perceives it, and nobody more (`[]`: nobody else saw it); null: the
    characters known to be at `location`, but nobody else for a conversation, an event
    without `location`, or with the world's policy `memory.perception_location_fallback`
    false."""
    location: NameableId | None = None
    players: list[NameableId] = Field(default_factory=list)
    payload: dict[str, JsonData] = Field(default_factory=dict)
    facts: list[Fact] = Field(default_factory=list)
    game_time: GameTime | None = None
    entities: dict[NameableId, EntityDeclaration] = Field(
        default_factory=dict, json_schema_extra=_names_checked
    )
    branch: Branch | None = None
    occurred_at: RealTime | None = None
    """When it happened in real time (ISO 8601 with a zone); dialogue turns expire by it."""

    @property
    def story_minutes(self) -> int | None:
        """Story time in minutes, derived from `game_time` (kept as given)."""
        return None if self.game_time is None else story_minutes(self.game_time)
