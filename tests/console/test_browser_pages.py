"""The operators' pages in headless Chromium against a real server: the landing page, MCP
server rows (a bad value refused on its field, a check against a real stdio server), the
catalog explainer before and after ticking advancedTools, and the live view of an echo turn.
With AHP_SCREENSHOT_DIR set, each page is also saved there (docs/ holds the README's)."""
import os
import uuid
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from sessions_app.actions import do_create_session
from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.models import HostConfig

from .browser import chromium, log_in, submit
from .conftest import OPERATOR_PASSWORD, change_url

pytestmark = pytest.mark.e2e  # a browser

@pytest.fixture
def browser():
    with chromium(1280, 1100) as driver:
        yield driver


def screenshot(browser, name):
    if os.environ.get("AHP_SCREENSHOT_DIR"):
        out = Path(os.environ["AHP_SCREENSHOT_DIR"])
        out.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(out / name))


def until(browser, predicate, timeout=20):
    return WebDriverWait(browser, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda _: predicate())


def test_the_landing_page_names_the_hosts_doors(host, browser):
    browser.get(f"http://127.0.0.1:{host.port}/")
    assert browser.find_element(By.TAG_NAME, "h1").text == "AHP host"
    assert browser.find_element(By.ID, "ws-url").text == f"ws://127.0.0.1:{host.port}/ahp"
    links = {a.text: a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#doors a")}
    assert links["the admin"] == f"http://127.0.0.1:{host.port}/admin/"
    assert links["API docs"] == f"http://127.0.0.1:{host.port}/api/v1/docs/"
    assert links["/healthz"] == f"http://127.0.0.1:{host.port}/healthz"
    screenshot(browser, "landing.png")


def row_field(browser, row, name):
    return browser.find_element(By.NAME, f"mcpServers-{row}-{name}")


def test_an_operator_adds_an_mcp_server_row_sees_a_bad_url_refused_and_checks_the_server(
        acme, host, operator, tiny_stdio_server, browser):
    base = f"http://127.0.0.1:{host.port}"
    log_in(browser, base, operator.username, OPERATOR_PASSWORD, change_url(acme.tenant))
    row_field(browser, 0, "name").send_keys("docs")
    row_field(browser, 0, "type").send_keys("http")
    row_field(browser, 0, "url").send_keys("ftp://docs.example/mcp")
    submit(browser, browser.find_element(By.NAME, "_continue"))
    cell = browser.find_element(By.CSS_SELECTOR, '#rows-mcpServers .config-row[data-row="0"] .field-url')
    assert cell.find_element(By.CSS_SELECTOR, ".errorlist").text == "mcpServers.docs.url must be an http or https URL."
    screenshot(browser, "admin-mcp-server-refused.png")
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None

    row_field(browser, 0, "name").clear()
    row_field(browser, 0, "name").send_keys("tiny")
    row_field(browser, 0, "type").send_keys("stdio")
    row_field(browser, 0, "url").clear()
    row_field(browser, 0, "server").send_keys("tiny")
    submit(browser, browser.find_element(By.NAME, "_continue"))
    assert "was changed successfully" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    assert HostConfig.for_tenant(acme.tenant).mcp_servers == {"tiny": {"type": "stdio", "server": "tiny"}}
    screenshot(browser, "admin-host-config.png")

    browser.find_element(By.CSS_SELECTOR, '#rows-mcpServers .config-row[data-row="0"] a.config-row-check').click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#check-tools tbody tr")
    assert [r.text for r in rows] == ["shout Upper-case the text."]
    screenshot(browser, "admin-mcp-check.png")


def test_an_operator_adds_a_claude_connection_row_and_sees_a_bad_base_url_refused(acme, host, operator, browser):
    log_in(browser, f"http://127.0.0.1:{host.port}", operator.username, OPERATOR_PASSWORD, change_url(acme.tenant))
    field = lambda name: browser.find_element(By.NAME, f"agentConnections-0-{name}")
    field("provider").send_keys("claude")
    field("baseUrl").send_keys("ftp://llm.example/")
    field("apiKey").send_keys("sk-1")
    submit(browser, browser.find_element(By.NAME, "_continue"))
    cell = browser.find_element(By.CSS_SELECTOR, '#rows-agentConnections .config-row[data-row="0"] .field-baseUrl')
    assert cell.find_element(By.CSS_SELECTOR, ".errorlist").text == (
        "agentConnections.claude.baseUrl must be an http or https URL.")
    assert HostConfig.for_tenant(acme.tenant).agent_connections is None

    field("baseUrl").clear()
    field("baseUrl").send_keys("https://llm.example/v1")
    submit(browser, browser.find_element(By.NAME, "_continue"))
    assert "was changed successfully" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    assert field("apiKey").get_attribute("value") == "<set>"
    browser.execute_script("document.getElementById('rows-agentConnections').scrollIntoView()")
    screenshot(browser, "admin-agent-connections.png")


@pytest.fixture
def advanced_plugin_tool():
    PLUGINS.set_tools([Tool("deploy", description="Deploy the workspace", advanced_permission=True)])
    yield
    PLUGINS.set_tools([])


def test_the_explainer_says_why_an_advanced_tool_is_hidden_until_advanced_tools_is_ticked(
        acme, host, operator, advanced_plugin_tool, browser):
    base = f"http://127.0.0.1:{host.port}"
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    explainer = f"/console/sessions/{session.pk}/catalog"
    log_in(browser, base, operator.username, OPERATOR_PASSWORD, explainer)
    row = browser.find_element(By.CSS_SELECTOR, '#catalog tr[data-tool="deploy"]')
    assert row.text == "deploy plugin hidden\ndeploy needs advanced permission, and advancedTools is off for this tenant."
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)  # below the offered tools
    screenshot(browser, "catalog-explainer.png")
    submit(browser, browser.find_element(By.LINK_TEXT, "Change the host configuration"))
    browser.find_element(By.ID, "id_advancedTools").click()
    submit(browser, browser.find_element(By.NAME, "_save"))
    assert "was changed successfully" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    browser.get(f"{base}{explainer}")
    assert browser.find_element(By.CSS_SELECTOR, '#catalog tr[data-tool="deploy"]').text == "deploy plugin offered"
    browser.get(f"{base}/console/{acme.tenant.slug}/catalog?provider=acp&origin=tool")
    assert browser.find_element(By.CSS_SELECTOR, '#catalog tr[data-tool="deploy"]').text == "deploy plugin offered"
    screenshot(browser, "catalog-preview.png")


def test_the_live_view_shows_an_echo_turns_tool_calls_as_they_happen_and_answers_its_own(
        acme, host, operator, browser):
    base = f"http://127.0.0.1:{host.port}"
    # The page redraws the chat at every action: look elements up afresh each time.
    text = lambda selector: browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText).join(' ')", selector)
    last_turn_state = lambda: browser.execute_script(
        "const states = document.querySelectorAll('.live-turn-state'); return states.length ? states[states.length - 1].innerText : ''")
    log_in(browser, base, operator.username, OPERATOR_PASSWORD, f"/console/{acme.tenant.slug}/live")
    until(browser, lambda: text("#live-status") == "Connected as a client of this host.")
    browser.find_element(By.CSS_SELECTOR, "#live-new-session input[type=submit]").click()
    compose = browser.find_element(By.CSS_SELECTOR, "#live-compose textarea")
    until(browser, compose.is_displayed)
    compose.send_keys('/call list_sessions {}')
    browser.find_element(By.CSS_SELECTOR, "#live-compose input[type=submit]").click()
    listing = '.live-tool-call[data-tool="list_sessions"]'
    until(browser, lambda: "completed (succeeded)" in text(listing))
    assert text(f"{listing} .source") == "host" and '"sessions": [{"session": "ahp-session:/' in text(listing)
    until(browser, lambda: last_turn_state() == "complete")
    # The first message named the session: the heading says so, not its id.
    until(browser, lambda: text("#live-chat-title") == "/call list_sessions {} · provider echo")

    # The page's own client tool: the agent's call waits, running, until the operator answers it.
    ask = f"{browser.find_element(By.ID, 'live').get_attribute('data-client-id')}__ask_operator"
    compose.send_keys(f'/call {ask} {{"question": "Ship it?"}}')
    browser.find_element(By.CSS_SELECTOR, "#live-compose input[type=submit]").click()
    asking = '.live-tool-call[data-tool="ask_operator"]'  # drawn under the name the page announced
    until(browser, lambda: "running" in text(asking))
    until(browser, lambda: text("#live-session-list .live-meta").startswith("waiting for a client"))
    assert text(f"{asking} .source") == f"client {ask.split('__')[0]}" and 'input: {"question": "Ship it?"}' in text(asking)
    screenshot(browser, "live-session.png")
    browser.find_element(By.CSS_SELECTOR, f"{asking} input[name=answer]").send_keys("yes, ship it")
    browser.find_element(By.CSS_SELECTOR, f"{asking} .live-answer input[type=submit]").click()
    until(browser, lambda: last_turn_state() == "complete" and "completed (succeeded)" in text(asking))
    assert text(".live-turn:last-child .live-markdown") == "yes, ship it"


def test_the_audit_and_sessions_fit_1400_pixels_newest_first_with_its_arguments(acme, host, operator, acme_work):
    from .conftest import SENTENCES

    session = acme_work.session()
    turn = acme_work.turn(session)
    for sentence in SENTENCES.values():
        acme_work.refused(turn, sentence)
    acme_work.ran(turn, "list_sessions")
    acme_work.timed_out(turn)
    with chromium(1400, 900) as browser:
        log_in(browser, f"http://127.0.0.1:{host.port}", operator.username, OPERATOR_PASSWORD,
               "/admin/console/auditentry/")
        rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
        assert rows[0].find_element(By.CSS_SELECTOR, ".field-tool_name").text == "pick"  # the last made
        assert rows[1].find_element(By.CSS_SELECTOR, ".field-arguments").text == '{"path": "."}'
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400
        # No column scrolled off: the results box does not scroll sideways, and the last column shows.
        assert browser.execute_script("const r = document.querySelector('#changelist .results');"
                                      "return r.scrollWidth <= r.clientWidth")
        assert browser.execute_script("return document.querySelector('#result_list thead th:last-child')"
                                      ".getBoundingClientRect().right") <= 1400
        screenshot(browser, "admin-audit.png")
        browser.get(f"http://127.0.0.1:{host.port}/admin/sessions_app/session/")
        assert browser.execute_script("const r = document.querySelector('#changelist .results');"
                                      "return r.scrollWidth <= r.clientWidth")
        browser.get(f"http://127.0.0.1:{host.port}/admin/sessions_app/session/{session.pk}/change/")
        assert browser.find_element(By.CSS_SELECTOR, ".field-activity_words .readonly").text == "running"
        screenshot(browser, "admin-session.png")
