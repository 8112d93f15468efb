"""What the JSON message specs cannot say: hand-written behaviour of generated messages.

The generated modules (``messages``, ``admin_messages``; see ``_generate``) call these
functions from the methods the generator writes:

- ``for_version`` bodies of requests whose data moved between fields across versions,
  as Java's request builders convert them (LeaveGroup's ``member_id`` became
  ``members`` in v3, KIP-345; DeleteTopics' ``topic_names`` became ``topics`` in v6).
- ``redacted_bytes``: the repr of fields that carry credentials (a SASL PLAIN message
  holds the password; SCRAM's ``salted_password``).

Imports only attrs and the ``_protocol`` siblings (the message classes at call time:
they import this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._codec import EncodeError

if TYPE_CHECKING:
    from .admin_messages import DeleteTopicsRequest
    from .messages import LeaveGroupRequest

__all__ = ["delete_topics_for_version", "leave_group_for_version", "redacted_bytes"]


def redacted_bytes(value: bytes) -> str:
    """The repr of a field holding a secret: its length only."""
    return f"<{len(value)} bytes redacted>"


def leave_group_for_version(request: LeaveGroupRequest, version: int) -> LeaveGroupRequest:
    """v0-2 carry one ``member_id``; v3+ the ``members`` list (KIP-345). Either spelling
    converts to the other; a static member (``group_instance_id``) or a batch of members
    cannot leave below v3."""
    from .messages import MemberIdentity

    if version >= 3:
        if not request.member_id:
            return request
        if not request.members:
            return attrs.evolve(
                request, member_id="", members=(MemberIdentity(member_id=request.member_id),)
            )
        if any(m.member_id == request.member_id for m in request.members):
            return attrs.evolve(request, member_id="")
        raise EncodeError(
            f"LeaveGroup names member {request.member_id!r} outside its members list",
            api_key=request.API_KEY,
            api_version=version,
        )
    if not request.members:
        return request
    if len(request.members) > 1:
        raise EncodeError(
            f"LeaveGroup v{version} removes one member; {len(request.members)} need v3+",
            api_key=request.API_KEY,
            api_version=version,
        )
    (member,) = request.members
    if member.group_instance_id is not None:
        raise EncodeError(
            f"a static member ({member.group_instance_id!r}) can leave only with LeaveGroup v3+",
            api_key=request.API_KEY,
            api_version=version,
        )
    if request.member_id and request.member_id != member.member_id:
        raise EncodeError(
            f"LeaveGroup names two members ({request.member_id!r}, {member.member_id!r})",
            api_key=request.API_KEY,
            api_version=version,
        )
    return attrs.evolve(request, member_id=member.member_id, members=())


def delete_topics_for_version(request: DeleteTopicsRequest, version: int) -> DeleteTopicsRequest:
    """Names move between ``topic_names`` (v0-5) and ``topics`` (v6+), as Java's
    ``DeleteTopicsRequest.Builder`` does; a topic given only by id cannot be sent
    below v6."""
    from .admin_messages import DeleteTopicState

    if version >= 6:
        if not request.topic_names:
            return request
        extra = tuple(
            DeleteTopicState(name=name)
            for name in request.topic_names
            if all(t.name != name for t in request.topics)
        )
        return attrs.evolve(request, topics=request.topics + extra, topic_names=())
    if not request.topics:
        return request
    names = list(request.topic_names)
    for topic in request.topics:
        if topic.name is None:
            raise EncodeError(
                f"DeleteTopics v{version} deletes by name; topic id {topic.topic_id} needs v6+",
                api_key=request.API_KEY,
                api_version=version,
            )
        if topic.name not in names:
            names.append(topic.name)
    return attrs.evolve(request, topics=(), topic_names=tuple(names))
