"""Start the whole host: the ASGI server (HTTP, admin, REST, WebSocket; several serving
processes, one per core, behind ahp/front.py), a Celery worker and
Celery beat, as child processes it supervises: a child that dies is started again (after a
pause that grows while it keeps dying) and the event logged. Beat is a child of its own, never
embedded in the worker, so a dead worker leaves no beat behind and there is never a second one.
Ctrl-C (or SIGTERM) stops them all."""
import argparse
import json
import os
import secrets
import signal
import socket
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from ahp.deployment import refusal_to_start, secrets_key_refusal
from ahp.internals import refuse_to_start_if_moved
from ahp.models import WorkerHeartbeat
from ahp.supervision import Child, stop_children, supervise_once
from grants.actions import do_add_member, do_create_tenant, do_mint_token, do_save_person
from grants.models import Principal, Tenant
from tools_app.config import KEYS

DEMO_TENANT = "demo"


@transaction.atomic
def create_demo_tenant():
    """On first start: tenant `demo`, its admin person, and a token for that person."""
    tenant = do_create_tenant(DEMO_TENANT, "Demo")
    do_add_member(tenant, "admin", "admin")
    password = secrets.token_urlsafe(12)
    person = get_user_model().objects.get(username="admin")
    person.is_staff = person.is_superuser = True
    person.set_password(password)
    do_save_person(person)
    _, token = do_mint_token(tenant, person=person, name="demo-admin")
    return password, token


def flag_of(key):
    """sessionToolsProviders -> --session-tools-providers; the option's dest is the key's field."""
    return "--" + "".join(f"-{c.lower()}" if c.isupper() else c for c in key.wire)


def config_flags(options):
    """The HostConfig wire keys the command line set; a flag not given leaves its key alone."""
    return {key.wire: options[key.field] for key in KEYS if key.runhost_flag and options.get(key.field) is not None}


def apply_config_flags(options):
    """Set the default tenant's HostConfig from the flags, as its root would over the socket."""
    from tools_app.actions import do_change_host_config

    changes = config_flags(options)
    if changes:
        do_change_host_config(Principal.root(Tenant.objects.get(slug=DEMO_TENANT)), changes)
    return changes


# How the command line sets each kind of value, for the keys marked runhost_flag.
FLAG_KINDS = {
    "boolean": lambda key: {"action": argparse.BooleanOptionalAction,
                            "help": f"{key.help} For tenant '{DEMO_TENANT}'; --no-{flag_of(key)[2:]}: do not."},
    "providers": lambda key: {"action": "append", "metavar": "PROVIDER",
                              "help": f"{key.help} For tenant '{DEMO_TENANT}'; repeat for more."},
}


def listening(host, port):
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_until_started(host, port, children, since, timeout=90):
    """Until the server answers on `host:port` and a worker has beaten since `since`; or a child
    exits, or `timeout` runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and all(child.poll() is None for child in children):
        if listening(host, port) and WorkerHeartbeat.objects.filter(seen__gte=since).exists():
            return
        time.sleep(0.3)


def host_children(host, port):
    python = sys.executable
    serving = settings.SERVING_PROCESSES
    # With several serving processes, the front hands each tenant's connections to one of them.
    server = ([python, "-m", "ahp.front", "-b", host, "-p", str(port), "--processes", str(serving)] if serving > 1
              else [python, "-m", "ahp.serve", "-b", host, "-p", str(port), "ahp.asgi:application"])
    # --quiet and WARNING: Celery's banners and a line per task would bury the host's own.
    return [
        Child("ASGI server", server),
        Child("Celery worker", [python, "-m", "celery", "-A", "ahp", "--quiet", "worker", "--pool", "solo",
                                "--loglevel", "WARNING"]),
        Child("Celery beat", [python, "-m", "celery", "-A", "ahp", "--quiet", "beat", "--loglevel", "WARNING"]),
    ]


def banner(host, port, first_start):
    base = f"http://{host}:{port}"
    lines = ["", f"AHP host on {base}/ (WebSocket ws://{host}:{port}/ahp)"]
    if first_start:
        password, token = first_start
        lines += [f"First start: tenant '{DEMO_TENANT}' created.",
                  f"  admin login:       {base}/admin/  user admin  password {password}",
                  f"  connection token:  {token}",
                  f"  connect a client:  ws://{host}:{port}/ahp?tkn={token}"]
    else:
        lines.append(f"  admin:             {base}/admin/  (the demo login was printed on the first start)")
    return "\n".join(lines) + "\n"


class Command(BaseCommand):
    help = "Run the AHP host: ASGI server, Celery worker and Celery beat, each started again if it dies."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        for key in KEYS:
            if key.runhost_flag:
                parser.add_argument(flag_of(key), dest=key.field, default=None, **FLAG_KINDS[key.kind](key))

    def handle(self, host, port, **options):
        refuse_to_start_if_moved()
        refusal = refusal_to_start([host]) or secrets_key_refusal()
        if refusal:
            raise CommandError(refusal)
        first_start = None
        if not Tenant.objects.filter(slug=DEMO_TENANT).exists():
            first_start = create_demo_tenant()
        for key, value in apply_config_flags(options).items():
            self.stdout.write(f"{DEMO_TENANT}: {key} = {json.dumps(value)}")
        # Ctrl-C stops the host even when whatever started it ignores SIGINT (a script's background
        # job does, and a test runner may): the children then start with the default action too.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        started = timezone.now()
        # Its children (the Celery worker too) learn the port the host serves on: no tenant's
        # connection may reach it (sandbox.outbound), and it is where their agents find the host.
        os.environ["PORT"] = str(port)
        children = host_children(host, port)
        for child in children:
            child.start()

        stopped_by = [signal.SIGINT]

        def stop(*_):
            stopped_by[0] = signal.SIGTERM  # after a hang-up too: Celery's worker takes SIGHUP as "restart"
            raise KeyboardInterrupt

        def log(line):
            self.stderr.write(line)
            self.stderr.flush()

        # The children are in process groups of their own: a terminal that closes hangs up only
        # this process, which stops them as on SIGTERM.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        try:
            # The banner comes last, once the server answers and the worker runs, so the login and token are easy to
            # find (printed even if it never answers: the first start's password is shown only here).
            wait_until_started(host, port, [c.process for c in children], started)
            self.stdout.write(banner(host, port, first_start))
            self.stdout.flush()
            while True:
                supervise_once(children, log)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            # A second Ctrl-C, or a SIGTERM (an impatient operator, a service manager), must not cut
            # the children's stop short: the worker and beat would be left running, orphaned.
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            stop_children([c.process for c in children if c.running()], stopped_by[0])
