"""The Prefect UI's run forms: every parameter of every deployment in deployments/prefect.yaml
has a description, and the values that can do harm are refused by the schema the server
enforces (Prefect's own ``parameter_schema``, as ``prefect deploy`` builds it, validated with
the function the API runs before it creates a flow run)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
import yaml
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import ValidationError, validate

from deployments import serve
from infra import parameters
from infra.keys import model_prefix
from infra.privacy import user_key
from tasks.governance.erasure import KEY_RE

SPECS = {s.name: s for s in serve.read_specs()}
RAW = {d["name"]: d for d in yaml.safe_load(serve.PREFECT_YAML.read_text())["deployments"]}


def schema_of(name: str) -> dict[str, Any]:
    """The parameter schema ``prefect deploy`` registers for the deployment ``name``."""
    return parameter_schema(serve.load_flow(SPECS[name].entrypoint)).model_dump_for_openapi()


SCHEMAS = {name: schema_of(name) for name in SPECS}


def accepts(name: str, params: dict[str, Any]) -> bool:
    """Whether the API would create a run of ``name`` with these parameters."""
    try:
        validate(params, SCHEMAS[name], raise_on_error=True)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", list(SPECS))
def test_every_parameter_has_a_description(name: str) -> None:
    schema = SCHEMAS[name]
    missing = [p for p, field in schema["properties"].items() if not field.get("description")]
    assert not missing, f"{name}: add {missing} to the `Args:` section of the flow's docstring"
    for model, definition in schema.get("definitions", {}).items():
        bare = [f for f, spec in definition["properties"].items() if not spec.get("description")]
        assert not bare, f"{name}: {model} fields without Field(description=...): {bare}"


def test_the_forms_that_have_fields_show_them() -> None:
    """Guards the test above against an empty schema (a flow Prefect could not introspect)."""
    fields = {name: set(schema["properties"]) for name, schema in SCHEMAS.items()}
    assert fields["collect"] == {"window_start", "hours"}
    assert fields["forget-user"] == {"user_key"}
    assert fields["release"] == {"version", "options"}
    assert fields["train"] == {"method", "max_steps", "base_version", "workload"}
    assert fields["train-and-release"] == {"method", "privacy_override"}
    assert {"ReleaseOptions"} <= set(SCHEMAS["release-control"]["definitions"])
    assert {"LoopOptions"} <= set(SCHEMAS["run"]["definitions"])


def test_the_ui_description_starts_with_what_the_flow_does() -> None:
    for name, spec in SPECS.items():
        flow = serve.load_flow(spec.entrypoint)
        assert flow.description and not flow.description.startswith("Args:"), name
        summary = flow.description.split("\n\nArgs:")[0]
        assert len(summary) > 60 and "Args:" not in summary, name


@pytest.mark.parametrize(
    "value",
    [
        "alice@example.com",
        "Alice Smith",
        "user-42",
        "",
        hashlib.sha256(b"x").hexdigest().upper(),  # the key is lowercase hex
        hashlib.sha256(b"x").hexdigest()[:63],
        hashlib.sha256(b"x").hexdigest() + "0",
        hashlib.sha256(b"x").hexdigest() + "\n",
    ],
)
def test_forget_user_refuses_anything_but_a_user_key(value: str) -> None:
    assert not accepts("forget-user", {"user_key": value})


def test_forget_user_accepts_the_key_the_cli_sends() -> None:
    key = user_key("alice@example.com", "some-salt")  # what `flywheel forget-user ID` sends
    assert accepts("forget-user", {"user_key": key})
    assert not accepts("forget-user", {})  # the key is required
    assert KEY_RE.pattern == parameters.USER_KEY_PATTERN  # same rule as the flow's own check


@pytest.mark.parametrize("name", ["collect", "score"])
def test_hours_must_be_one_to_a_week(name: str) -> None:
    for hours in (-2, 0, 169):
        assert not accepts(name, {"hours": hours}), hours
    for hours in (1, 24, 168):
        assert accepts(name, {"hours": hours}), hours
    with pytest.raises(ParameterTypeError, match="hours"):  # a call from Python too
        serve.load_flow(SPECS[name].entrypoint).validate_parameters({"hours": -2})


def test_retention_days_cannot_be_negative() -> None:
    assert not accepts("retention", {"days": -1})
    assert accepts("retention", {"days": 0}) and accepts("retention", {"days": None})
    assert accepts("retention", {})


@pytest.mark.parametrize(("name", "field"), [("release", "version"), ("train", "base_version")])
def test_model_versions_are_v_and_a_number(name: str, field: str) -> None:
    base = {"version": "v1"} if name == "release" else {}
    for version in ("v0", "v3", "v12"):
        assert accepts(name, {**base, field: version}), version
        assert model_prefix(version) == f"models/{version}/"  # the store agrees
    for version in ("3", "V3", "v3 ", "latest", "../v3", "v-1"):
        assert not accepts(name, {**base, field: version}), version


def test_train_steps_and_methods() -> None:
    assert not accepts("train", {"max_steps": 0}) and accepts("train", {"max_steps": 2})
    assert not accepts("train", {"method": "ppo"}) and accepts("train", {"method": "auto"})
    assert not accepts("train-and-release", {"method": "ppo"})


def test_a_privacy_override_needs_a_reason() -> None:
    assert accepts("train-and-release", {"privacy_override": "INC-12: test tenant, fixed"})
    assert accepts("train-and-release", {"privacy_override": None})
    for blank in ("", "   ", "x" * 501):
        assert not accepts("train-and-release", {"privacy_override": blank}), blank


def test_release_options_refuse_bad_policy_values() -> None:
    assert accepts("release", {"version": "v2", "options": {"shadow_fraction": 0.5}})
    assert not accepts("release", {"version": "v2", "options": {"shadow_fraction": 1.5}})
    assert not accepts("release", {"version": "v2", "options": {"min_shadow_pairs": 1}})
    assert not accepts("release-control", {"action": "delete"})


def test_the_rollback_run_an_alert_asks_for_names_the_release_it_rolled_back() -> None:
    from infra.routing import RoutingState, WorkloadRelease, apply_rollback
    from infra.routing.alerts import rolled_back_release

    canary = WorkloadRelease(candidate="v3", phase="canary", weight=5, release_id="v3-00ff00ff")
    before = RoutingState(stable="v1", workloads={"sql": canary})
    saved = apply_rollback(before, reason="alert", actor="alertmanager", workload="sql")
    assert saved is not None
    release = rolled_back_release(saved, before=before, workload="sql")
    assert release == {"version": "v3", "release_id": "v3-00ff00ff", "workload": "sql"}
    assert set(release) < set(SCHEMAS["rollback"]["properties"])  # the form has each field
    assert accepts("rollback", {"reason": "alert firing for v3: CandidateModelRegression"})
    assert accepts("rollback", {"reason": "alert firing for v3", **release})
    assert not accepts("rollback", {"reason": "x", "release_id": ""})  # empty: leave it out


@pytest.mark.parametrize("name", list(SPECS))
def test_every_deployment_enforces_its_schema(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert RAW[name].get("enforce_parameter_schema") is True  # `prefect deploy`
    monkeypatch.chdir(serve.REPO_ROOT)
    deployment = serve.build_deployment(SPECS[name])  # `python -m deployments.serve`
    assert deployment.enforce_parameter_schema is True
    # the same form as `prefect deploy`'s, but for the workload fields, which list the
    # configured workloads (here none: the shared release alone)
    expected = copy.deepcopy(SCHEMAS[name])
    serve.limit_workloads([expected["properties"], *expected["definitions"].values()], ())
    assert deployment._parameter_openapi_schema.model_dump_for_openapi() == expected
