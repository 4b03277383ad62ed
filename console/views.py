from django import forms
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from agents.registry import provider_choices
from grants.actions import PAGE_TOKEN_LIFETIME, do_mint_page_token
from grants.admin import administered_tenants
from grants.models import Membership
from sessions_app.models import Session
from tools_app.models import AgentDefinition, HostConfig

from .dashboard import dashboard
from .explainer import ORIGIN_KINDS, explain_chat, explain_preview
from .running import running_index


def administered_tenant(user, slug):
    # Another tenant answers like one that does not exist.
    tenant = administered_tenants(user).filter(slug=slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    return tenant


def page(request, title, **context):
    return {**admin.site.each_context(request), "title": title, **context}


@staff_member_required
def tenants(request):
    """The dashboards this operator may open: their administered tenants."""
    context = page(request, "Operators' dashboards", tenants=administered_tenants(request.user).order_by("slug"))
    return render(request, "console/tenants.html", context)


@staff_member_required
def tenant_dashboard(request, slug):
    tenant = administered_tenant(request.user, slug)
    context = page(request, f"Dashboard: {tenant.name}", **dashboard(tenant), config=HostConfig.for_tenant(tenant))
    return render(request, "console/dashboard.html", context)


@staff_member_required
def session_catalog(request, session_id):
    """Why each tool is (not) offered in one of the session's chats (its main chat by default)."""
    session = Session.objects.filter(id=session_id, tenant__in=administered_tenants(request.user)).first()
    if session is None:
        raise Http404("No such session.")
    chats = list(session.chats.order_by("created"))
    chat = next((c for c in chats if str(c.id) == request.GET.get("chat")), None) or next(
        c for c in chats if c.is_default)
    context = page(request, f"Catalog of {session}", session=session, tenant=session.tenant, chats=chats, chat=chat,
                   config=HostConfig.for_tenant(session.tenant), **explain_chat(chat))
    return render(request, "console/catalog.html", context)


class PreviewForm(forms.Form):
    provider = forms.ChoiceField(choices=())
    origin = forms.ChoiceField(choices=ORIGIN_KINDS, initial="user", label="in")
    agent = forms.ChoiceField(choices=(), required=False, label="agent definition")

    def __init__(self, tenant, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        self.fields["agent"].choices = [("", "none")] + [
            (name, name) for name in AgentDefinition.objects.for_tenant(tenant).order_by("name")
            .values_list("name", flat=True)]


@staff_member_required
def catalog_preview(request, slug):
    """The same answer for a session not yet created: a provider, a chat origin, an agent definition."""
    tenant = administered_tenant(request.user, slug)
    form = PreviewForm(tenant, request.GET or None)
    explained = {}
    if form.is_valid():
        data = form.cleaned_data
        explained = explain_preview(tenant, data["provider"], data["origin"], data["agent"])
    context = page(request, f"Preview the catalog: {tenant.name}", tenant=tenant, form=form,
                   config=HostConfig.for_tenant(tenant), **explained)
    return render(request, "console/catalog.html", context)


@never_cache  # the page carries a token
@staff_member_required
def live_sessions(request, slug):
    """The tenant's sessions, a session's chats and turns as they happen, over the same /ahp socket
    every client uses; the page's token acts as the signed-in operator and ends by itself."""
    tenant = administered_tenant(request.user, slug)
    member = Membership.objects.filter(tenant=tenant, person=request.user).exists()
    # A superuser outside the tenant administers it as its root, as everywhere in the admin.
    token = do_mint_page_token(tenant, request.user if member else None)
    sockets = "wss" if request.is_secure() else "ws"
    context = page(request, f"Live sessions: {tenant.name}", tenant=tenant, token=token,
                   websocket_url=f"{sockets}://{request.get_host()}/ahp", providers=provider_choices(),
                   token_minutes=int(PAGE_TOKEN_LIFETIME.total_seconds() // 60), session_id=request.GET.get("session", ""))
    return render(request, "console/live.html", context)


@never_cache
@staff_member_required
def live_index(request, slug):
    """The live page's index of the tenant's sessions, as JSON: what runs now and who waits."""
    try:
        tenant = administered_tenant(request.user, slug)
    except Http404 as missing:
        return JsonResponse({"error": str(missing)}, status=404)
    page_number = request.GET.get("page", "1")
    return JsonResponse(running_index(tenant, request.GET.get("q", ""), int(page_number) if page_number.isdigit() else 1))
