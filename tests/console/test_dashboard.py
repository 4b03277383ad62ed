"""The operator's dashboard of one tenant: calls per hour by source, refusals by reason,
busiest trees, client calls waiting and timed out; SVG drawn on the server."""
from django.test import Client

from console.dashboard import dashboard

from .conftest import SENTENCES


def test_it_counts_calls_by_source_refusals_by_reason_and_client_calls(acme, acme_work):
    root = acme_work.session()
    turn = acme_work.turn(acme_work.session(parent=root))
    for source in ("host", "host", "plugin", "mcp"):
        acme_work.ran(turn, f"{source}_tool", source=source)
    acme_work.refused(turn, SENTENCES["grant"])
    acme_work.refused(turn, SENTENCES["grant"])
    acme_work.refused(turn, SENTENCES["unknown_tool"])
    acme_work.timed_out(turn)
    acme_work.client_call(turn, "ask", timeout_ms=600000)
    seen = dashboard(acme.tenant)
    assert "<title>" in seen["calls_chart"] and "2 host</title>" in seen["calls_chart"]
    hours = dict(seen["hours_counts"])
    now_hour = list(hours)[-1]
    assert hours[now_hour] == {"host": 2, "plugin": 1, "mcp": 1, "": 3, "client": 2}
    assert seen["refusals"] == [("grant", 2, None), ("limit", 0, None), ("availability", 0, None),
                                ("unknown tool", 1, None)]
    assert (seen["clients"]["waiting_count"], seen["clients"]["timed_out"]) == (1, 1)
    [tree] = seen["trees"]
    assert (tree["root"], tree["tool_calls"], tree["depth"]) == (root, 9, 1)


def test_a_tenant_admin_opens_their_dashboard_with_svg_charts(acme, acme_work, tenant_admin):
    acme_work.refused(acme_work.turn(acme_work.session()), SENTENCES["limit"])
    response = tenant_admin.get(f"/console/{acme.tenant.slug}/dashboard")
    page = response.content.decode()
    assert response.status_code == 200
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" role="img"') == 3
    assert "No turn is running now." not in page and "Nobody is asked anything now." in page
    assert 'aria-label="Refusals by reason"' in page
    assert "Refusals by reason (last 24 hours: 1)" in page


def test_another_tenants_dashboard_does_not_exist_for_them(acme, globex, tenant_admin):
    assert tenant_admin.get(f"/console/{globex.tenant.slug}/dashboard").status_code == 404
    page = tenant_admin.get("/console/").content.decode()
    assert "/console/acme/dashboard" in page and "globex" not in page


def test_it_is_for_staff_only(acme):
    client = Client()
    client.force_login(acme.member)
    response = client.get(f"/console/{acme.tenant.slug}/dashboard")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_it_shows_the_turns_running_and_the_calls_waiting_for_a_person_and_refreshes_itself(
        acme, acme_work, tenant_admin):
    from sessions_app.actions import do_begin_tool_call, do_set_title
    from tools_app.families.comments.actions import do_ask

    session = acme_work.session()
    do_set_title(acme.principal("member"), session, "Fix the build")
    turn = acme_work.turn(session)
    do_ask(do_begin_tool_call(turn, "Bash", {"command": "make"}).id, "Run make?")
    page = tenant_admin.get(f"/console/{acme.tenant.slug}/dashboard").content.decode()
    assert '<meta http-equiv="refresh" content="15">' in page
    waiting = page[page.index('id="waiting-for-a-person"'):page.index('id="running-turns"')]
    assert "Waiting for a person (1)" in waiting
    assert f'<a href="/console/acme/live?session={session.pk}">Run make?</a>' in waiting
    assert "<td>Bash</td><td>Fix the build</td>" in waiting and "<td>acme-member</td>" in waiting
    running = page[page.index('id="running-turns"'):page.index('id="calls-per-hour"')]
    assert "Running turns (1)" in running and "<td>go</td><td>acme-member</td>" in running


def test_the_busiest_trees_are_only_those_with_work_in_the_hour(acme, acme_work):
    from sessions_app.actions import do_set_title

    busy, idle = acme_work.session(), acme_work.session()
    do_set_title(acme.principal("member"), busy, "Busy")
    acme_work.ran(acme_work.turn(busy))
    acme_work.turn(idle)  # a turn, but no tool call and no budget spent
    seen = dashboard(acme.tenant)
    assert [tree["root"] for tree in seen["trees"]] == [busy]
    assert "Busy (tool calls): 1</title>" in seen["trees_chart"] and "of 50" not in seen["trees_chart"]
