"""The consumer's own commits: ``OwnCommits``.

The commit before revoking (Java's auto-commit in ``onJoinPrepare``), which holds the
app work behind it and the revoked partitions paused until it is answered;
auto-commit of the consumed positions (on the member's ``AutoCommitDue``, and of
manually assigned partitions before they are dropped); the commit at close of a
manual assignment. The member times and retries them (``RetriedCommitRequested``);
this side takes the positions, remembers what auto-commit committed and logs what
failed.

Runs on the thread that calls ``poll()``. Imports the driver's API, config and the
value types; never ``confluent_kafka`` or a facade.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future

import attrs

from .._config import ConsumerConfig
from .._errors import CoopConsumerError
from .._io._member_driver import Driver
from .._member import OffsetAndMetadata
from .._types import TopicPartition
from ._arguments import FetcherLike
from ._positions import FetchPositions

__all__ = ["OwnCommits", "RevokeCommit"]

log = logging.getLogger("coopconsumer.consumer")


@attrs.define(kw_only=True)
class RevokeCommit:
    """The commit before revoking while it runs (``OwnCommits.step_revoke``);
    the member retries and times it (``RetriedCommitRequested``)."""

    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    #: Every partition being revoked: held paused until the commit is over.
    revoking: frozenset[TopicPartition]
    #: Partitions this commit paused in the fetcher (not those the application paused).
    paused: set[TopicPartition]
    future: Future[None]


class OwnCommits:
    """The commits the consumer makes itself (see the module)."""

    def __init__(
        self, cfg: ConsumerConfig, fetcher: FetcherLike, driver: Driver, positions: FetchPositions
    ) -> None:
        self._fetcher = fetcher
        self._driver = driver
        self._positions = positions
        self._api_timeout_s = cfg.default_api_timeout_ms / 1000.0
        self.auto_commit = cfg.enable_auto_commit
        #: Set by the member's AutoCommitDue; the commit is made by the next poll().
        self.auto_commit_due = False
        self._last_auto_commit: dict[TopicPartition, int] = {}
        #: The commit before revoking, while it runs (see ``start_revoke``).
        self.revoke_commit: RevokeCommit | None = None

    def forget(self, partitions: frozenset[TopicPartition]) -> None:
        """The partitions were dropped: what auto-commit committed of them no longer
        counts (a partition assigned again is committed again)."""
        for tp in partitions:
            self._last_auto_commit.pop(tp, None)

    def hold_started(self, starts: Mapping[TopicPartition, int]) -> None:
        """Starts handed to the fetcher while the commit before revoking runs: a
        partition being revoked must not return records its commit did not take."""
        commit = self.revoke_commit
        if commit is None or not starts:
            return
        held = (starts.keys() & commit.revoking) - self._positions.paused - commit.paused
        if held:
            self._fetcher.pause(held)
            commit.paused |= held

    def start_close_commit(
        self, timeout_s: float
    ) -> tuple[dict[TopicPartition, OffsetAndMetadata], Future[None]] | None:
        """``close()`` of a manually assigned consumer with auto-commit: commit the
        consumed positions, the member retrying until ``timeout_s`` (Java's
        ``maybeAutoCommitOffsetsSync``); None when there is nothing to commit. The
        facade waits for the future and calls :meth:`end_close_commit`."""
        offsets = self._uncommitted(frozenset(self._positions.assigned))
        if not offsets:
            return None
        future = self._driver.commit_retried(offsets, timeout_s, "auto-commit at close")
        return offsets, future

    def end_close_commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        error: CoopConsumerError | None,
    ) -> None:
        """The commit at close is over: remember it, or log why not (close goes on).
        Raises ``error`` when the driver failed."""
        if error is None:
            self._last_auto_commit.update({tp: om.offset for tp, om in offsets.items()})
            return
        if self._driver.failure is not None:
            raise error
        log.warning(
            "auto-commit of %d manually assigned partition(s) at close failed: %s",
            len(offsets),
            error,
        )

    def start_revoke(self, partitions: frozenset[TopicPartition]) -> None:
        """Java's auto-commit in ``onJoinPrepare``: the consumed positions of the
        partitions about to be revoked are committed before ``on_partitions_revoked``
        runs, so the next owner starts after every record this member returned.

        Without blocking ``poll()``: the member runs the commit (retries and deadline:
        ``RetriedCommitRequested``) and the app work queued behind it (the REVOKED
        callback first) waits for it, while ``poll()`` keeps its timeout and records of
        the other partitions keep flowing. Every partition being revoked is paused
        meanwhile, so no record of theirs is returned after their positions were
        taken: also those the commit leaves out because they have no position yet
        (librdkafka's position() stays OFFSET_INVALID until a partition returns its
        first record), whose records would otherwise flow uncommitted until the
        REVOKED callback and be read again by their next owner, and those a
        committed-offset lookup starts meanwhile (``hold_started``)."""
        offsets = self.consumed_offsets(partitions)
        if not offsets:
            return  # nothing returned by any of them: nothing to commit or hold
        paused = (partitions & self._fetcher.assigned) - self._positions.paused
        if paused:
            self._fetcher.pause(paused)
        self.revoke_commit = RevokeCommit(
            offsets=offsets,
            revoking=partitions,
            paused=set(paused),
            future=self._driver.commit_retried(
                offsets, self._api_timeout_s, "auto-commit before revoking"
            ),
        )

    def step_revoke(self) -> bool:
        """True once the commit before revoking is over (its future is answered).

        A commit that could not be made is logged and the partitions are given up
        anyway: their next owner starts from the last committed offset, so records may
        be processed twice, none lost. Raises only when the driver failed."""
        commit = self.revoke_commit
        assert commit is not None
        if not commit.future.done():
            return False
        error = commit.future.exception()
        if error is not None and self._driver.failure is not None:
            self._end_revoke()
            raise self._driver.failure
        if error is None:
            self._last_auto_commit.update({tp: om.offset for tp, om in commit.offsets.items()})
        else:
            log.warning(
                "auto-commit before revoking %d partition(s) failed; their next owner "
                "may process records again: %s",
                len(commit.offsets),
                error,
            )
        self._end_revoke()
        return True

    def _end_revoke(self) -> None:
        commit = self.revoke_commit
        assert commit is not None
        self.revoke_commit = None
        # The REVOKED callback that follows drops them; resumed first so that nothing
        # stays paused behind the application's back should it not follow.
        still = commit.paused & self._positions.assigned
        if still:
            self._fetcher.resume(still)

    def auto_commit_async(self) -> None:
        self.auto_commit_due = False
        self._commit_uncommitted_async(frozenset(self._positions.assigned))

    def commit_removed(self, partitions: frozenset[TopicPartition]) -> None:
        """With auto-commit, commit the consumed positions of manually assigned
        ``partitions`` about to be unassigned, without waiting (Java's ``assign()``
        commits asynchronously before changing the assignment; librdkafka commits
        removed partitions too). Queued before the change, so it is sent first."""
        if self.auto_commit and partitions:
            self._commit_uncommitted_async(partitions)

    def _commit_uncommitted_async(self, partitions: frozenset[TopicPartition]) -> None:
        changed = self._uncommitted(partitions)
        if not changed:
            return
        future = self._driver.commit(changed)
        committed = {tp: om.offset for tp, om in changed.items()}

        def done(f: Future[None]) -> None:
            error = f.exception()
            if error is None:
                self._last_auto_commit.update(committed)
            else:
                log.info("auto-commit failed (retried at the next interval): %s", error)

        future.add_done_callback(done)

    def _uncommitted(
        self, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Consumed positions of ``partitions`` not committed by auto-commit yet."""
        offsets = self.consumed_offsets(partitions)
        return {tp: om for tp, om in offsets.items() if self._last_auto_commit.get(tp) != om.offset}

    def consumed_offsets(
        self, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        positions = self._fetcher.positions(partitions & self._fetcher.assigned)
        return {tp: OffsetAndMetadata(offset=p) for tp, p in positions.items() if p >= 0}
