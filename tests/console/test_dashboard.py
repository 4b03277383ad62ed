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
