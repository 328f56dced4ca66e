"""vapipe on a Ray cluster: cameras placed on actors across nodes, moved when a node dies.

The core (``pipeline``, ``stages``) never imports this package; it needs Ray
(``pip install 'vapipe[cluster]'``).  Entry points: :func:`connect`, :class:`ClusterRun`,
:class:`ClusterOptions`; ``vapipe run NAME --source ... --cluster ADDRESS`` uses them, and
``vapipe serve --cluster ADDRESS`` through :mod:`cluster.service_backend`.
"""

from .connect import ClusterError, connect
from .placement import NodeInfo, capacity, spread
from .records import STATES, CameraRecord, ClusterSummary, Loss
from .supervisor import ClusterOptions, ClusterRun

__all__ = ["ClusterError", "connect", "NodeInfo", "capacity", "spread", "STATES", "CameraRecord",
           "ClusterSummary", "Loss", "ClusterOptions", "ClusterRun"]
