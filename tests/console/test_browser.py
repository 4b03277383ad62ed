"""The real admin in headless Chromium: an operator turns advancedTools on and a client of the
tenant, connected over a real socket, is told its session's tools changed."""
import os
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.families.computers.tools import COMPUTER_TOOLS
from tools_app.models import HostConfig

from ..ahp.protocol.harness import AhpClient
from .browser import chromium, log_in, submit
from .conftest import OPERATOR_PASSWORD, SENTENCES, Work, change_url

pytestmark = pytest.mark.e2e  # a browser

@pytest.fixture
def advanced_plugin_tool():
    PLUGINS.set_tools([Tool("deploy", description="Deploy the workspace", advanced_permission=True)])
    yield
    PLUGINS.set_tools([])


def test_an_operator_toggles_advanced_tools_in_chromium_and_a_client_hears_it(acme, host, operator,
                                                                              advanced_plugin_tool):
    base = f"http://127.0.0.1:{host.port}"
    with AhpClient(host.port, acme.tokens["member"]) as client, chromium() as browser:
        session = client.create_session()
        before = [t["name"] for t in client.subscribe(session)["serverTools"]]
        assert "deploy" not in before
        log_in(browser, base, operator.username, OPERATOR_PASSWORD, change_url(acme.tenant))
        checkbox = browser.find_element(By.ID, "id_advancedTools")
        assert not checkbox.is_selected()
        checkbox.click()
        submit(browser, browser.find_element(By.NAME, "_save"))
        assert "was changed successfully" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
        tools = client.action("session/serverToolsChanged")["action"]["tools"]
        assert [t["name"] for t in tools] == [*before, "deploy", *(t.name for t in COMPUTER_TOOLS)]
    assert HostConfig.for_tenant(acme.tenant).advanced_tools is True


@pytest.mark.skipif(not os.environ.get("AHP_SCREENSHOT_DIR"), reason="set AHP_SCREENSHOT_DIR to write screenshots")
def test_screenshot_of_the_dashboard(acme, host, operator):
    """Writes docs/dashboard.png: AHP_SCREENSHOT_DIR=docs pytest tests/console/test_browser*.py"""
    out = Path(os.environ["AHP_SCREENSHOT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    work = Work(acme)
    root = work.session()
    child = work.session(parent=root)
    for session, sources in ((root, ("host",) * 9 + ("plugin",) * 4), (child, ("host", "mcp", "mcp"))):
        turn = work.turn(session)
        for source in sources:
            work.ran(turn, f"{source}_tool", source=source)
        for sentence in SENTENCES.values():
            work.refused(turn, sentence)
        work.timed_out(turn)
        work.client_call(turn, "ide_pick", timeout_ms=600000)
    base = f"http://127.0.0.1:{host.port}"
    with chromium(1280, 1500) as browser:
        log_in(browser, base, operator.username, OPERATOR_PASSWORD, f"/console/{acme.tenant.slug}/dashboard")
        browser.find_element(By.ID, "client-calls")
        time.sleep(0.3)
        browser.save_screenshot(str(out / "dashboard.png"))
