"""Parameter types of the flows: what the Prefect UI's run form shows and the API enforces.

Prefect builds a deployment's parameter schema from the flow's signature
(``prefect.utilities.callables.parameter_schema``): each field's description comes from the
``Args:`` section of the flow's docstring (a ``Field(description=...)`` here would be dropped),
its constraints from the ``Annotated`` metadata below. Every deployment enforces its schema
(``enforce_parameter_schema`` in deployments/prefect.yaml), so the server refuses a run whose
parameters break them (409) before the run exists: nothing is stored in its parameters.

Bounds (``ge``/``le``) are also checked when a flow is called from Python. The two patterns
are schema-only (the form and the API): from Python, forget-user's body checks the key with a
message that says what to do (:func:`tasks.governance.erasure.check_user_key`, which a test
relies on), and a model version must name a model in the store (:func:`infra.keys.model_prefix`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.settings.workloads import WORKLOAD_PATTERN

# tasks.governance.erasure.KEY_RE: sha256 hex of salt + user id
USER_KEY_PATTERN = "^[0-9a-f]{64}$"
VERSION_PATTERN = r"^v[0-9]+$"  # infra.keys.model_prefix: models/v0/, models/v1/, ...

# the lengths too: the server's pattern check is Python's re.search, whose $ also matches
# before a final newline
UserKey = Annotated[
    str, Field(json_schema_extra={"pattern": USER_KEY_PATTERN, "minLength": 64, "maxLength": 64})
]
Receipt = UserKey  # an erasure receipt: sha256 hex too, of the key (never the key)
ModelVersion = Annotated[str, Field(json_schema_extra={"pattern": VERSION_PATTERN})]
# a run holds its whole window in memory and writes it as one batch: a week at most (the CLI
# refuses the same range); a longer backfill is several runs
MAX_HOURS = 168
Hours = Annotated[int, Field(ge=1, le=MAX_HOURS)]
Days = Annotated[int, Field(ge=0)]
# simulated requests of one `flywheel run` cycle, every demo workload's together: enough pairs
# for the weaker workload (the clock) to gain significantly in one cycle, which half of it did
# not reliably give (measurements: README "What `make run` does")
LOOP_REQUESTS = 3200
Steps = Annotated[int, Field(ge=1)]
TrainMethod = Literal["auto", "dpo", "rft", "grpo"]
# a workload name (infra.settings.workloads); the flow's body checks that it is configured
Workload = Annotated[str, Field(json_schema_extra={"pattern": WORKLOAD_PATTERN, "maxLength": 64})]
_VERSION_RE = re.compile(VERSION_PATTERN)
_RELEASE_ID_RE = re.compile(r"^(.+)-[0-9a-f]{8}$")  # infra.routing.state.new_release_id


def check_model_version(value: str) -> str:
    """``value`` when it names a model version: ``v<number>`` (a model in the store) or a
    version FLYWHEEL_GATEWAY__UPSTREAMS names; the CLI and the run forms refuse anything else
    with this message.

    Raises:
        ValueError: it names no version.
    """
    if _VERSION_RE.match(value):
        return value
    from infra.settings import get_settings

    upstreams = sorted(get_settings().gateway.upstreams)
    if value in upstreams:
        return value
    named = (
        f" or one FLYWHEEL_GATEWAY__UPSTREAMS names ({', '.join(upstreams)})" if upstreams else ""
    )
    raise ValueError(f"invalid model version {value!r}: expected v0, v1, ...{named}")


def check_release_id(value: str) -> str:
    """``value`` when it is shaped like a release id (``<version>-<8 hex digits>``, as
    ``flywheel status`` shows it).

    Raises:
        ValueError: it is not.
    """
    if _RELEASE_ID_RE.match(value):
        return value
    raise ValueError(
        f"invalid release id {value!r}: expected <version>-<8 hex digits> as `flywheel status` "
        "shows it, e.g. v3-1a2b3c4d"
    )


# a version or release id a rollback names (infra.gateway.admin.RollbackRequest's bounds);
# checked when the run starts rather than by a schema pattern, since a version may be an
# upstream's name (settings), so the gateway's run is never refused for a name it routed
RollbackVersion = Annotated[
    str, Field(min_length=1, max_length=200), AfterValidator(check_model_version)
]
ReleaseId = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(check_release_id)]
# why a person overrides a check (audited): a sentence, not a document; blank is no reason
OverrideReason = Annotated[
    str, Field(json_schema_extra={"pattern": r"\S", "minLength": 1, "maxLength": 500})
]
