"""Where a load run runs: a fresh PostgreSQL database, a Redis db of its own (both emptied after),
the environment they are named in, and tenants seeded with a token each (bench.load, soak, noisy
and scale run on them)."""
import contextlib
import json
import os
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

from .servers import ROOT

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"
REDIS_CLAIM_KEY = "ahp-bench-load-claim"


@contextlib.contextmanager
def fresh_database(server_url):
    """A new, empty PostgreSQL database on `server_url`'s server; dropped afterwards."""
    import psycopg

    parts = urlsplit(server_url)
    if not parts.scheme.startswith("postgres"):
        raise SystemExit(f"bench.load needs PostgreSQL; DATABASE_URL is {parts.scheme}")
    name = f"ahp_load_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def own_redis_db(url):
    """The Redis db `url` names, which must be empty (a run never shares one, nor empties one
    another run is using), claimed with a key; emptied afterwards."""
    import redis

    client = redis.Redis.from_url(url)
    if client.dbsize() != 0 or not client.set(REDIS_CLAIM_KEY, os.getpid(), nx=True):
        client.close()
        raise SystemExit(f"bench.load runs on an empty Redis db of its own; {url} holds keys "
                         "(name another db number in REDIS_URL)")
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


@contextlib.contextmanager
def environment(**values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def seed_tenants(count):
    """In a child process on the install: tenants load-1..count-1, a member and a token each."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from grants.actions import do_add_member, do_create_tenant, do_mint_token

    tokens = []
    for i in range(1, count):
        tenant = do_create_tenant(f"load-{i}")
        do_add_member(tenant, f"loader-{i}", "member")
        tokens.append(do_mint_token(tenant, get_user_model().objects.get(username=f"loader-{i}"), "load")[1])
    print(json.dumps(tokens))


def more_tokens(env, tenants):
    out = subprocess.run([sys.executable, "-c", f"from bench.stores import seed_tenants; seed_tenants({tenants})"],
                         env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])
