"""The event keys rumourmill gives a meaning of its own; every other key is a story event.

A game may publish any key. These few change what happens beyond forming memories: movement
teaches where characters are, a conversation passes words on, a declaration names things, and
a meeting spreads news.
"""

from __future__ import annotations

LOCATION_ENTERED = "loreweaver.movement.location-entered"
CHARACTER_ENTERED_LOCATION = "loreweaver.movement.character-entered-location"
MOVEMENT_KEYS = frozenset({LOCATION_ENTERED, CHARACTER_ENTERED_LOCATION})
"""The actor is now at the event's location."""

TOLD = "loreweaver.conversation.told"
PLAYER_SAID = "loreweaver.conversation.player-said"
CONVERSATION_KEYS = frozenset({TOLD, PLAYER_SAID})
"""Words the target hears: news from a character, or a player's line."""

ENTITY_DECLARED = "world.entity-declared"
"""Names, kinds and groups for ids, and nothing else: no story at all."""

CHARACTERS_MET = "loreweaver.social.characters-met"
"""A meeting: it spreads news (when spreading is on) but is not itself news."""

MEMORY_RECALLED = "loreweaver.memory.recalled"
"""The actor recalled the memories in `payload.belief_ids`: their clocks restart. Not news."""

NPC_REPLIED = "loreweaver.conversation.npc-replied"
"""A character's line to a player (actor: the character, target: the player; payload `text`)."""
DIALOGUE_TURN_KEYS = frozenset({PLAYER_SAID, NPC_REPLIED})
"""Lines captured as short-term dialogue (`projections.dialogue`)."""
SPOKEN_KEYS = CONVERSATION_KEYS | {NPC_REPLIED}
"""Words said to the target: heard by the target and named witnesses only, never by the
speaker or by bystanders at the place."""

DIALOGUE_SUMMARISED = "loreweaver.memory.dialogue-summarised"
"""A summary of one dialogue scope (actor: the character); it keeps the scope's turns longer."""

WORLD_DELETED = "world.deleted"
"""Remove everything of the world (`projections.deletion`); timeline and seq are not used."""
TENANT_DELETED = "tenant.deleted"
"""Remove everything of every world of the tenant; world, timeline and seq are not used."""
DELETION_KEYS = frozenset({WORLD_DELETED, TENANT_DELETED})
