"""Self-healing after a broker failure, from the client side.

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

from ._heal_core import ChunkState as ChunkState
from ._heal_core import ClusterSeen as ClusterSeen
from ._heal_core import HealConfig as HealConfig
from ._heal_core import HealerCore as HealerCore
from ._heal_core import HealerError as HealerError
from ._heal_core import parse_heal_config as parse_heal_config
from ._heal_driver import AlwaysActive as AlwaysActive
from ._heal_driver import Healer as Healer
from ._heal_driver import HealerAdmin as HealerAdmin
from ._heal_driver import HealerElection as HealerElection
from ._heal_driver import HealStateStore as HealStateStore
from ._heal_driver import MemoryStateStore as MemoryStateStore

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
