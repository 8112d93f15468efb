"""examples/asyncio_service.py runs to success against a broker (as a user runs it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coopconsumer.testing import BOOTSTRAP_ENV

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "asyncio_service.py"


def test_the_asyncio_service_example() -> None:
    argv = [sys.executable, str(EXAMPLE), "--records", "600"]
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        argv += ["--bootstrap", external]
    # The timeout only catches a hang on a shared two-core machine.
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd="/")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "handled 600 records exactly once with two consumers on one loop" in done.stdout
    handled = re.search(r"worker-1 handled (\d+), worker-2 (\d+)", done.stdout)
    assert handled is not None
    assert int(handled.group(1)) + int(handled.group(2)) == 600
    assert int(handled.group(2)) > 0  # the second consumer got partitions and read
