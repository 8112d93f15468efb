"""``python -m coopconsumer._demo``: the demo without the ``coopconsumer`` command."""

import sys

from . import run_demo

sys.exit(run_demo())
