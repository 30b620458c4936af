"""Which model versions trained on a user's data (``flywheel lineage --user USER_ID``): by
Iceberg time travel to each version's ``training_examples`` snapshot, or, once that snapshot
is expired, from the salted user keys its ``lineage.json`` keeps. :class:`LineageView` reads
only what this question needs from any version's ``lineage.json`` (the bootstrap model's has
no training data at all)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator

from infra.errors import ObjectNotFound
from infra.serving import models
from tasks.train.lineage import LINEAGE, TrainedRows

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings
    from infra.store import ObjectStore


class _DataView(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    training_examples: TrainedRows | None = None
    user_keys: list[str] = []

    @field_validator("training_examples", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None


class LineageView(BaseModel):
    """What any version's lineage.json says about the user data it saw (``data`` is absent
    for the bootstrap model: synthetic data only)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    data: _DataView | None = None


@dataclass(kw_only=True)
class UserLineage:
    """Which versions trained on a user's data, and how each was established."""

    versions: list[str]
    evidence: dict[str, str]  # version -> "time-travel" | "lineage.json"


def versions_trained_on(store: ObjectStore, catalog: Catalog, *, key: str) -> UserLineage:
    """Versions whose training data held rows of the user with salted key ``key``: by time
    travel to each version's snapshot (the trained trace ids with that user key), or from the
    user keys recorded in lineage.json when the snapshot has been expired."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import get_table

    table = get_table(catalog, "training_examples")
    hits: dict[str, str] = {}
    for version in models.list_versions(store):
        try:
            view = LineageView.model_validate(models.read_model_json(store, version, LINEAGE))
        except ObjectNotFound:
            continue
        data = view.data
        if data is None or data.training_examples is None:
            continue  # the bootstrap model: synthetic data only
        ids, sids = set(data.training_examples.trace_ids), data.training_examples.snapshot_ids
        if all(table.snapshot_by_id(s) is not None for s in sids):
            for sid in sids:
                rows = table.scan(
                    row_filter=EqualTo("user_key", key),
                    selected_fields=("trace_id",),
                    snapshot_id=sid,
                ).to_arrow()
                if ids & set(rows.column("trace_id").to_pylist()):
                    hits[version] = "time-travel"
        elif key in set(data.user_keys):
            hits[version] = "lineage.json"
    ordered = [v for v in models.list_versions(store) if v in hits]
    return UserLineage(versions=ordered, evidence=hits)


def lineage_for_user(user_id: str, settings: Settings | None = None) -> UserLineage:
    """``flywheel lineage --user USER_ID``: the raw id is hashed with the salt, never stored."""
    from infra.catalog import open_catalog
    from infra.privacy import user_key
    from infra.settings import get_settings
    from infra.store import open_store

    settings = settings or get_settings()
    key = user_key(user_id, settings.salt())
    return versions_trained_on(open_store(settings), open_catalog(settings), key=key)
