from __future__ import annotations

from pathlib import Path

import pytest

from infra.errors import ObjectNotFound, StoreError
from infra.keys import parse_window_start, window_id
from infra.settings import Settings
from infra.store import LocalStore


def test_local_store_put_get_list_delete(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a/b/one.txt", b"1")
    store.put("a/b/one.txt", b"2")  # replace, atomically
    store.put("a/c.txt", b"3")
    assert store.get("a/b/one.txt") == b"2"
    assert store.list("a/") == ["a/b/one.txt", "a/c.txt"]
    assert store.list("a/b") == ["a/b/one.txt"]
    assert not [p for p in tmp_path.rglob(".tmp-*")]
    store.delete("a/c.txt")
    with pytest.raises(ObjectNotFound):
        store.get("a/c.txt")
    with pytest.raises(StoreError):
        store.put("../escape", b"x")


def test_settings_env_nested_and_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLYWHEEL_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("FLYWHEEL_REWARD__W_JUDGE", "0.5")
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", "s3cret")
    s = Settings()
    assert s.reward.w_judge == 0.5
    assert "s3cret" not in repr(s)
    assert s.resolved_store_url == str(tmp_path / "h" / "store")
    assert s.resolved_catalog_uri == f"sqlite:///{tmp_path / 'h' / 'catalog.db'}"
    assert s.salt() == s.salt() and len(s.salt()) == 32  # generated once, then stable


def test_dotenv_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("FLYWHEEL_CURATE__K_ANONYMITY=9\n")
    assert Settings().curate.k_anonymity == 9


def test_window_start_parsing() -> None:
    start = parse_window_start("2026-11-22T10:00:00Z")
    assert window_id(start) == "2026-11-22T10:00:00Z"
    with pytest.raises(ValueError, match="hour boundary"):
        parse_window_start("2026-11-22T10:30:00Z")


def test_the_generated_salt_is_private_and_created_once_by_concurrent_processes(
    tmp_path: Path,
) -> None:
    """The salt keys every pseudonymous user key: it is created readable by its owner alone, and
    of several processes starting at once on a fresh home, all read the one value that landed
    (a second writer never replaces a salt already in use)."""
    import stat
    from concurrent.futures import ThreadPoolExecutor

    from infra.settings import Settings

    def salt(_: int) -> str:
        return Settings(home=tmp_path).salt()

    with ThreadPoolExecutor(8) as pool:
        values = set(pool.map(salt, range(16)))
    path = tmp_path / "salt"
    assert values == {path.read_text()} and len(path.read_text()) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["salt"]  # no temporary file left


def test_a_prometheus_url_with_credentials_is_not_named_in_errors() -> None:
    from infra.errors import MetricsError
    from infra.metrics.promql_prometheus import PrometheusClient

    client = PrometheusClient("http://ops:hunter2-secret@127.0.0.1:1/prom?token=abc", timeout_s=1)
    with pytest.raises(MetricsError) as err:
        client.query("up")
    assert "hunter2" not in str(err.value) and "token" not in str(err.value)
    assert "127.0.0.1:1" in str(err.value)
