"""The Prefect UI as an operator uses it, in a real browser (Debian's chromium driven by
Playwright, no browser download): against a real `prefect server start` and
``python -m deployments.serve`` with the settings' own logging (nothing forced to INFO), a
rollback started by clicking through its custom-run form completes and tells what it did on its
Logs tab and in its artifact; a version that names no model is refused with the CLI's message.

FLYWHEEL_TEST_UI_SCREENSHOTS=DIR keeps the two screenshots there (docs/operating/img is where the
docs take them from); else they go to the test's tmp dir."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.prefect_server import (
    PrefectServer,
    api_client,
    api_json,
    log_tail,
    prefect_server,
)
from tests.procs import background

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 180_000  # a served run is a child process that imports the flow: seconds, more when busy


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """A Prefect server with the ``rollback`` deployment served by ``deployments.serve`` as
    an operator starts it: Prefect's logging settings are the ones prepare_environment gives."""
    tmp = tmp_path_factory.mktemp("ui")
    with prefect_server(tmp) as server:
        env = {k: v for k, v in server.env.items() if not k.startswith("PREFECT_LOGGING")}
        env |= {
            "FLYWHEEL_HOME": str(tmp / "flywheel-home"),
            "PREFECT_RUNNER_POLL_FREQUENCY": "2",
            # v0, the stable version of a fresh home, is servable: a rollback with nothing to
            # roll back completes (the upstream is never called)
            "FLYWHEEL_GATEWAY__UPSTREAMS": '{"v0": "http://127.0.0.1:9/v1"}',
        }
        log = tmp / "serve.log"
        args = [sys.executable, "-m", "deployments.serve", "rollback"]
        with background(args, log, env=env, cwd=REPO) as serving, api_client(server) as api:
            deadline = time.monotonic() + 240
            while not api_json(api, "POST", "/deployments/filter", json={}):
                if serving.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"rollback was not served\n{log_tail(log)}")
                time.sleep(1.0)
            yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (apt-get install chromium; .ci/test-deps does)")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; ``page.failed`` lists the Prefect API calls it made that failed, as
    (status or the browser's error, method, URL)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(WAIT_MS)  # every wait may be behind a run that is starting
    page = context.new_page()
    page.failed = []

    def answered(response: Any) -> None:
        if response.status >= 400 and "/api/" in response.url:
            page.failed.append((response.status, response.request.method, response.url))

    def unanswered(request: Any) -> None:
        if "/api/" in request.url:
            page.failed.append((request.failure, request.method, request.url))

    page.on("response", answered)
    page.on("requestfailed", unanswered)
    yield page
    context.close()


def screenshots_dir(tmp_path: Path) -> Path:
    where = Path(os.environ.get("FLYWHEEL_TEST_UI_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


def open_custom_run(page: Any, url: str) -> None:
    """Deployments list -> rollback -> Run -> Custom run, by clicking."""
    page.goto(f"{url}/deployments")
    page.get_by_role("link", name="rollback", exact=True).first.click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Custom run", exact=True).click()
    page.get_by_role("button", name="Submit").wait_for()


def form_field(page: Any, name: str) -> Any:
    label = page.locator(".schema-form-property__label", has_text=re.compile(f"^{name} "))
    return page.locator(".schema-form-property").filter(has=label)


def submit_run(page: Any, server: PrefectServer, *, run_name: str, **fields: str) -> None:
    """Fill the form (a field that may be empty is switched to text first), click Submit,
    and open the run's page (found by the name typed into the form)."""
    from playwright.sync_api import expect

    name_box = page.locator("input[type=text]").first
    name_box.fill(run_name)
    for name, value in fields.items():
        field = form_field(page, name)
        if field.locator("textarea").count() == 0:
            field.get_by_role("button", name="str", exact=True).click()
        field.locator("textarea").fill(value)
        expect(field.locator("textarea")).to_have_value(value)
    expect(name_box).to_have_value(run_name)  # not replaced by the form's generated name
    submit = page.get_by_role("button", name="Submit")
    submit.click()
    # the run the click created, asked of the API until it is there: the UI's toast
    # ("<name> scheduled") shows for a few seconds only, and a test process starved on two busy
    # cores missed it and waited out its 180 s (CI-10)
    query = {"flow_runs": {"name": {"any_": [run_name]}}}
    deadline = time.monotonic() + WAIT_MS / 1000
    with api_client(server) as api:
        while not (found := api_json(api, "POST", "/flow_runs/filter", json=query)):
            assert time.monotonic() < deadline, not_created(page, api, run_name, server)
            if busy_refusal(page):  # "Oops. Something went wrong.": click Submit again
                submit.click()
            page.wait_for_timeout(1000)  # the page's events are handled while it waits
    assert len(found) == 1, found
    page.goto(f"{server.url}/runs/flow-run/{found[0]['id']}")


def busy_refusal(page: Any) -> bool:
    """Whether the page's last API call to create a run was refused with the server's 503
    (its SQLite database was busy; under load on two cores, CI-18 showed the UI's "Oops.
    Something went wrong." twice and no run): the answer Prefect's own clients retry, as an
    operator does by clicking Submit again. Taken off the list, so each refusal is one retry;
    any other failure is left for :func:`not_created` to report."""
    for i, (status, method, url) in enumerate(page.failed):
        if status == 503 and method == "POST" and url.endswith("/create_flow_run"):
            del page.failed[i]
            print(f"the server was busy (503) for {url}: Submit clicked again")
            return True
    return False


def not_created(page: Any, api: Any, run_name: str, server: PrefectServer) -> str:
    """Why no run of that name: what the page shows (an error toast?), the API calls it made
    that failed, the runs there are and the server's log."""
    runs = api_json(api, "POST", "/flow_runs/filter", json={"limit": 20})
    seen = [(r["name"], r["state_type"], r["created"]) for r in runs]
    return (
        f"Submit created no run named {run_name} (page {page.url}); runs: {seen}; "
        f"failed API calls: {page.failed}; "
        f"page text: {page.inner_text('body')[-1500:]!r}; "
        f"server log: {log_tail(server.log)}"
    )


def test_a_rollback_started_from_the_ui_tells_what_it_did(
    served: PrefectServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    started = time.perf_counter()
    open_custom_run(page, served.url)
    submit_run(page, served, run_name="ui-rollback", reason="checked from the UI")
    expect(page.get_by_text("Completed").first).to_be_visible(timeout=WAIT_MS)

    page.get_by_text("Logs", exact=True).first.click()
    said = "rollback via store: nothing to roll back (checked from the UI)"
    expect(page.get_by_text(said)).to_be_visible(timeout=WAIT_MS)  # sent at INFO
    out = screenshots_dir(tmp_path)
    page.screenshot(path=str(out / "ui-run-logs.png"))

    page.get_by_text("Artifacts", exact=True).first.click()
    # the artifact's card (a link) shows its description; the text alone also matched the log
    # line of the tab just left, still on the page for a moment under load (CI-28 clicked it)
    page.get_by_role("link").filter(has_text=said).first.click()
    table = page.locator("table")
    expect(table).to_be_visible(timeout=WAIT_MS)
    for cell in ("workload", "shared", "stable", "v0", "phase", "idle"):
        expect(table.get_by_text(cell, exact=True).first).to_be_visible()
    page.screenshot(path=str(out / "ui-run-artifact.png"))
    print(f"UI rollback run: {time.perf_counter() - started:.0f} s")


def test_the_rollback_form_refuses_a_version_that_names_no_model(
    served: PrefectServer, page: Any
) -> None:
    from playwright.sync_api import expect

    open_custom_run(page, served.url)
    submit_run(page, served, run_name="ui-bad-version", version="three")
    expect(page.get_by_text("Failed").first).to_be_visible(timeout=WAIT_MS)
    # the message `flywheel release three` gives (deployments.argtypes.model_version)
    expect(
        page.get_by_text("invalid model version 'three': expected v0, v1, ...").first
    ).to_be_visible(timeout=WAIT_MS)
