"""Models made from fields that are valid already, without pydantic checking them again.

The projections build a few models on every event (memories, acks, timeline positions) from
values that came out of validated events, policies and records, in fresh lists. Checking each
bound and copying each list again costs more than the rest of making them. `trusted` makes
the very model validation would make of the same fields (equal, and dumped to the same bytes).
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel

Model = TypeVar("Model", bound=BaseModel)

_set_attribute = object.__setattr__
"""Sets what a frozen model otherwise refuses."""


def trusted(model: type[Model], fields: dict[str, Any]) -> Model:
    """An instance of `model` holding `fields`, which must be every field of it, valid, in
    declaration order (the order validation would put them in)."""
    made = model.__new__(model)
    _set_attribute(made, "__dict__", fields)
    _set_attribute(made, "__pydantic_fields_set__", _every_field(model))
    _set_attribute(made, "__pydantic_extra__", None)
    _set_attribute(made, "__pydantic_private__", None)
    return made


@cache
def _every_field(model: type[BaseModel]) -> set[str]:
    """The fields set of every trusted instance of `model`: all its fields, one set shared by
    them all (pydantic copies it before changing a copy's; setting a field already in it adds
    nothing). A set per instance would be one more object each garbage collection walks: a
    town makes a dozen memories an event, and keeps thousands of them decoded."""
    return set(model.model_fields)
