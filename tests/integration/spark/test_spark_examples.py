"""``examples/spark_stream_lag.py`` runs to success as a user would run it.

It runs in a subprocess with its own embedded broker (or ``--bootstrap`` with
``COOPCONSUMER_BOOTSTRAP``) and ``--master local[2]``: the session's standalone
cluster gives every slot to the test session, and the example's standalone path is the
one ``examples/spark_pipeline.py`` runs (tests/test_examples.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from coopconsumer.testing import BOOTSTRAP_ENV

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: Generous bound for a shared two-core machine; reaching it means the example hangs.
TIMEOUT_S = 300


def test_stream_lag_example_reaches_lag_zero() -> None:
    argv = [sys.executable, str(EXAMPLES / "spark_stream_lag.py"), "--master", "local[2]"]
    argv += ["--seconds", "4", "--rate", "150"]
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        argv += ["--bootstrap", external]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd="/")
    out = done.stdout
    assert done.returncode == 0, f"failed:\n{out[-3000:]}\n{done.stderr[-3000:]}"
    produced = re.search(r"^producer stopped after (\d+) events$", out, re.M)
    assert produced is not None
    events = int(produced.group(1))
    assert events > 0
    lags = [int(n) for n in re.findall(r"^lag check: group \S+ lag (\d+),", out, re.M)]
    assert lags[-1] == 0
    assert max(lags) > 0  # it was behind while events flowed, then caught up
    assert f"stream OK: lag 0 after {events} events, all counted" in out
