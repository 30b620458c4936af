"""The task runner for the fan-out steps of scoring and curation, chosen by a setting.

``FLYWHEEL_TASK_RUNNER``:

- ``threads`` (default): a thread pool in the flow's process.
- ``dask``: ``prefect_dask.DaskTaskRunner``; with ``FLYWHEEL_TASK_RUNNER_ADDRESS``
  (``tcp://scheduler:8786``) it uses that cluster, otherwise a temporary local cluster of
  worker processes listening on loopback only, closed when the runner exits.
- ``ray``: ``prefect_ray.RayTaskRunner``; with an address (``ray://head:10001``, or ``auto``
  on a node of a running cluster) it joins that cluster, otherwise it starts a temporary
  local one on this host (no dashboard, ``LOCAL_RAY_CPUS`` CPUs), shut down when the runner
  exits.

Use the runner as a context manager around the fan-out (``with task_runner(s) as r:
r.map(task, {...})``), so a temporary cluster lives exactly as long as the work it runs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

    from infra.settings import Settings

logger = logging.getLogger(__name__)

THREAD_WORKERS = 4
# A temporary local Dask cluster: separate processes (Presidio/spaCy hold the GIL), loopback
# only, no dashboard. Point FLYWHEEL_TASK_RUNNER_ADDRESS at a real scheduler to scale out.
LOCAL_DASK_CLUSTER: dict[str, Any] = {
    "n_workers": 2,
    "threads_per_worker": 1,
    "processes": True,
    "host": "127.0.0.1",
    "dashboard_address": None,
}

# A temporary local Ray cluster: no dashboard, a small CPU count.
LOCAL_RAY_CPUS = 2
LOCAL_RAY: dict[str, Any] = {
    "num_cpus": LOCAL_RAY_CPUS,
    "include_dashboard": False,
    "log_to_driver": False,
}


def task_runner(settings: Settings, **local_cluster: Any) -> TaskRunner[Any]:
    """A fresh, unstarted task runner for ``settings.task_runner``.

    ``local_cluster`` overrides the keyword arguments of the temporary local cluster (Dask's
    ``cluster_kwargs`` or Ray's ``ray.init`` arguments; ignored when an address is set).

    Raises:
        MissingDependencyError: the chosen runner's package is not installed.
        ConfigError: an unknown runner name.
    """
    kind = settings.task_runner
    address = settings.task_runner_address
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=THREAD_WORKERS)
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:  # pragma: no cover - prefect-dask is a dependency
            raise MissingDependencyError(
                "FLYWHEEL_TASK_RUNNER=dask needs prefect-dask: pip install prefect-dask"
            ) from exc
        if address:
            logger.info("task runner: Dask cluster at %s", address)
            return DaskTaskRunner(address=address)
        logger.info("task runner: temporary local Dask cluster")
        return DaskTaskRunner(cluster_kwargs={**LOCAL_DASK_CLUSTER, **local_cluster})
    if kind == "ray":
        try:
            from prefect_ray import RayTaskRunner
        except ImportError as exc:
            raise MissingDependencyError(
                "FLYWHEEL_TASK_RUNNER=ray needs prefect-ray, which is not installed: "
                "pip install prefect-ray (or set FLYWHEEL_TASK_RUNNER=threads or dask)"
            ) from exc
        if address:
            logger.info("task runner: Ray cluster at %s", address)
            return RayTaskRunner(address=address)
        logger.info("task runner: temporary local Ray cluster")
        return RayTaskRunner(init_kwargs={**LOCAL_RAY, **local_cluster})
    raise ConfigError(f"unknown task runner {kind!r}: use threads, dask or ray")
