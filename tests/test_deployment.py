"""docker-compose.yml cannot run here (no Docker engine), so its wiring is checked against the
settings module that will read it."""
import json
import os
import subprocess
import sys

import dj_database_url
import yaml

from ahp import settings as host_settings

from .conftest import ROOT


def compose():
    with open(ROOT / "docker-compose.yml") as f:
        return yaml.safe_load(f)


def test_compose_runs_the_five_services():
    assert set(compose()["services"]) == {"postgres", "redis", "web", "worker", "beat"}


def test_compose_commands_start_the_server_the_worker_and_beat():
    services = compose()["services"]
    assert "ahp.serve" in services["web"]["command"] and "ahp.asgi:application" in services["web"]["command"]
    assert "migrate" in services["web"]["command"]
    assert services["worker"]["command"].startswith("celery -A ahp worker")
    assert services["beat"]["command"].startswith("celery -A ahp beat")


def test_compose_wires_every_host_service_to_postgres_and_redis_by_keys_the_settings_read():
    services = compose()["services"]
    postgres_env = services["postgres"]["environment"]
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert set(env) <= set(host_settings.ENVIRONMENT_KEYS), f"{name} sets a key the host never reads"
        database = dj_database_url.parse(env["DATABASE_URL"])
        assert database["ENGINE"] == "django.db.backends.postgresql"
        assert database["HOST"] == "postgres" and database["NAME"] == postgres_env["POSTGRES_DB"]
        assert database["USER"] == postgres_env["POSTGRES_USER"]
        assert database["PASSWORD"] == postgres_env["POSTGRES_PASSWORD"]
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert "SECRET_KEY" in env


def settings_under(env):
    code = (
        "import json; from django.conf import settings as s; import django; django.setup();"
        "print(json.dumps([s.DATABASES['default']['ENGINE'], s.DATABASES['default']['NAME'],"
        " s.CHANNEL_LAYERS['default']['BACKEND'], s.CELERY_BROKER_URL, s.DEBUG, s.ALLOWED_HOSTS]))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in host_settings.ENVIRONMENT_KEYS}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, "DJANGO_SETTINGS_MODULE": "ahp.settings", **env},
        cwd=ROOT, capture_output=True, text=True, check=True,
    )

    return json.loads(out.stdout)


def test_with_no_environment_the_host_runs_embedded(tmp_path):
    engine, name, layer, broker, debug, _ = settings_under({"AHP_VAR_DIR": str(tmp_path)})
    assert engine == "django.db.backends.sqlite3" and name == str(tmp_path / "ahp.sqlite3")
    assert layer == "channels.layers.InMemoryChannelLayer"
    assert broker == "filesystem://" and debug is False


def test_production_environment_selects_postgres_and_redis(tmp_path):
    engine, name, layer, broker, debug, hosts = settings_under({
        "AHP_VAR_DIR": str(tmp_path), "DATABASE_URL": "postgres://u:p@db:5432/ahp",
        "REDIS_URL": "redis://cache:6379/1", "DEBUG": "true", "ALLOWED_HOSTS": "ahp.example,other",
    })
    assert (engine, name) == ("django.db.backends.postgresql", "ahp")
    assert layer == "channels_redis.core.RedisChannelLayer" and broker == "redis://cache:6379/1"
    assert debug is True and hosts == ["ahp.example", "other"]


def test_a_sqlite_database_url_with_an_absolute_path_works(tmp_path):
    engine, name, *_ = settings_under({"AHP_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3"})
    assert engine == "django.db.backends.sqlite3" and name == f"{tmp_path}/x.sqlite3"
