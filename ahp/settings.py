"""Settings for the AHP host.

With no environment set the host runs embedded: SQLite under var/, Channels' in-memory layer
and a Celery broker on the filesystem. Production sets DATABASE_URL and REDIS_URL.
"""
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AHP_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Every environment variable the host reads; docker-compose.yml is checked against this list.
ENVIRONMENT_KEYS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "AHP_VAR_DIR", "LOG_LEVEL", "AHP_HEARTBEAT_SECONDS")


def _env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or "embedded-only-not-for-production"
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [f"http://{h}" for h in ALLOWED_HOSTS if h != "*"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "guardian",
    "channels",
    "ahp",
    "grants",
    "sandbox",
    "sessions_app",
    "tools_app",
    "mcp_app",
    "workbench",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here, not a CDN
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "ahp.urls"
ASGI_APPLICATION = "ahp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'ahp.sqlite3'}"
# Connections are kept between requests and checked before reuse: reopening one per ORM hop of
# the socket layer costs more than the work itself, and a health check survives a database restart.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=600, conn_health_checks=True)}
# Test databases are named per process, so two test runs on one machine never share one.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so a worker or server process started by a test sees the same rows.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    # WAL with synchronous=NORMAL: readers never wait for the writer, commits skip an fsync each.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # no guardian anonymous user row: every caller is a named person or a root token

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "filesystem://"
    _queue = VAR_DIR / "celery" / "queue"
    _processed = VAR_DIR / "celery" / "processed"
    _queue.mkdir(parents=True, exist_ok=True)
    _processed.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue),
        "data_folder_out": str(_queue),
        "processed_folder": str(_processed),
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }

CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "ahp.tasks.record_worker_heartbeat", "schedule": 30.0},
    # Fires whatever scheduled work is due and was missed (downtime, a dead process).
    "sweep-due-work": {"task": "sessions_app.tasks.sweep_due_work", "schedule": 5.0},
    "sweep-wakeups": {"task": "workbench.tasks.sweep_wakeups", "schedule": 5.0},
    "sweep-deferred-reruns": {"task": "workbench.tasks.sweep_deferred_reruns", "schedule": 30.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["grants.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "UNAUTHENTICATED_USER": None,
    # The socket's frame rules for JSON bodies (no NaN, NUL, lone surrogates, deep nesting).
    "DEFAULT_PARSER_CLASSES": ["ahp.parsers.StrictJSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AHP host API",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# Where the host may reach and keep things for a tenant (docs/security.md): host-wide outbound
# allow-list, the workspace root tenants' folders live under, and the key tenant secrets are
# encrypted with (embedded: a key file under VAR_DIR, made on first use).
AHP_OUTBOUND_ALLOW = os.environ.get("AHP_OUTBOUND_ALLOW", "")
AHP_WORKSPACE_ROOT = os.environ.get("AHP_WORKSPACE_ROOT") or str(VAR_DIR / "workspaces")
AHP_SECRETS_KEY = os.environ.get("AHP_SECRETS_KEY", "")
ENVIRONMENT_KEYS += ("AHP_OUTBOUND_ALLOW", "AHP_WORKSPACE_ROOT", "AHP_SECRETS_KEY")
