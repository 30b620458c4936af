"""Serve every deployment of ``deployments/prefect.yaml`` from one process on this machine
(``prefect serve``): no work pool and no worker; schedules, parameters, tags and concurrency
limits are the ones the file gives, and flow runs start as child processes in the repository
root, so entrypoints and golden/ resolve as they do under ``prefect deploy``.

    PREFECT_API_URL=http://127.0.0.1:4200/api python -m deployments.serve
    python -m deployments.serve collect score --limit 2    # only these, two runs at a time
    python -m deployments.serve --list                     # what would be served, then exit

Stop it with Ctrl-C: the schedules of the served deployments are paused until it runs again.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import yaml

from infra.settings.workloads import DEFAULT_WORKLOAD
from infra.traces.conversation import JsonObject

if TYPE_CHECKING:
    from prefect import Flow
    from prefect.deployments.runner import RunnerDeployment

log = logging.getLogger(__name__)

PREFECT_YAML = Path(__file__).with_name("prefect.yaml")
REPO_ROOT = PREFECT_YAML.parent.parent


class Schedule(TypedDict, total=False):
    """One entry of a deployment's ``schedules:`` in prefect.yaml (Prefect's schedule keys)."""

    interval: float  # seconds
    anchor_date: str
    cron: str
    rrule: str
    timezone: str
    active: bool
    parameters: JsonObject  # the flow's parameters for this schedule (arbitrary JSON)


@dataclass(frozen=True, kw_only=True)
class DeploymentSpec:
    """One entry of prefect.yaml's ``deployments:``, the parts ``prefect serve`` uses."""

    name: str
    entrypoint: str  # flows/<module>.py:<function>
    parameters: dict[str, Any] = field(default_factory=dict)
    schedules: list[Schedule] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    concurrency_limit: int | dict[str, Any] | None = None
    enforce_parameter_schema: bool = True  # the server refuses runs whose parameters break it

    @property
    def schedule_text(self) -> str:
        """``5 * * * * UTC`` (one per schedule), or ``on demand``."""
        shown = [
            " ".join(str(s[k]) for k in ("cron", "interval", "rrule", "timezone") if s.get(k))
            for s in self.schedules
        ]
        return ", ".join(shown) or "on demand"


def read_specs(path: Path = PREFECT_YAML) -> list[DeploymentSpec]:
    """The deployments of a prefect.yaml, in file order (YAML anchors resolved)."""
    raw = yaml.safe_load(path.read_text())
    return [
        DeploymentSpec(
            name=d["name"],
            entrypoint=d["entrypoint"],
            parameters=dict(d.get("parameters") or {}),
            schedules=list(d.get("schedules") or []),
            tags=list(d.get("tags") or []),
            description=d.get("description"),
            concurrency_limit=d.get("concurrency_limit"),
            enforce_parameter_schema=d.get("enforce_parameter_schema", True),
        )
        for d in raw.get("deployments") or []
    ]


def select(specs: list[DeploymentSpec], names: list[str]) -> list[DeploymentSpec]:
    """The specs named (all when ``names`` is empty), in file order.

    Raises:
        ValueError: a name that is not a deployment of the file.
    """
    known = [s.name for s in specs]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no deployment named {', '.join(unknown)} (known: {', '.join(known)})")
    return [s for s in specs if not names or s.name in names]


def load_flow(entrypoint: str) -> Flow[..., Any]:
    """The flow of ``flows/<module>.py:<function>``, imported as the module ``flows.<module>``
    (one module object, as when a flow is called from another flow)."""
    path, _, function = entrypoint.partition(":")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    return getattr(module, function)  # type: ignore[no-any-return]


def build_deployment(spec: DeploymentSpec, workloads: Collection[str] = ()) -> RunnerDeployment:
    """``flow.to_deployment(...)`` for one spec; the description defaults to the flow's (its
    docstring's text before ``Args:``: :func:`infra.flow_docs.described`), as under
    ``prefect deploy``; a ``workload`` field offers ``workloads`` (the configured ones)."""
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.client.schemas.schedules import construct_schedule

    schedules = [
        DeploymentScheduleCreate(
            schedule=construct_schedule(
                interval=s.get("interval"),
                anchor_date=s.get("anchor_date"),
                cron=s.get("cron"),
                rrule=s.get("rrule"),
                timezone=s.get("timezone"),
            ),
            active=s.get("active", True),
            parameters=s.get("parameters") or {},
        )
        for s in spec.schedules
    ]
    limit = spec.concurrency_limit
    deployment = load_flow(spec.entrypoint).to_deployment(
        name=spec.name,
        parameters=spec.parameters,
        schedules=schedules,
        tags=spec.tags,
        description=spec.description,
        concurrency_limit=ConcurrencyLimitConfig(**limit) if isinstance(limit, dict) else limit,
        enforce_parameter_schema=spec.enforce_parameter_schema,
    )
    # typed as "or a coroutine" (it also dispatches async); called here, outside a loop, it is sync
    served = cast("RunnerDeployment", deployment)
    schema = served._parameter_openapi_schema  # the form's schema; no public setter
    limit_workloads([schema.properties, *schema.definitions.values()], workloads)
    return served


def limit_workloads(nodes: list[JsonObject], workloads: Collection[str]) -> None:
    """Make each ``workload`` field among ``nodes`` (a schema's properties, and its models')
    a choice of ``default`` (the shared release) and the configured ``workloads``: the run
    form shows a list, and the server refuses any other name before the run exists.

    The nodes are JSON schema objects (arbitrary JSON: ``JsonObject``)."""
    choices = [DEFAULT_WORKLOAD, *sorted(set(workloads) - {DEFAULT_WORKLOAD})]
    for node in nodes:
        props = node.get("properties", node)
        field = props.get("workload")
        if not isinstance(field, dict):
            continue
        for branch in field.get("anyOf", [field]):
            if branch.get("type") == "string":
                branch.pop("pattern", None)
                branch["enum"] = choices


def listing(specs: list[DeploymentSpec]) -> str:
    """One line per deployment: name, entry point and schedule, in aligned columns."""
    name_w = max((len(s.name) for s in specs), default=0)
    entry_w = max((len(s.entrypoint) for s in specs), default=0)
    return "\n".join(
        f"{s.name:<{name_w}}  {s.entrypoint:<{entry_w}}  {s.schedule_text}" for s in specs
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m deployments.serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="serve only these deployments")
    parser.add_argument("--limit", type=int, default=None, help="most flow runs at a time")
    parser.add_argument("--list", action="store_true", help="print the deployments and exit")
    parser.add_argument("--file", type=Path, default=PREFECT_YAML, help="another prefect.yaml")
    return parser


def main(argv: list[str] | None = None) -> int:
    """python -m deployments.serve: serve the deployments of prefect.yaml."""
    from infra.settings import prepare_environment

    ns = _parser().parse_args(argv)
    try:
        specs = select(read_specs(ns.file), ns.names)
    except ValueError as exc:
        print(f"serve: error: {exc}", file=sys.stderr)
        return 2
    print(listing(specs))
    if ns.list:
        return 0
    settings = prepare_environment()
    if not os.environ.get("PREFECT_API_URL"):
        print(
            "serve: PREFECT_API_URL is not set: runs go to a temporary local API that the UI "
            "cannot see (start `prefect server start` and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api)",
            file=sys.stderr,
        )
    os.chdir(REPO_ROOT)  # entrypoints and golden/ are relative to the repository root
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))

    from prefect import serve

    serve(*[build_deployment(spec, settings.workloads) for spec in specs], limit=ns.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
