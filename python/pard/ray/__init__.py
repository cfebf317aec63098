"""pard on Ray: a pipeline's stages as actors across machines, one planner, the same C++ schedulers.

``pip install "pard[ray]"``, then::

    import ray, pard.ray
    ray.init()                                   # or ray.init(address="auto") after `ray start --head`
    pipe = pard.ray.deploy("tm", executors, policy="pard", resources={"vehicle_detect": {"num_gpus": 1}})
    fut = pipe.submit(frame)                     # or: await pipe.infer(frame)
    pipe.close(drain=True)
    print(pipe.report())                         # the same pard.Report as pard.Runtime's

Modules: :mod:`~pard.ray.deploy` (placing the actors), :mod:`~pard.ray.pipeline` (the driver's handle),
:mod:`~pard.ray.stage` (a stage actor: the ``StageScheduler`` and a dispatcher per worker),
:mod:`~pard.ray.worker` (a worker actor: the executor), :mod:`~pard.ray.planner_actor` (the planner),
:mod:`~pard.ray.clock` (one clock across nodes), :mod:`~pard.ray.traffic` (the driver's sender and poller).  Importing
``pard`` never imports Ray; importing ``pard.ray`` does.
"""

from __future__ import annotations

from .._extras import require

require("ray", "ray", "pard.ray (scale-out on Ray)")

from .clock import Offset
from .deploy import DEFAULT_WORKER_RESOURCES, deploy
from .pipeline import RayPipeline

__all__ = ["deploy", "RayPipeline", "Offset", "DEFAULT_WORKER_RESOURCES"]
