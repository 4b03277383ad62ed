"""mcpServers in the admin as rows: name, type, the operator's stdio server or the url, headers
and env. Each row is checked as mcpServers is at every door, so a bad value is refused on its own
field with the sentence REST gives. Credentials read `<set>` and, sent back so, keep their stored
values (do_change_host_config does that for every door). `check` lists a saved server's tools the
way a session would."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

from django import forms
from django.core.exceptions import ValidationError
from django.db import connections
from django.forms import formset_factory

from ...mcp_server_entries import server_problem
from ...rows_field import UniqueRows
from . import client
from .servers import entry_problem, operator_stdio_servers

EDITED = ("type", "server", "url", "headers", "env")


def _lines(separator, example):
    """A field of `name<separator>value` lines, cleaned to a dict."""

    def parse(text):
        pairs = {}
        for line in filter(None, (line.strip() for line in (text or "").splitlines())):
            name, sep, value = line.partition(separator)
            if not sep or not name.strip():
                raise ValidationError(f"Write one {example} a line; {line!r} is not.")
            pairs[name.strip()] = value.strip()
        return pairs

    return parse


parse_headers, parse_env = _lines(":", '"Name: value"'), _lines("=", '"NAME=value"')


def stdio_choices():
    return [("", "---------"), *((name, name) for name in sorted(operator_stdio_servers()))]


class CheckedChoice(forms.ChoiceField):
    """A choice whose value the row's one check judges, so a value not offered is refused with
    the sentence every door gives (not the form's own)."""

    def valid_value(self, value):
        return True


class ServerRow(forms.Form):
    name = forms.CharField(widget=forms.TextInput(attrs={"size": 10}))
    type = CheckedChoice(choices=(("stdio", "stdio"), ("http", "http")), initial="stdio")
    server = CheckedChoice(choices=stdio_choices, required=False, label="stdio server",
                           help_text="One of the operator's stdio servers (Stdio servers).")
    url = forms.CharField(required=False, max_length=2000, label="url", help_text="For http: http(s)://…",
                          widget=forms.TextInput(attrs={"size": 24}))
    headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 20}),
                              help_text='For http: "Name: value", one a line.')
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 16}),
                          help_text='For stdio: "NAME=value", one a line, over the server\'s own.')
    other = forms.JSONField(required=False, widget=forms.HiddenInput)  # keys these rows do not edit, kept

    @property
    def check_url(self):
        return f"check-mcp/{self.initial['name']}/" if self.initial.get("name") else None

    def clean_headers(self):
        return parse_headers(self.cleaned_data["headers"])

    def clean_env(self):
        return parse_env(self.cleaned_data["env"])

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        [(name, entry)] = from_rows([data]).items()
        problem = server_problem(name, entry)
        if problem:
            self.add_error(*problem)
        return data


def to_rows(servers):
    rows = []
    for name, entry in (servers or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        rows.append({"name": name, "type": entry.get("type", "stdio"), "server": entry.get("server", ""),
                     "url": entry.get("url", ""),
                     "headers": "\n".join(f"{k}: {v}" for k, v in (entry.get("headers") or {}).items()),
                     "env": "\n".join(f"{k}={v}" for k, v in (entry.get("env") or {}).items()),
                     "other": {k: v for k, v in entry.items() if k not in EDITED} or None})
    return rows


def from_rows(rows):
    """The wire value of the rows: each row's fields that are filled in, over the keys they do not edit."""
    servers = {}
    for row in rows:
        entry = {**(row.get("other") or {}), "type": row["type"]}
        entry.update({field: row[field] for field in EDITED[1:] if row.get(field)})
        servers[row["name"]] = entry
    return servers or None


ServerRowFormSet = formset_factory(ServerRow, formset=UniqueRows, extra=1, can_delete=True)


def check_server(entry, tenant):
    """(tools, None) or (None, why): the saved `entry` listed as a new session of `tenant` would
    list it, in that session's sandbox and through the host's outbound rules."""
    from sessions_app.models import Session

    problem = entry_problem(entry)
    if problem:
        return None, f"This entry is not usable: {problem}."
    # As a session's listing does: on a thread of its own with its own loop and database
    # connection, never on the request's.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-check") as executor:
        return executor.submit(_listed, entry, Session(tenant=tenant)).result()


async def _list_once(entry, session):
    """A connection of its own, closed after the listing: a check keeps no server running."""
    async with client.connected(entry, session) as mcp:
        return await client.list_tools(mcp)


def _listed(entry, session):
    try:
        return asyncio.run(asyncio.wait_for(_list_once(entry, session), client.LIST_TIMEOUT_SECONDS)), None
    except Exception as exc:  # the answer itself is the report (the client scrubbed its credentials)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # the client's task groups wrap the cause
        return None, f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
    finally:
        connections.close_all()  # this thread ends here; its connections with it
