"""Building the KIP-848 member (``group.protocol=consumer``) from a consumer's config.

The member id is generated here, once per consumer, because the sans-I/O member draws
no randomness (KIP-1082: the client chooses its member id and keeps it for its life).

Imports the config and the coordinator; no sockets or threads of its own.
"""

from __future__ import annotations

import uuid

from .._config import ConsumerConfig
from .._coordinator.kip848 import ConsumerGroupMember, ConsumerMemberConfig

__all__ = ["consumer_protocol_member"]


def consumer_protocol_member(cfg: ConsumerConfig) -> ConsumerGroupMember:
    """A ``ConsumerGroupMember`` for ``cfg`` (``ConfigurationError`` without group.id)."""
    return ConsumerGroupMember(
        ConsumerMemberConfig(
            group_id=cfg.require_group_id(),
            member_id=str(uuid.uuid4()),
            max_poll_interval_ms=cfg.max_poll_interval_ms,
            retry_backoff_ms=cfg.connection.retry_backoff_ms,
            request_timeout_ms=cfg.connection.request_timeout_ms,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            group_instance_id=cfg.group_instance_id,
            client_rack=cfg.client_rack,
            server_assignor=cfg.group_remote_assignor,
            enable_auto_commit=cfg.enable_auto_commit,
            # KIP-447, as for the classic member (and Java): always.
            require_stable=True,
        )
    )
