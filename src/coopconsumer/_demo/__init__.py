"""The ``coopconsumer demo`` command: eager vs cooperative rebalancing on one broker.

``run_demo(argv) -> int`` is the entry point (``python -m coopconsumer._demo`` runs it
too). Not public API: an application of the public API, like the examples.
"""

from ._demo_cli import run_demo as run_demo

__all__ = ["run_demo"]
