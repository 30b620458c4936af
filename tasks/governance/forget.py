"""The ``forget-user`` flow's steps beyond the stores it deletes from (:mod:`.erasure`): the
user's traces in Langfuse, the run's audit event, its artifact and log line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

from infra.audit import record_event
from tasks.governance.erasure import Erasure, erasure_details, erasure_markdown
from tasks.governance.langfuse import langfuse_erase_user_task
from tasks.governance.langfuse_pending import save_pending

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.runtime import Runtime

ACTOR = "forget-user"


def erase_in_langfuse(
    rt: Runtime, result: Erasure, *, key: str, salt: str, trace_ids: set[str]
) -> None:
    """Delete the user's traces and scores in Langfuse (the production raw store), add the
    counts to ``result``, keep the deletes a read-back could not confirm yet for the next
    retention run, and audit the request (``governance.langfuse_erasure``)."""
    done = langfuse_erase_user_task(key, salt, trace_ids)
    result.add_langfuse(done)
    unconfirmed = [*done.pending, *done.deferred]  # the next retention run re-checks
    requested = len(done.requested) + len(done.deferred)  # as the case counts them
    save_pending(rt.store, result.receipt, requested=requested, trace_ids=unconfirmed)
    record_event(
        rt.catalog,
        event_type="governance.langfuse_erasure",
        actor=ACTOR,
        subject=result.receipt,
        details={"store": "langfuse", **done.counts()},
    )


def audit_forget_user(catalog: Catalog, result: Erasure) -> None:
    """The run's audit event (``governance.forget_user``): the receipt, never the key, with
    the counts and whether any data was found."""
    record_event(
        catalog,
        event_type="governance.forget_user",
        actor=ACTOR,
        subject=result.receipt,
        details={**erasure_details(result), "found": result.found},
    )


def publish_forget_user(result: Erasure) -> None:
    """The run's ``forget-user`` artifact (counts only) and its log line (the receipt's
    prefix and the counts)."""
    create_markdown_artifact(
        key="forget-user", markdown=erasure_markdown("forget-user", result), description="erasure"
    )
    get_run_logger().info("forget-user %s: %s", result.receipt[:16], erasure_details(result))
