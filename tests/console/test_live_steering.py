"""The operator steers from the live page in headless Chromium: Allow and Deny a call that asks,
Stop a running turn, find a session in the running-now index, and keep working after the socket
drops."""
import uuid

import pytest
from selenium.webdriver.common.by import By

from sessions_app.actions import do_create_session, do_set_title
from tools_app.families.comments.actions import do_set_annotation
from tools_app.families.comments.models import FEEDBACK_KEY

from .browser import CuttableProxy, log_in
from .conftest import OPERATOR_PASSWORD
from .test_browser_pages import screenshot, until

pytestmark = pytest.mark.e2e  # a browser


def text(browser, selector):
    """What the operator reads in the elements `selector` picks (the page redraws at every action)."""
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText).join(' | ')", selector)


def click(browser, selector):
    browser.execute_script("document.querySelector(arguments[0]).click()", selector)


def last_turn_state(browser):
    return browser.execute_script("const s = document.querySelectorAll('.live-turn-state');"
                                  "return s.length ? s[s.length - 1].firstChild.textContent.trim() : ''")


def waiting_comment(people, session, comment_id="c1"):
    """A code review comment the agent wrote and the person has not reviewed: viewUnreviewedComments
    asks the person before showing it to the agent."""
    do_set_annotation(people.principal("admin"), session, {
        "id": comment_id, "turnId": "t0", "resource": "file:///work/app.py",
        "range": {"start": {"line": 2, "character": 0}, "end": {"line": 3, "character": 0}},
        "entries": [{"id": f"{comment_id}:0", "text": "Off by one", "_meta": {FEEDBACK_KEY: {"author": "agent"}}}],
        "_meta": {FEEDBACK_KEY: {"kind": "codeReview", "state": "created", "sessionResource": session.uri}}})


def open_live(browser, host, operator, tenant, session=None, port=None):
    path = f"/console/{tenant.slug}/live" + (f"?session={session.pk}" if session else "")
    log_in(browser, f"http://127.0.0.1:{port or host.port}", operator.username, OPERATOR_PASSWORD, path)
    until(browser, lambda: text(browser, "#live-status") == "Connected as a client of this host.")
    if session:
        until(browser, lambda: browser.find_element(By.CSS_SELECTOR, "#live-compose").is_displayed())


def send(browser, message):
    browser.find_element(By.CSS_SELECTOR, "#live-compose textarea").send_keys(message)
    click(browser, "#live-compose input[type=submit]")


ASKING = '.live-tool-call[data-tool="viewUnreviewedComments"]'


def test_the_operator_allows_a_call_that_asks_and_the_index_badges_its_session_meanwhile(acme, host, operator, browser):
    session = do_create_session(acme.principal("admin"), uuid.uuid4())
    do_set_title(acme.principal("admin"), session, "Review the parser")
    waiting_comment(acme, session)
    open_live(browser, host, operator, acme.tenant, session)
    send(browser, "/call viewUnreviewedComments {}")
    until(browser, lambda: "pending-confirmation" in text(browser, ASKING))
    assert text(browser, f"{ASKING} .live-question") == "Show the agent 1 comment waiting for your review?"
    assert text(browser, f"{ASKING} .source") == "host"
    until(browser, lambda: "needs a person" in text(browser, f'#live-session-list li[data-session="{session.uri}"]'))
    assert text(browser, f'#live-session-list li[data-session="{session.uri}"]').startswith(
        "Review the parser needs a person\nwaiting for a person · echo · acme-admin · ")
    screenshot(browser, "live-confirmation.png")
    click(browser, f"{ASKING} .live-allow")
    until(browser, lambda: last_turn_state(browser) == "complete")
    assert "completed (succeeded)" in text(browser, ASKING)
    assert '"text": "Off by one"' in text(browser, ".live-turn:last-child .live-markdown")
    assert not browser.find_elements(By.CSS_SELECTOR, ".live-allow")
    until(browser, lambda: "needs a person" not in text(browser, "#live-session-list"))
    assert "idle" in text(browser, f'#live-session-list li[data-session="{session.uri}"] .live-meta')


def test_the_operator_denies_a_call_that_asks_and_the_agent_is_told(acme, host, operator, browser):
    session = do_create_session(acme.principal("admin"), uuid.uuid4())
    waiting_comment(acme, session)
    open_live(browser, host, operator, acme.tenant, session)
    send(browser, "/call viewUnreviewedComments {}")
    until(browser, lambda: "pending-confirmation" in text(browser, ASKING))
    click(browser, f"{ASKING} .live-deny")
    until(browser, lambda: last_turn_state(browser) == "complete")
    assert text(browser, ".live-turn:last-child .live-markdown") == "The person declined to show the waiting comments."


def test_the_operator_stops_a_running_turn(acme, host, operator, browser):
    session = do_create_session(acme.principal("admin"), uuid.uuid4())
    open_live(browser, host, operator, acme.tenant, session)
    ask = f"{browser.find_element(By.ID, 'live').get_attribute('data-client-id')}__ask_operator"
    send(browser, f'/call {ask} {{"question": "Ship it?"}}')
    asking = '.live-tool-call[data-tool="ask_operator"]'
    until(browser, lambda: "running" in text(browser, asking))
    assert text(browser, f"{asking} .source") == f"client {ask.split('__')[0]}"
    click(browser, ".live-stop")
    until(browser, lambda: last_turn_state(browser) == "cancelled")
    assert "completed (failed)" in text(browser, asking) and "The turn was cancelled." in text(browser, asking)
    assert not browser.find_elements(By.CSS_SELECTOR, ".live-stop")


def test_the_index_searches_and_pages_the_tenants_sessions(acme, host, operator, browser):
    for n in range(22):
        session = do_create_session(acme.principal("member"), uuid.uuid4())
        do_set_title(acme.principal("member"), session, f"Task {n:02}")
    open_live(browser, host, operator, acme.tenant)
    until(browser, lambda: text(browser, "#live-page") == "page 1 of 2 (22 sessions)")
    assert text(browser, "#live-session-list li:first-child .live-title") == "Task 21"
    click(browser, "#live-next")
    until(browser, lambda: text(browser, "#live-page") == "page 2 of 2 (22 sessions)")
    assert text(browser, "#live-session-list .live-title") == "Task 01 | Task 00"
    browser.find_element(By.CSS_SELECTOR, "#live-search input[name=q]").send_keys("task 07")
    click(browser, "#live-search input[type=submit]")
    until(browser, lambda: text(browser, "#live-page") == "page 1 of 1 (1 sessions)")
    assert text(browser, "#live-session-list li .live-meta").startswith("idle · echo · acme-member · ")
    browser.find_element(By.CSS_SELECTOR, "#live-search input[name=q]").send_keys("x")
    click(browser, "#live-search input[type=submit]")
    until(browser, lambda: text(browser, "#live-session-list") == "No session matches.")


def test_the_page_connects_again_by_itself_after_the_socket_drops(acme, host, operator, browser):
    session = do_create_session(acme.principal("admin"), uuid.uuid4())
    proxy = CuttableProxy(host.port)
    try:
        open_live(browser, host, operator, acme.tenant, session, port=proxy.port)
        proxy.cut()
        until(browser, lambda: text(browser, "#live-status").startswith("Disconnected (1006); connecting again in "))
        assert not browser.find_element(By.CSS_SELECTOR, "#live-compose").is_displayed()  # nowhere to send it
        until(browser, lambda: text(browser, "#live-status") == "Connected as a client of this host.")
        send(browser, "hello again")  # at once: "Connected" means the chat is subscribed again
        until(browser, lambda: last_turn_state(browser) == "complete")
        assert text(browser, ".live-turn:last-child .live-markdown") == "hello again"
    finally:
        proxy.close()
