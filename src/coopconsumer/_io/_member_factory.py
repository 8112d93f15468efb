"""Building what a consumer's configuration asks for: the group member (the classic
JoinGroup/SyncGroup ``GroupMember`` with its assignors, or the KIP-848
``ConsumerGroupMember``, ``group.protocol=consumer``) and the wire client with its
connection settings.

The KIP-848 member id is generated here, once per consumer, because the sans-I/O member
draws no randomness (KIP-1082: the client chooses its member id and keeps it for its life).

Imports the config, the coordinator, the assignors and the wire client; no sockets or
threads of its own (the client opens its connections when asked).
"""

from __future__ import annotations

import uuid

import attrs

from .._config import ConsumerConfig
from .._member import GroupMember, MemberConfig
from .._member.kip848 import ConsumerGroupMember, ConsumerMemberConfig
from ..assignors import load_assignors
from ._client import ClientConfig, KafkaClient

__all__ = ["client_for", "member_for"]


def _auto_commit_interval_ms(cfg: ConsumerConfig) -> int | None:
    return cfg.auto_commit_interval_ms if cfg.enable_auto_commit else None


def member_for(cfg: ConsumerConfig) -> GroupMember | ConsumerGroupMember:
    """The member ``cfg`` asks for (``ConfigurationError`` without group.id, or for
    assignors that cannot be loaded or share no rebalance protocol)."""
    if cfg.kip848:
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
                auto_commit_interval_ms=_auto_commit_interval_ms(cfg),
                # KIP-447, as for the classic member (and Java): always.
                require_stable=True,
            )
        )
    assignors = load_assignors(list(cfg.partition_assignment_strategy))  # type: ignore[arg-type]
    return GroupMember(
        MemberConfig(
            group_id=cfg.require_group_id(),
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            max_poll_interval_ms=cfg.max_poll_interval_ms,
            retry_backoff_ms=cfg.connection.retry_backoff_ms,
            request_timeout_ms=cfg.connection.request_timeout_ms,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            group_instance_id=cfg.group_instance_id,
            client_rack=cfg.client_rack,
            enable_auto_commit=cfg.enable_auto_commit,
            auto_commit_interval_ms=_auto_commit_interval_ms(cfg),
            # KIP-447: as Java (whatever the isolation level), start after the
            # offsets of open transactions are settled, so a partition's next owner
            # never reads past work a transaction may still commit.
            require_stable=True,
        ),
        assignors,
    )


def client_for(cfg: ConsumerConfig) -> KafkaClient:
    """A wire client with the consumer's connection settings (bootstrap, timeouts,
    security): the consumer's own, and the one-off checks of ``_transactional``."""
    conn = cfg.connection
    return KafkaClient(
        ClientConfig(
            **{
                field.name: getattr(conn, field.name)
                for field in attrs.fields(ClientConfig)
                if hasattr(conn, field.name)
            }
        )
    )
