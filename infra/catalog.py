"""Iceberg catalog and the flywheel tables (namespace ``flywheel``; schemas in
:mod:`infra.catalog_schemas`).

SQLite ``SqlCatalog`` with the warehouse inside the object store by default; a REST catalog by
setting ``FLYWHEEL_CATALOG_TYPE=rest``. Tables are created on first use. Window-keyed writes
replace the window in one commit (overwrite with a filter), so reruns never duplicate rows.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from infra.catalog_schemas import DAY_PARTITIONS, NAMESPACE, SCHEMAS
from infra.errors import CatalogError, TransientCatalogError
from infra.faults import arm_catalog
from infra.retries import RETRIES, STORE_RETRIES, mark_gave_up, retry_call

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table

    from infra.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
# a row of any table: one of the row TypedDicts (tasks.datasets and beside), each a
# Mapping[str, object] to mypy; read by column name only
Row = TypeVar("Row", bound=Mapping[str, object])

COMMIT_RETRIED = "Commit failed due to a concurrent update, retrying"
"""What pyiceberg logs (``pyiceberg.table``, WARNING) each time it redoes a commit that lost a
race: it retries a lost race itself (the table's ``commit.retry.num-retries``, 4 by default,
100 ms doubling), rebuilding only the manifests and stopping when the lost answer had in fact
landed. That is the one level that retries a race; :class:`_CommitRetries` counts it."""


class _CommitRetries(logging.Filter):
    """Counts pyiceberg's redone commits as ``catalog.commit`` in ``flywheel_retries_total``
    (its loop has no other hook); the record is kept. The S3 fault suite fails if a pyiceberg
    release words it otherwise (no race counted)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(COMMIT_RETRIED):
            RETRIES.add("catalog.commit")
        return True


logging.getLogger("pyiceberg.table").addFilter(_CommitRetries())

WAREHOUSE_RETRIES = 9
"""Retries of one request to the warehouse's object store, made by pyarrow's S3 client (AWS's
default strategy: 50 ms doubling, about 13 s in all; pyarrow's own default is 2 retries). The
one level that retries a data or metadata file: a failure it gave up on is not retried by the
commit, the read or the task around them (:func:`_io`). These retries are pyarrow's and are
not in ``flywheel_retries_total``."""


def warehouse_retries() -> Any:
    """The S3 retry strategy of the warehouse's FileIO (pyiceberg's ``s3.retry-strategy-impl``
    names this factory; it builds one per filesystem)."""
    from pyarrow.fs import AwsDefaultS3RetryStrategy

    return AwsDefaultS3RetryStrategy(max_attempts=WAREHOUSE_RETRIES)


def open_catalog(settings: Settings) -> Catalog:
    """The configured catalog (SQLite by default), with object-store credentials when on S3.

    Two processes opening a fresh SQLite catalog at once can race on creating its metadata
    tables, and a REST catalog can be briefly unreachable: both are transient and retried
    (:func:`~infra.retries.retry_call`, operation ``catalog.open``).

    Raises:
        CatalogError: the catalog cannot be opened (after the retries when transient).
    """
    return retry_call(
        lambda: _open_catalog(settings), operation="catalog.open", policy=STORE_RETRIES
    )


def _open_catalog(settings: Settings) -> Catalog:
    props: dict[str, str] = {"warehouse": settings.resolved_warehouse}
    if settings.resolved_warehouse.startswith("s3://"):
        props.update(_s3_props(settings))
    try:
        if settings.catalog_type == "rest":
            from pyiceberg.catalog.rest import RestCatalog

            if not settings.catalog_uri:
                raise CatalogError("FLYWHEEL_CATALOG_URI is required for the REST catalog")
            return arm_catalog(RestCatalog("flywheel", uri=settings.catalog_uri, **props))
        from pyiceberg.catalog.sql import SqlCatalog

        uri = settings.resolved_catalog_uri
        if uri.startswith("sqlite:///"):
            from pathlib import Path

            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            if not settings.resolved_warehouse.startswith("s3://"):
                Path(settings.resolved_warehouse.removeprefix("file://")).mkdir(
                    parents=True, exist_ok=True
                )
        return arm_catalog(SqlCatalog("flywheel", uri=uri, **props))
    except CatalogError:
        raise
    except Exception as exc:
        where = uri_of(settings)
        error = TransientCatalogError if _transient_open(exc) else CatalogError
        raise error(
            f"cannot open the {settings.catalog_type} catalog at {where} "
            f"(FLYWHEEL_CATALOG_URI): {type(exc).__name__}: {exc}"
        ) from exc


def _transient_open(exc: Exception) -> bool:
    """Whether opening the catalog may work if tried again: a lost race on creating SQLite's
    metadata tables, a locked database, an unreachable or overloaded REST catalog."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names & {"OperationalError", "IntegrityError", "ConnectionError", "Timeout", "ServerError"}
    )


def uri_of(settings: Settings) -> str:
    """The catalog's address without credentials (``user:password@`` is dropped)."""
    return re.sub(r"//[^/@]*@", "//", settings.catalog_uri or settings.resolved_catalog_uri)


def _s3_props(settings: Settings) -> dict[str, str]:
    props = {
        "s3.region": settings.s3_region,
        "s3.retry-strategy-impl": f"{__name__}.{warehouse_retries.__name__}",
    }
    if settings.s3_endpoint_url:
        props["s3.endpoint"] = settings.s3_endpoint_url
    if settings.s3_access_key_id:
        props["s3.access-key-id"] = settings.s3_access_key_id.get_secret_value()
    if settings.s3_secret_access_key:
        props["s3.secret-access-key"] = settings.s3_secret_access_key.get_secret_value()
    return props


def get_table(catalog: Catalog, name: str) -> Table:
    """Load ``flywheel.<name>``, creating it (and the namespace) with its schema (a request to
    the warehouse's object store is retried by its client, :data:`WAREHOUSE_RETRIES`)."""
    return _io(lambda: _get_table(catalog, name))


_TRANSIENT_IO = (
    "SERVICE_UNAVAILABLE",
    "INTERNAL_FAILURE",
    "SLOW_DOWN",
    "THROTTLING",
    "NETWORK_CONNECTION",
    "REQUEST_TIMEOUT",
    "HTTP status 5",
)


def _io(fn: Callable[[], T]) -> T:
    """``fn()`` with a transient failure of the warehouse's S3 client (pyarrow's ``OSError``
    naming a 5xx, throttling or a lost connection) raised as :class:`TransientCatalogError`,
    marked as retried already (the client made :data:`WAREHOUSE_RETRIES` retries of it)."""
    try:
        return fn()
    except OSError as exc:
        text = str(exc)
        if "AWS Error" in text and any(code in text for code in _TRANSIENT_IO):
            error = TransientCatalogError(f"object store of the warehouse: {text}")
            raise mark_gave_up(error) from exc
        raise


def _get_table(catalog: Catalog, name: str) -> Table:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

    ident = f"{NAMESPACE}.{name}"
    try:
        return _evolved(catalog.load_table(ident), name)
    except NoSuchTableError:
        pass
    if name not in SCHEMAS:
        raise CatalogError(f"unknown table {name!r}")
    try:
        catalog.create_namespace(NAMESPACE)
    except NamespaceAlreadyExistsError:
        pass
    except Exception:  # a concurrent creator won the race (e.g. SQLite IntegrityError)
        if (NAMESPACE,) not in catalog.list_namespaces():
            raise
    from pyiceberg.exceptions import TableAlreadyExistsError

    try:
        table = catalog.create_table(ident, schema=SCHEMAS[name])
    except TableAlreadyExistsError:  # created concurrently
        return catalog.load_table(ident)
    if name in DAY_PARTITIONS:
        from pyiceberg.transforms import DayTransform

        source, part = DAY_PARTITIONS[name]
        with table.update_spec() as spec:
            spec.add_field(source, DayTransform(), part)
        table = catalog.load_table(ident)
    return table


def _evolved(table: Table, name: str) -> Table:
    """``table`` with the columns its schema gained since it was created (added as
    optional columns, so old rows read them as null); unchanged when nothing is missing."""
    want = SCHEMAS.get(name)
    have = {f.name for f in table.schema().fields}
    if want is None or all(f.name in have for f in want):
        return table
    from pyiceberg.exceptions import CommitFailedException

    try:
        with table.update_schema() as update:
            update.union_by_name(want)
    except CommitFailedException:  # another writer evolved it first
        pass
    return table.refresh()


def to_arrow(name: str, rows: Sequence[Row]) -> pa.Table:
    """Rows as an Arrow table with exactly the schema of ``name`` (extra keys ignored)."""
    schema = SCHEMAS[name]
    columns = {f.name: [row.get(f.name) for row in rows] for f in schema}
    return pa.Table.from_pydict(columns, schema=schema)


@contextmanager
def _commit(name: str) -> Iterator[None]:
    """Translate a commit that kept losing races (pyiceberg retried it, :data:`COMMIT_RETRIED`)
    into a :class:`TransientCatalogError` marked as retried: the next run may succeed, nothing
    in this one tries it again."""
    from pyiceberg.exceptions import CommitFailedException

    try:
        yield
    except CommitFailedException as exc:
        error = TransientCatalogError(f"commit to flywheel.{name} kept losing races: {exc}")
        raise mark_gave_up(error) from exc


def table_lease_of(catalog: Catalog) -> Any:
    """The table lease held shared around one commit (orphan removal waits for it, data files
    included: :mod:`infra.lease`)."""
    from infra.lease import table_lease

    return table_lease(catalog).shared()


def _write(name: str, write: Callable[[], None]) -> None:
    """One commit to ``flywheel.<name>`` under the table lease. A lost race is redone by
    pyiceberg (counted as ``catalog.commit``), a failed request by its client or the store:
    each at one level, so nothing here tries the write again."""
    with _commit(name):
        _io(write)


def append_rows(catalog: Catalog, name: str, rows: Sequence[Row]) -> None:
    """Append rows to a table in one commit (no-op for no rows).

    Raises:
        TransientCatalogError: concurrent commits kept winning; retry later.
    """
    if rows:
        _write(name, lambda: _lease_append(catalog, name, rows))


def _lease_append(catalog: Catalog, name: str, rows: Sequence[Row]) -> None:
    with table_lease_of(catalog):
        get_table(catalog, name).append(to_arrow(name, rows))


def replace_where(
    catalog: Catalog, name: str, row_filter: BooleanExpression, rows: Sequence[Row]
) -> None:
    """Replace the rows matching ``row_filter`` with ``rows`` in one commit (a rerun never
    duplicates: the same filter replaces what the last run wrote).

    Raises:
        TransientCatalogError: concurrent commits kept winning; retry later.
    """

    def overwrite() -> None:
        with table_lease_of(catalog), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "did not match any records"
            table = get_table(catalog, name)
            table.overwrite(to_arrow(name, rows), overwrite_filter=row_filter)

    _write(name, overwrite)


def delete_rows(catalog: Catalog, name: str, row_filter: BooleanExpression) -> None:
    """Delete the rows matching ``row_filter`` (copy-on-write; data files are rewritten).

    Raises:
        TransientCatalogError: concurrent commits kept winning; retry later.
    """

    def delete() -> None:
        with table_lease_of(catalog), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            get_table(catalog, name).delete(delete_filter=row_filter)

    _write(name, delete)


def scan(
    catalog: Catalog,
    name: str,
    row_filter: BooleanExpression | None = None,
    snapshot_id: int | None = None,
) -> pa.Table:
    """Read a table (optionally filtered, optionally as of a snapshot) into Arrow."""
    from pyiceberg.expressions import AlwaysTrue

    def read() -> pa.Table:
        table = get_table(catalog, name)
        return table.scan(row_filter=row_filter or AlwaysTrue(), snapshot_id=snapshot_id).to_arrow()

    return _io(read)


def current_snapshot_id(catalog: Catalog, name: str) -> int | None:
    """The id of the table's current snapshot, None for a table with no snapshot yet."""
    snap = get_table(catalog, name).current_snapshot()
    return snap.snapshot_id if snap else None
