"""Version-free queries: each builds a request that encodes at every version it
supports, and its reader gives the same answer whichever layout carried it."""

from __future__ import annotations

import pytest

from coopconsumer._protocol import decode, encode, error_codes
from coopconsumer._protocol.messages import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from coopconsumer._protocol.queries import CommittedOffset, OffsetFetchQuery, offset_fetch_answer

QUERY = OffsetFetchQuery(group_id="g", partitions={"t": (1, 0), "a": (3,)}, require_stable=True)


@pytest.mark.parametrize(
    "version", range(OffsetFetchRequest.MIN_VERSION, OffsetFetchRequest.MAX_VERSION + 1)
)
def test_offset_fetch_query_encodes_at_every_version(version: int) -> None:
    request = QUERY.build(version)
    back = decode(OffsetFetchRequest, encode(request, version), version)
    assert back == request
    assert request.require_stable is (version >= 7)  # KIP-447: v7+ only
    if version >= 8:
        (group,) = request.groups
        assert group.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in group.topics or ()] == [
            ("a", (3,)),
            ("t", (0, 1)),
        ]
    else:
        assert request.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in request.topics or ()] == [
            ("a", (3,)),
            ("t", (0, 1)),
        ]


def test_offset_fetch_answer_reads_both_layouts_alike() -> None:
    single = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(
                        partition_index=0, committed_offset=7, committed_leader_epoch=2
                    ),
                ),
            ),
        ),
    )
    batched = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(
                group_id="g",
                topics=(
                    OffsetFetchResponseTopics(
                        name="t",
                        partitions=(
                            OffsetFetchResponsePartitions(
                                partition_index=0, committed_offset=7, committed_leader_epoch=2
                            ),
                        ),
                    ),
                ),
            ),
        )
    )
    expected = {
        ("t", 0): CommittedOffset(
            offset=7, leader_epoch=2, metadata="", error_code=error_codes.NONE
        )
    }
    assert offset_fetch_answer(single, "g", 7).partitions == expected
    assert offset_fetch_answer(batched, "g", 8).partitions == expected


def test_offset_fetch_answer_keeps_the_group_error_of_its_version() -> None:
    old = OffsetFetchResponse(error_code=error_codes.NOT_COORDINATOR)
    new = OffsetFetchResponse(
        groups=(OffsetFetchResponseGroup(group_id="g", error_code=error_codes.NOT_COORDINATOR),)
    )
    assert offset_fetch_answer(old, "g", 7).error_code == error_codes.NOT_COORDINATOR
    assert offset_fetch_answer(new, "g", 8).error_code == error_codes.NOT_COORDINATOR
    other = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(group_id="x", error_code=error_codes.NOT_COORDINATOR),
            OffsetFetchResponseGroup(group_id="y"),
        )
    )
    assert offset_fetch_answer(other, "g", 8).error_code == error_codes.NONE
