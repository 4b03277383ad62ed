"""docker-compose.yml cannot run here (no Docker engine), so its wiring is checked against the
settings module that will read it."""
import json
import os
import subprocess
import sys

import dj_database_url
import pytest
import yaml

from ahp import settings as host_settings
from ahp.deployment import NO_SECRET_KEY

from .conftest import ROOT, free_port, stop, wait_for_port


def compose():
    with open(ROOT / "docker-compose.yml") as f:
        return yaml.safe_load(f)


def test_compose_runs_the_five_services():
    assert set(compose()["services"]) == {"postgres", "redis", "web", "worker", "beat"}


def test_compose_commands_start_the_server_the_worker_and_beat():
    services = compose()["services"]
    assert "python -m ahp.front -b 0.0.0.0 -p 8000" in services["web"]["command"]  # the serving processes behind it
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


@pytest.mark.e2e
def test_with_no_environment_the_host_runs_embedded(tmp_path):
    engine, name, layer, broker, debug, _ = settings_under({"AHP_VAR_DIR": str(tmp_path)})
    assert engine == "django.db.backends.sqlite3" and name == str(tmp_path / "ahp.sqlite3")
    assert layer == "kernel.memory_layer.MemoryChannelLayer"
    assert broker == "filesystem://localhost/" and debug is False


@pytest.mark.e2e
def test_production_environment_selects_postgres_and_redis(tmp_path):
    engine, name, layer, broker, debug, hosts = settings_under({
        "AHP_VAR_DIR": str(tmp_path), "DATABASE_URL": "postgres://u:p@db:5432/ahp",
        "REDIS_URL": "redis://cache:6379/1", "DEBUG": "true", "ALLOWED_HOSTS": "ahp.example,other",
    })
    assert (engine, name) == ("django.db.backends.postgresql", "ahp")
    assert layer == "kernel.channel_layer.PubSubChannelLayer" and broker == "redis://cache:6379/1"
    assert debug is True and hosts == ["ahp.example", "other"]


@pytest.mark.e2e
def test_a_sqlite_database_url_with_an_absolute_path_works(tmp_path):
    engine, name, *_ = settings_under({"AHP_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3"})
    assert engine == "django.db.backends.sqlite3" and name == f"{tmp_path}/x.sqlite3"


def host_env(tmp_path, **env):
    clean = {k: v for k, v in os.environ.items() if k not in host_settings.ENVIRONMENT_KEYS}
    return {**clean, "AHP_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), **env}


STRONG_KEY = "k" * 10 + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
PRODUCTION = {"DATABASE_URL": "postgres://ahp:ahp@127.0.0.1:9/ahp", "REDIS_URL": "redis://127.0.0.1:9/0",
              "SECRET_KEY": STRONG_KEY, "DEBUG": "false", "ALLOWED_HOSTS": "ahp.example",
              "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}


def serve(tmp_path, bind, **env):
    """Run `python -m ahp.serve` until it exits or listens: (exit code or None when it listens, stderr).
    A deadline, not a fixed wait: starting takes seconds on a loaded machine."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ahp.serve", "-b", bind, "-p", str(port), "ahp.asgi:application"],
        env=host_env(tmp_path, **env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, process)
        return None, ""
    except RuntimeError:  # it exited
        return process.returncode, process.stderr.read()
    finally:
        stop(process)


@pytest.mark.e2e
def test_without_a_secret_key_the_server_refuses_to_start_unless_embedded_on_loopback(tmp_path):
    code, said = serve(tmp_path, "127.0.0.1", DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")
    assert code == 1 and said.strip() == NO_SECRET_KEY
    code, said = serve(tmp_path, "0.0.0.0")
    assert code == 1 and said.strip() == NO_SECRET_KEY
    assert serve(tmp_path, "127.0.0.1")[0] is None  # embedded on loopback: `make run`
    assert serve(tmp_path, "0.0.0.0", SECRET_KEY=STRONG_KEY)[0] is None


@pytest.mark.e2e
def test_without_a_secret_key_runhost_refuses_to_listen_beyond_loopback(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "runhost", "--host", "0.0.0.0", "--port", str(free_port())],
                          env=host_env(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.strip().endswith(f"CommandError: {NO_SECRET_KEY}")


@pytest.mark.e2e
def test_an_embedded_host_signs_with_a_key_of_its_own_never_a_constant(tmp_path):
    code = "from django.conf import settings; print(settings.SECRET_KEY)"

    def key(var_dir):
        return subprocess.run([sys.executable, "-c", code], env={**host_env(var_dir), "DJANGO_SETTINGS_MODULE":
                              "ahp.settings"}, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    first, again, other = key(tmp_path / "a"), key(tmp_path / "a"), key(tmp_path / "b")
    assert first == again and first != other and len(first) >= 50
    assert (tmp_path / "a" / "secret_key").stat().st_mode & 0o077 == 0


@pytest.mark.e2e
def test_check_deploy_is_clean_in_the_production_settings(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          env=host_env(tmp_path, **PRODUCTION), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced)."


@pytest.mark.e2e
def test_behind_tls_cookies_are_secure_and_http_only_and_hsts_is_sent(tmp_path):
    code = (
        "import django, json; django.setup(); from django.test import Client; c = Client(HTTP_HOST='ahp.example');"
        "plain = c.get('/admin/login/');"
        "tls = c.get('/admin/login/', headers={'X-Forwarded-Proto': 'https'});"
        "cookie = tls.cookies['csrftoken'];"
        "print(json.dumps([plain.status_code, plain['Location'], tls.status_code,"
        " tls['Strict-Transport-Security'], cookie['secure'], cookie['httponly']]))"
    )
    env = host_env(tmp_path, **{**PRODUCTION, "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3"},
                   DJANGO_SETTINGS_MODULE="ahp.settings")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        301, "https://ahp.example/admin/login/", 200, "max-age=31536000; includeSubDomains; preload", True, True]
