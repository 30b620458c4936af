"""The forms' limits hold at the API, as the UI's "Run" button and `prefect deployment run`
reach it: a real Prefect API refuses a forget-user run whose key is an e-mail address (409)
and stores no run with it; a run with a real key is created."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from deployments import serve
from infra.privacy import user_key

pytestmark = pytest.mark.integration


def registered(name: str, monkeypatch: pytest.MonkeyPatch) -> UUID:
    """Register one deployment of prefect.yaml as `python -m deployments.serve` builds it."""
    monkeypatch.chdir(serve.REPO_ROOT)
    (spec,) = serve.select(serve.read_specs(), [name])
    return serve.build_deployment(spec).apply()  # type: ignore[no-any-return]


def runs_of(client: Any, deployment_id: UUID) -> list[Any]:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    return client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
    )


def test_api_refuses_a_forget_user_run_with_an_email(
    prefect_api: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import get_client
    from prefect.exceptions import PrefectHTTPStatusError

    deployment_id = registered("forget-user", monkeypatch)
    with get_client(sync_client=True) as client:
        assert client.read_deployment(deployment_id).enforce_parameter_schema
        with pytest.raises(PrefectHTTPStatusError) as refused:
            client.create_flow_run_from_deployment(
                deployment_id, parameters={"user_key": "alice@example.com"}
            )
        assert refused.value.response.status_code == 409
        assert "user_key" in refused.value.response.text
        assert runs_of(client, deployment_id) == []  # the address is stored nowhere

        key = user_key("alice@example.com", "salt")  # what `flywheel forget-user` sends
        run = client.create_flow_run_from_deployment(deployment_id, parameters={"user_key": key})
        assert run.parameters == {"user_key": key}
        assert [r.id for r in runs_of(client, deployment_id)] == [run.id]
        client.delete_flow_run(run.id)  # nothing serves this deployment: never let it run


def test_api_refuses_a_collect_run_with_negative_hours(
    prefect_api: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import get_client
    from prefect.exceptions import PrefectHTTPStatusError

    deployment_id = registered("collect", monkeypatch)
    with get_client(sync_client=True) as client:
        with pytest.raises(PrefectHTTPStatusError) as refused:
            client.create_flow_run_from_deployment(deployment_id, parameters={"hours": -2})
        assert refused.value.response.status_code == 409
        assert runs_of(client, deployment_id) == []
