"""agentConnections in the admin as rows: one per provider, its endpoint fields side by side.
Each field is checked as agentConnections is at every door, so a bad value is refused on its own
field with the sentence REST gives. Credentials read `<set>` and, sent back so, keep their stored
values (do_change_host_config does that for every door)."""
from django import forms
from django.forms import formset_factory

from agents.harness import host_connection

from .agent_connections import FIELDS, OWN_KEY_NEEDED, borrows_host_key, field_problem
from .rows_field import UniqueRows

WIRE = "agentConnections"
EDITED = ("baseUrl", "apiKey", "model", "type", "wireApi", "githubToken", "permissions", "agent")
BLANK = ("", "---------")
COPILOT = FIELDS["github-copilot"]


def _choices(values):
    return [BLANK, *((value, value) for value in values)]


def acp_agent_choices():
    from agents.providers.acp import operator_agents

    return _choices(sorted(operator_agents()))


def _text(help_text, size=18):
    return forms.CharField(required=False, max_length=2000, help_text=help_text,
                           widget=forms.TextInput(attrs={"size": size}))


class ConnectionRow(forms.Form):
    provider = forms.ChoiceField(choices=_choices(FIELDS))
    baseUrl = _text("claude, github-copilot: the model endpoint, http(s)://…", 24)
    apiKey = _text('claude, github-copilot: reads "<set>" when stored; leave it so to keep it.', 12)
    model = _text("claude, github-copilot: the model's name.", 14)
    type = forms.ChoiceField(choices=_choices(COPILOT["type"]), required=False,
                             help_text="github-copilot: the endpoint's kind.")
    wireApi = forms.ChoiceField(choices=_choices(COPILOT["wireApi"]), required=False,
                                help_text="github-copilot: the endpoint's API.")
    githubToken = _text('github-copilot: reads "<set>" when stored; leave it so to keep it.', 12)
    permissions = forms.ChoiceField(choices=_choices(COPILOT["permissions"]), required=False,
                                    help_text="claude, github-copilot: approve-all runs its built-ins without asking.")
    agent = forms.ChoiceField(choices=acp_agent_choices, required=False,
                              help_text="acp: one of the operator's ACP agents (AHP_ACP_AGENTS).")
    other = forms.JSONField(required=False, widget=forms.HiddenInput)  # keys these rows do not edit, kept

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            field.label = name  # the wire's field names, as REST and the key's help text spell them
        # An agent the operator no longer defines stays listed (and is accepted sent back), so a
        # save keeps it.
        agent = self.data.get(self.add_prefix("agent")) if self.is_bound else self.initial.get("agent")
        field = self.fields["agent"]
        if agent and agent not in dict(field.choices):
            field.choices = [*field.choices, (agent, f"{agent} (not on this host)")]

    @property
    def check_url(self) -> str | None:
        provider = self.initial.get("provider")
        return f"check-model/{provider}/" if provider in ("claude", "github-copilot") else None

    def clean(self):
        data = super().clean()
        provider = data.get("provider")
        if not provider:
            return data
        entry = {field: data[field] for field in EDITED if data.get(field)}
        for field, text in entry.items():
            problem = field_problem(WIRE, provider, field, text)
            if problem:
                self.add_error(field, problem)
        if not self.errors and borrows_host_key(entry, host_connection(provider).get("baseUrl")):
            self.add_error("apiKey", OWN_KEY_NEEDED)  # the field to fill in
        return data


class ConnectionRows(UniqueRows):
    key_field = "provider"

    def duplicate(self, value):
        return f"Another row is already for {value}."


def to_rows(connections):
    return [{"provider": provider, **{field: entry.get(field, "") for field in EDITED},
             "other": {k: v for k, v in entry.items() if k not in EDITED} or None}
            for provider, entry in (connections or {}).items() if isinstance(entry, dict)]


def from_rows(rows):
    return {row["provider"]: {**(row.get("other") or {}), **{field: row[field] for field in EDITED if row[field]}}
            for row in rows} or None


ConnectionRowFormSet = formset_factory(ConnectionRow, formset=ConnectionRows, extra=1, can_delete=True)
