"""The coordinator's own error: ``IllegalTransition``.

Pure: imports only the package's exception hierarchy and the state enum.
"""

from __future__ import annotations

import enum

from .._errors import CoopConsumerError
from ._states import MemberState

__all__ = ["IllegalTransition"]


class IllegalTransition(CoopConsumerError):
    """The group member was asked to do something its transition table forbids: a
    driver or core bug, never a broker's or a user's doing.

    ``state``/``target`` are the classic ``MemberState`` or, for a KIP-848 member,
    ``kip848.ConsumerMemberState``. Two cases, told apart by ``target``:

    - ``target is None``: ``input_type`` arrived in ``state``, which rejects it (or a
      ``ListenerDone`` named no outstanding listener). The member is unchanged.
    - ``target`` is a state: the handler of ``(state, input_type)`` tried to move the
      member to ``target``, which that row does not allow. The member is left part-way
      through the handler and must be discarded (the driver reports it as fatal).
    """

    def __init__(
        self,
        state: MemberState | enum.Enum,
        input_type: type,
        detail: str = "",
        *,
        target: MemberState | enum.Enum | None = None,
    ) -> None:
        if target is None:
            text = f"{input_type.__name__} is not allowed in state {state.name}"
        else:
            text = (
                f"{input_type.__name__} in state {state.name} may not move the member "
                f"to {target.name}"
            )
        super().__init__(f"{text}: {detail}" if detail else text)
        self.state = state
        self.input_type = input_type
        self.target = target
