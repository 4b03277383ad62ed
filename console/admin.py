"""Admin pages the console adds: the audit (filterable, exported as CSV), per-session grants
and the catalog explainer on the session page, and the console's own pages listed in its
section of the admin index."""
from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils import formats
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from grants.admin import TenantScopedAdmin, admin_principal, administered_tenants
from kernel.refusals import Refused
from sessions_app.admin import SessionAdmin
from sessions_app.models import Session, Turn

from . import budget
from .actions import SESSION_GRANTS, do_grant_on_session, do_revoke_on_session, session_grants
from .audit import OUTCOMES, REFUSAL_REASONS, arguments_text, duration_ms, refusal_sentence, who, write_csv
from .models import AuditEntry
from .running import activity, with_activity

SENTENCE_SHOWN = 70  # characters; the whole sentence is the cell's tooltip and in the CSV


class OutcomeFilter(admin.SimpleListFilter):
    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request, model_admin):
        return OUTCOMES

    def queryset(self, request, queryset):
        return queryset.filter(outcome=self.value()) if self.value() else queryset


class RefusalReasonFilter(admin.SimpleListFilter):
    title = "refusal reason"
    parameter_name = "reason"

    def lookups(self, request, model_admin):
        return [(key, label) for key, label, _ in REFUSAL_REASONS]

    def queryset(self, request, queryset):
        return queryset.filter(refusal_reason=self.value()) if self.value() else queryset


@admin.register(AuditEntry)
class AuditAdmin(TenantScopedAdmin):
    list_display = ("created", "person", "session_link", "tool_name", "arguments", "outcome_label", "sentence",
                    "duration")
    list_filter = ("tenant", OutcomeFilter, RefusalReasonFilter, "source",
                   ("tool_name", admin.AllValuesFieldListFilter),
                   ("turn__sender", admin.RelatedOnlyFieldListFilter), "created")
    search_fields = ("tool_name", "turn__sender__username", "caller__username")
    date_hierarchy = "created"
    change_list_template = "admin/console/auditentry/change_list.html"
    list_per_page = 50
    ordering = ("-created", "-id")

    def get_queryset(self, request):
        return (super().get_queryset(request).with_outcome()
                .select_related("tenant", "caller", "turn__sender", "turn__chat__session"))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="who", ordering="turn__sender__username")
    def person(self, call):
        return who(call)

    @admin.display(description="session")
    def session_link(self, call):
        if not call.turn_id:
            return "none (sessionless)"
        session = call.turn.chat.session
        return format_html('<a href="{}" title="{}">{}</a>', reverse("admin:sessions_app_session_change", args=[session.pk]),
                           session.pk, session.title or str(session.pk)[:8])

    @admin.display(description="arguments")
    def arguments(self, call):
        return format_html("<code>{}</code>", arguments_text(call))

    @admin.display(description="outcome", ordering="outcome")
    def outcome_label(self, call):
        reason = {key: label for key, label, _ in REFUSAL_REASONS}.get(call.refusal_reason)
        return f"{dict(OUTCOMES)[call.outcome]} ({reason})" if reason else dict(OUTCOMES)[call.outcome]

    @admin.display(description="sentence")
    def sentence(self, call):
        sentence = refusal_sentence(call)
        return format_html('<span title="{}">{}</span>', sentence, Truncator(sentence).chars(SENTENCE_SHOWN))

    @admin.display(description="duration")
    def duration(self, call):
        ms = duration_ms(call)
        return "—" if ms is None else f"{ms} ms"

    def get_urls(self):
        export = path("export.csv", self.admin_site.admin_view(self.export_csv), name="console_auditentry_export")
        return [export, *super().get_urls()]

    def export_csv(self, request):
        """The audit as the change list shows it now (same filters and search), as CSV."""
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        calls = self.get_changelist_instance(request).get_queryset(request)
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="audit.csv"'
        write_csv(calls, response)
        return response


class SessionGrantsForm(forms.ModelForm):
    """Per-session grants (django-guardian object permissions): give one, take any back."""

    grant_person = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(), required=False, label="give to",
        help_text="A person of this session's tenant.")
    grant = forms.ChoiceField(choices=[("", "---------")] + [(g, g) for g in SESSION_GRANTS], required=False,
                              help_text="Write grants also give reading the session.")
    revoke = forms.MultipleChoiceField(choices=(), required=False, widget=forms.CheckboxSelectMultiple,
                                       label="take back", help_text="Taking back a read also takes back the writes.")

    class Meta:
        model = Session
        fields = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        session = self.instance
        self.fields["grant_person"].queryset = get_user_model().objects.filter(
            memberships__tenant_id=session.tenant_id).order_by("username")
        self.fields["revoke"].choices = [
            (f"{person.pk} {grant}", f"{person.username}: {grant}")
            for person, held in session_grants(session).items() for grant in held]

    def clean(self):
        data = super().clean()
        if bool(data.get("grant_person")) != bool(data.get("grant")):
            raise forms.ValidationError("Choose both a person and a grant to give, or neither.")
        return data


def short_name(session: Session) -> str:
    return session.title or f"untitled {str(session.pk)[:8]}"


def _session_link(session: Session | None, url: str) -> str:
    return format_html('<a href="{}">{}</a>', url, short_name(session)) if session and url else "—"


admin.site.unregister(Session)


@admin.register(Session)
class ConsoleSessionAdmin(SessionAdmin):
    form = SessionGrantsForm
    # Depth has its filter and the session's page: the list fits 1400 px with the sidebar open.
    list_display = ("short_name", "activity_words", "provider", "owner", "tenant", "parent_link", "tree_link",
                    "modified", "budget_used")
    fieldsets = (
        (None, {"fields": ("title", "activity_words", "provider", "owner", "tenant", "parent_link", "tree_link",
                           "depth", "created", "modified", "archived", "working_directory_list")}),
        ("Chats", {"fields": ("chat_table",)}),
        ("Turns", {"fields": ("turn_table",)}),
        ("Tools", {"fields": ("catalog",)}),
        ("Per-session grants", {"fields": ("per_session_grants", "grant_person", "grant", "revoke")}),
        ("As stored", {"classes": ("collapse",), "fields": ("id", "config", "meta")}),
    )
    TURNS_SHOWN = 20

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return with_activity(super().get_queryset(request))

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        """The tenant column only for an operator of more than one tenant: for the others it says nothing."""
        if administered_tenants(request.user).count() > 1:
            return self.list_display
        return tuple(column for column in self.list_display if column != "tenant")

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "per_session_grants", "catalog", "activity_words",
                "parent_link", "tree_link", "working_directory_list", "chat_table", "turn_table"]

    @admin.display(description="session", ordering="title")
    def short_name(self, session: Session) -> str:
        """Its title, or as the live index names an untitled one: a whole id would widen three columns."""
        return short_name(session)

    @admin.display(description="parent")
    def parent_link(self, session: Session) -> str:
        return _session_link(session.parent, reverse("admin:sessions_app_session_change", args=[session.parent_id])
                             if session.parent_id else "")

    @admin.display(description="tree")
    def tree_link(self, session: Session) -> str:
        return _session_link(session.root, reverse("admin:sessions_app_session_changelist") + f"?tree={session.root_id}"
                             if session.root_id else "")

    @admin.display(description="now")
    def activity_words(self, session):
        return activity(session)

    @admin.display(description="working directories")
    def working_directory_list(self, session):
        return format_html_join("", "<div><code>{}</code></div>", ((d,) for d in session.working_directories)) or "none"

    @admin.display(description="chats")
    def chat_table(self, session):
        chats = session.chats.annotate(turn_count=Count("turns")).order_by("-created")
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (format_html('<a href="{}">{}</a>', reverse("admin:sessions_app_chat_change", args=[c.pk]),
                         c.title or str(c.pk)[:8]), "main" if c.is_default else c.get_origin_kind_display(),
             c.turn_count, formats.localize(c.created)) for c in chats))
        return format_html("<table><thead><tr><th>chat</th><th>origin</th><th>turns</th><th>created</th></tr></thead>"
                           "<tbody>{}</tbody></table>", rows)

    @admin.display(description="latest turns")
    def turn_table(self, session):
        turns = (Turn.objects.filter(chat__session=session).select_related("sender").defer("response_parts")
                 .order_by("-started")[:self.TURNS_SHOWN])
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (formats.localize(t.started), format_html('<a href="{}">{}</a>', reverse(
                "admin:sessions_app_turn_change", args=[t.pk]), Truncator(t.text).chars(80) or "(empty)"),
             t.sender.username if t.sender else "the tenant's root token", t.state,
             (t.error or {}).get("message", "")) for t in turns))
        if not rows:
            return "none yet"
        return format_html("<table><thead><tr><th>started</th><th>message</th><th>sent by</th><th>state</th>"
                           "<th>error</th></tr></thead><tbody>{}</tbody></table>", rows)

    @admin.display(description="catalog")
    def catalog(self, session):
        return format_html('<a href="{}">Why each tool is (not) offered, per chat</a> · <a href="{}">Watch it live</a>',
                           reverse("console:session-catalog", args=[session.pk]),
                           reverse("console:live", args=[session.tenant.slug]) + f"?session={session.pk}")

    def has_change_permission(self, request, obj=None):
        # The page changes the session's grants (through do_*), never the session's own fields.
        return self._may(request, obj)

    def changelist_view(self, request, extra_context=None):
        self._budget_cache = {}
        return super().changelist_view(request, extra_context)

    @admin.display(description="budget, 1 h")
    def budget_used(self, session: Session) -> str:
        # One query per tenant on the page, not per row.
        cache = getattr(self, "_budget_cache", {})
        if session.tenant_id not in cache:
            cache[session.tenant_id] = budget.used_by_tree(session.tenant)
        used = cache[session.tenant_id]
        if used is None:
            return "not recorded"
        return budget.describe(used.get(session.root_id or session.pk))

    @admin.display(description="held now")
    def per_session_grants(self, session):
        held = session_grants(session)
        if not held:
            return "none: only role grants apply"
        return format_html_join("", "<div>{}: {}</div>", ((p.username, ", ".join(g)) for p, g in held.items()))

    def save_model(self, request, session, form, change):
        # The session's own fields are read-only here; only its grants change.
        acting = admin_principal(request.user, session.tenant)
        data = form.cleaned_data
        try:
            for choice in data.get("revoke") or ():
                person_id, grant = choice.split(" ", 1)
                do_revoke_on_session(acting, session, get_user_model().objects.get(pk=person_id), grant)
            if data.get("grant_person"):
                do_grant_on_session(acting, session, data["grant_person"], data["grant"])
        except Refused as refusal:
            messages.error(request, refusal.sentence)

    def save_related(self, request, form, formsets, change):
        pass


# The console's pages that are not a model's, as rows of its own section of the admin index.
CONSOLE_PAGES = (("Dashboards, live sessions and catalog previews", "console:tenants"), ("REST API docs", "api-docs"))
_models_app_list = admin.site.get_app_list


def app_list_with_console_pages(request, app_label=None):
    apps = _models_app_list(request, app_label)
    for app in apps:
        if app["app_label"] == "console":
            app["models"].extend({"name": name, "object_name": url_name.replace(":", "_"), "admin_url": reverse(url_name),
                                  "view_only": True, "perms": {"view": True}} for name, url_name in CONSOLE_PAGES)
    return apps


admin.site.get_app_list = app_list_with_console_pages  # type: ignore[method-assign]  # the default site, shared by every app's admin, gains the console's rows
