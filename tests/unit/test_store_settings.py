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
