"""Which policy governs a world: the world's own, else the tenant's default, else built-in."""

from __future__ import annotations

from collections.abc import Callable

from schemas.policy import Policy

PolicyLookup = Callable[[str, str], Policy]
"""The policy in force for `(tenant_id, world_instance_id)`."""

DEFAULT_POLICY = Policy()


def default_policies(tenant_id: str, world_id: str) -> Policy:
    """The built-in defaults, for every world."""
    return DEFAULT_POLICY
