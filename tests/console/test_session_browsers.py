"""Read-only browsers (sessions by tree, chats by origin, tool calls) and per-session grants
given and taken back on the session page."""
from grants.models import Principal
from sessions_app.models import Chat, Session


def test_sessions_are_listed_per_tree_with_parent_and_depth(acme, acme_work, tenant_admin):
    root = acme_work.session()
    child = acme_work.session(parent=root)
    grandchild = acme_work.session(parent=child)
    acme_work.session()  # another tree
    response = tenant_admin.get(f"/admin/sessions_app/session/?tree={root.pk}")
    listed = {s.pk: s.depth for s in response.context["cl"].result_list}
    assert listed == {root.pk: 0, child.pk: 1, grandchild.pk: 2}
    page = response.content.decode()
    assert f"/admin/sessions_app/session/{child.pk}/change/" in page  # the grandchild's parent link


def test_the_session_list_shows_orchestration_budget_used(acme, acme_work, tenant_admin):
    root = acme_work.session()
    page = tenant_admin.get("/admin/sessions_app/session/").content.decode()
    assert "0/50 sessions, 0/50 chats, 0/100 messages" in page or "not recorded" in page
    assert str(root.pk) in page


def test_the_browsers_are_read_only(acme, acme_work, tenant_admin):
    session = acme_work.session()
    assert tenant_admin.get("/admin/sessions_app/session/add/").status_code == 403
    assert tenant_admin.get(f"/admin/sessions_app/session/{session.pk}/delete/").status_code == 403
    page = tenant_admin.get("/admin/sessions_app/toolcall/").status_code
    assert page == 200


def test_a_browser_page_saves_nothing(acme, acme_work, tenant_admin):
    chat = acme_work.session().chats.get()
    url = f"/admin/sessions_app/chat/{chat.pk}/change/"
    page = tenant_admin.get(url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert tenant_admin.post(url, {"title": "renamed behind do_rename_chat"}).status_code == 403
    chat.refresh_from_db()
    assert chat.title == ""


def test_chats_show_their_origin(acme, acme_work, tenant_admin):
    session = acme_work.session()
    default = session.chats.get()
    Chat.objects.create(session=session, origin_kind="tool", origin_chat=default, origin_tool_call_id="call-7",
                        title="spawned")
    page = tenant_admin.get("/admin/sessions_app/chat/?origin_kind=tool").content.decode()
    assert "tool of" in page and "tool call call-7" in page


def test_tool_calls_show_status_contributor_duration_and_outcome(acme, acme_work, tenant_admin):
    turn = acme_work.turn(acme_work.session())
    acme_work.ran(turn, "lint")
    acme_work.client_call(turn, "pick")
    page = tenant_admin.get("/admin/sessions_app/toolcall/").content.decode()
    assert "waiting for its client" in page and ">ide<" in page and " ms<" in page and ">ok<" in page


def session_form(**fields):
    return {"grant_person": "", "grant": "", **fields}


def test_a_sessionless_call_is_listed_with_no_session(acme, acme_work, tenant_admin):
    from rest_framework.test import APIClient

    from sessions_app.models import ToolCall

    acme_work.ran(acme_work.turn(acme_work.session()), "lint")
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['member']}")
    assert rest.post("/api/v1/tools/list_sessions", {}, format="json").status_code == 200
    call = ToolCall.objects.get(tool_name="list_sessions")
    page = tenant_admin.get("/admin/sessions_app/toolcall/")
    assert page.status_code == 200
    listed = page.content.decode()
    assert ">list_sessions<" in listed and ">no session<" in listed and ">lint<" in listed
    assert tenant_admin.get(f"/admin/sessions_app/toolcall/{call.pk}/change/").status_code == 200
    filtered = tenant_admin.get(f"/admin/sessions_app/toolcall/?tenant__id__exact={acme.tenant.pk}")
    assert {c.tool_name for c in filtered.context["cl"].result_list} == {"list_sessions", "lint"}


def test_a_tenant_admin_gives_and_takes_back_a_per_session_grant(acme, acme_work, tenant_admin):
    session = acme_work.session(person="admin")
    guest = Principal.for_person(acme.tenant, acme.guest)
    assert not guest.may("session:rename", session)
    url = f"/admin/sessions_app/session/{session.pk}/change/"
    response = tenant_admin.post(url, session_form(grant_person=acme.guest.pk, grant="session:write"))
    assert response.status_code == 302
    assert guest.may("session:rename", session)
    assert sorted(guest.object_grants(session)) == ["session:read", "session:write"]
    page = tenant_admin.get(url).content.decode()
    assert "acme-guest: session:read, session:write" in page
    response = tenant_admin.post(url, session_form(revoke=[f"{acme.guest.pk} session:read"]))
    assert response.status_code == 302
    assert not guest.may("session:rename", session) and guest.object_grants(session) == ()
    assert "none: only role grants apply" in tenant_admin.get(url).content.decode()


def test_a_grant_needs_a_person_of_the_tenant(acme, globex, acme_work, tenant_admin):
    session = acme_work.session()
    url = f"/admin/sessions_app/session/{session.pk}/change/"
    response = tenant_admin.post(url, session_form(grant_person=globex.member.pk, grant="session:read"))
    assert "grant_person" in response.context["adminform"].form.errors
    response = tenant_admin.post(url, session_form(grant="session:read"))
    assert response.context["adminform"].form.non_field_errors() == [
        "Choose both a person and a grant to give, or neither."]
    assert Session.objects.visible_to(Principal.for_person(globex.tenant, globex.member)).count() == 0


def test_the_session_page_reads_in_words_title_activity_chats_and_turns(acme, acme_work, tenant_admin):
    from sessions_app.actions import do_set_title
    from sessions_app.models import Turn

    session = acme_work.session()
    do_set_title(Principal.for_person(acme.tenant, acme.member), session, "Port the parser")
    turn = acme_work.turn(session)
    Turn.objects.filter(pk=turn.pk).update(text="Port parse.c to Rust")
    listing = tenant_admin.get("/admin/sessions_app/session/").content.decode()
    assert "Port the parser</a></th><td class=\"field-activity_words\">running</td>" in listing
    page = tenant_admin.get(f"/admin/sessions_app/session/{session.pk}/change/").content.decode()
    text = " ".join(page.split())
    assert '<div class="readonly">running</div>' in page and '<div class="readonly">Port the parser</div>' in page
    assert ">main</td><td>1</td>" in text and "Port parse.c to Rust</a></td><td>acme-member</td><td>active</td>" in text
    assert "Status:" not in text and "Server tools" not in text
