"""Self-healing after a broker failure (seed 002), from the client side.

A broker absent longer than ``heal.failure.interval.ms`` is failed (one that returns
sooner triggers nothing); the replicas it held are re-placed with the configured
replica assignor and moved in chunks of ``heal.chunk.size`` partitions through the
reassignment executor. The decisions live in the sans-I/O :class:`HealerCore`;
:class:`Healer` is the service around it, with a pluggable state store and
election (docs/admin.md, "Healing after a broker failure")::

    from coopconsumer.admin import AdminClient
    from coopconsumer.admin.heal import HealConfig, Healer

    with AdminClient({"bootstrap.servers": "localhost:9092"}) as admin:
        healer = Healer(admin, admin.replica_assignor, config=HealConfig(chunk_size=10))
        healer.run()
"""

from ._core import ChunkState as ChunkState
from ._core import ClusterSeen as ClusterSeen
from ._core import HealConfig as HealConfig
from ._core import HealerCore as HealerCore
from ._core import HealerError as HealerError
from ._core import parse_heal_config as parse_heal_config
from ._driver import AlwaysActive as AlwaysActive
from ._driver import Healer as Healer
from ._driver import HealerAdmin as HealerAdmin
from ._driver import HealerElection as HealerElection
from ._driver import HealStateStore as HealStateStore
from ._driver import MemoryStateStore as MemoryStateStore

__all__ = [
    "AlwaysActive",
    "ChunkState",
    "ClusterSeen",
    "HealConfig",
    "HealStateStore",
    "Healer",
    "HealerAdmin",
    "HealerCore",
    "HealerElection",
    "HealerError",
    "MemoryStateStore",
    "parse_heal_config",
]
