"""Requests whose data moved between fields across versions: ``for_version``.

Callers build one version-agnostic request; ``_framing.encode_request`` puts it in the
shape of the negotiated version with :func:`for_version`, as Java's request builders
convert them (LeaveGroup's ``member_id`` became ``members`` in v3, KIP-345;
DeleteTopics' ``topic_names`` became ``topics`` in v6). What the JSON message specs
cannot say, so it is written by hand, above the generated modules (``messages``,
``admin_messages``), which never import it.

Imports only attrs and the ``_protocol`` siblings; the admin messages when a
DeleteTopics request is converted (so the consumer's path does not load them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from ._codec import EncodeError
from ._schema import Request
from .messages import LeaveGroupRequest, MemberIdentity

if TYPE_CHECKING:
    from .admin_messages import DeleteTopicsRequest

__all__ = ["delete_topics_for_version", "for_version", "leave_group_for_version"]

_R = TypeVar("_R", bound=Request)

#: DeleteTopics' API key (``admin_messages.DeleteTopicsRequest.API_KEY``, checked by
#: tests/protocol/test_request_shapes.py), so that the table needs no admin import.
_DELETE_TOPICS: Final = 20


def for_version(request: _R, version: int) -> _R:
    """``request`` in the shape ``version`` has; most requests have one shape for all
    their versions and are returned as they are. Raises ``EncodeError`` when the
    request cannot be expressed at ``version``."""
    convert = _CONVERSIONS.get(request.API_KEY)
    if convert is None:
        return request
    converted: _R = convert(request, version)
    return converted


def leave_group_for_version(request: LeaveGroupRequest, version: int) -> LeaveGroupRequest:
    """v0-2 carry one ``member_id``; v3+ the ``members`` list (KIP-345). Either spelling
    converts to the other; a static member (``group_instance_id``) or a batch of members
    cannot leave below v3."""
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


#: API key -> the conversion of the requests that have more than one shape.
_CONVERSIONS: Final[dict[int, Callable[[Any, int], Any]]] = {
    LeaveGroupRequest.API_KEY: leave_group_for_version,
    _DELETE_TOPICS: delete_topics_for_version,
}
