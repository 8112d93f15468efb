"""A short pass of the reliability campaign's fuzz targets (reliability/README.md).

The campaign (``python -m reliability.fuzz``) runs millions of coverage-guided inputs
per family under atheris; here every family replays its seeds, seeded mutations of
them and the 2 GiB-length probes, in a few seconds and without atheris. Each input
may parse or raise the family's typed errors, nothing else.
"""

from __future__ import annotations

import contextlib
import random
import tracemalloc
from collections.abc import Iterator

import pytest
from reliability.fuzz_targets import (
    FAMILIES,
    Family,
    close_stream_harness,
    giant_length_inputs,
    mutations,
)

MUTATIONS_PER_SEED = 120
#: No single input may allocate more than this while being rejected or decoded (a
#: reader that trusted a 2 GiB length field would allocate it).
ALLOCATION_LIMIT_BYTES = 8 * 1024 * 1024


@pytest.fixture(autouse=True)
def _close_harness() -> Iterator[None]:
    yield
    close_stream_harness()


def _run(family: Family, data: bytes) -> None:
    with contextlib.suppress(*family.allowed):
        family.run(data)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_seeds_and_mutations_raise_only_typed_errors(name: str) -> None:
    family = FAMILIES[name]
    rng = random.Random(f"short-pass-{name}")
    seeds = family.seeds()
    assert seeds, "a family without seeds fuzzes nothing"
    for seed in seeds:
        _run(family, seed)
        for data in mutations(seed, rng, MUTATIONS_PER_SEED):
            _run(family, data)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_giant_length_fields_do_not_allocate(name: str) -> None:
    family = FAMILIES[name]
    rng = random.Random(f"giant-{name}")
    seeds = family.seeds()
    worst = 0
    tracemalloc.start()
    try:
        for seed in rng.sample(seeds, min(len(seeds), 12)):
            for data in giant_length_inputs(seed):
                base = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                _run(family, data)
                worst = max(worst, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()
    assert worst < ALLOCATION_LIMIT_BYTES
