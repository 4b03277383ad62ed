"""Settings for the AHP host.

With no environment set the host runs embedded: SQLite under var/, Channels' in-memory layer
and a Celery broker on the filesystem. Production sets DATABASE_URL and REDIS_URL.
"""
import ipaddress
import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AHP_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Every environment variable the host reads; docker-compose.yml is checked against this list.
ENVIRONMENT_KEYS: tuple[str, ...] = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "AHP_VAR_DIR", "LOG_LEVEL",
                    "AHP_HEARTBEAT_SECONDS", "AHP_TRUSTED_PROXIES", "AHP_REQUEST_DEADLINE_SECONDS",
                    "AHP_MAX_SESSIONS_PER_PERSON", "AHP_MAX_CHATS_PER_PERSON", "AHP_MAX_CREATIONS_PER_MINUTE",
                    "AHP_MAX_CONNECTIONS_PER_PERSON", "SECURE_PROXY_SSL_HEADER",
                    "AHP_SANDBOX_IDS", "AHP_SANDBOX_ID_FOLDER", "AHP_SANDBOX_CPU_SECONDS", "AHP_SANDBOX_MEMORY_MB",
                    "AHP_SANDBOX_SESSION_MEMORY_MB", "AHP_SANDBOX_PROCESSES", "AHP_MAX_TERMINALS_PER_SESSION",
                    "AHP_SANDBOX_FILE_MB", "AHP_HARNESS_IDLE_SECONDS", "AHP_HARNESS_WARM_MAX",
                    "AHP_HARNESS_WARM_MEMORY_MB", "AHP_STDIO_MCP_SERVERS", "AHP_MCP_LISTING_WORKERS", "AHP_SERVING_PROCESSES",
                    "AHP_RESOURCE_WATCH_SECONDS")


def _env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _env_networks(name):
    networks = []
    for entry in filter(None, (e.strip() for e in os.environ.get(name, "").split(","))):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {entry!r} is not an IP address or CIDR block.") from None
    return networks


def _embedded_secret_key():
    """This install's own key, made on first use and kept under var/ (readable by its owner only):
    never a constant anyone could read in the source. ahp.serve and runhost refuse to start on it
    unless the host is embedded on loopback (ahp/deployment.py)."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        from django.core.management.utils import get_random_secret_key

        draft = VAR_DIR / f"secret_key.{os.getpid()}"
        draft.write_text(get_random_secret_key())
        draft.chmod(0o600)
        try:
            os.link(draft, path)  # whoever links first wins; a second process reads the winner's key
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


def _proxy_ssl_header(value):
    """`X-Forwarded-Proto: https` (the header a TLS-terminating proxy sets) as Django wants it."""
    name, colon, expected = value.partition(":")
    if not colon or not name.strip() or not expected.strip():
        raise ImproperlyConfigured(f"SECURE_PROXY_SSL_HEADER: {value!r} is not of the form 'X-Forwarded-Proto: https'.")
    return "HTTP_" + name.strip().upper().replace("-", "_"), expected.strip()


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or _embedded_secret_key()
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h.strip()]

# Behind a TLS-terminating proxy (SECURE_PROXY_SSL_HEADER set): cookies only over TLS, HSTS, and
# plain http redirected, but for the health check the proxy's own probe makes.
BEHIND_TLS = bool(os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip())
if BEHIND_TLS:
    SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(os.environ["SECURE_PROXY_SSL_HEADER"])
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = 365 * 24 * 3600
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = BEHIND_TLS
SESSION_COOKIE_HTTPONLY = CSRF_COOKIE_HTTPONLY = True  # no page script reads either
CSRF_TRUSTED_ORIGINS = [f"{'https' if BEHIND_TLS else 'http'}://{h}" for h in ALLOWED_HOSTS if h != "*"]

def _env_count(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ImproperlyConfigured(f"{name}: {value!r} is not a whole number of at least 1.")
    return int(value)


# Per-person quotas (sessions_app/quotas.py), the operator's: a tenant cannot raise them.
AHP_MAX_SESSIONS_PER_PERSON = _env_count("AHP_MAX_SESSIONS_PER_PERSON", 500)  # not archived
AHP_MAX_CHATS_PER_PERSON = _env_count("AHP_MAX_CHATS_PER_PERSON", 2000)  # not archived, besides sessions' main chats
AHP_MAX_CREATIONS_PER_MINUTE = _env_count("AHP_MAX_CREATIONS_PER_MINUTE", 60)  # sessions and chats together
AHP_MAX_CONNECTIONS_PER_PERSON = _env_count("AHP_MAX_CONNECTIONS_PER_PERSON", 50)  # open sockets, per server process

# Proxies whose X-Forwarded-For names the client (the handshake throttle keys by it); none by default.
AHP_TRUSTED_PROXIES = _env_networks("AHP_TRUSTED_PROXIES")
# How often Agent Merge looks at each pull request it watches.
AHP_AGENT_MERGE_POLL_SECONDS = _env_count("AHP_AGENT_MERGE_POLL_SECONDS", 60)
# How long a pooled MCP client may sit unused before it is closed (a stdio server's process ends).
AHP_MCP_IDLE_SECONDS = _env_count("AHP_MCP_IDLE_SECONDS", 300)
# How often a subscribed resource watch lists its place (createResourceWatch).
AHP_RESOURCE_WATCH_SECONDS = float(os.environ.get("AHP_RESOURCE_WATCH_SECONDS") or 1)

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
    "agents",
    "tools_app",
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
    "ahp.request_limits.RequestTooBigMiddleware",
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
# Connections are kept between requests: reopening one per ORM hop of the socket layer costs more
# than the work itself. No health check (a `SELECT 1` at the start of every hop): a connection
# that failed is closed at the end of its hop (Django closes one with errors that is unusable),
# so after a database restart the next hop reconnects.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=600, conn_health_checks=False)}
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
    # Parameters bound by the server, and a statement prepared from its second run: psycopg then
    # sends the hot statements (a tool call's begin and completion, the catalog stamp) by name
    # with their values, instead of quoting every value into the text in Python and the server
    # parsing and planning it again (bench.ws_roundtrip: 6-17% less CPU per client call).
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}

# Threads for the ORM work of async code (kernel/orm.py), each holding one connection. SQLite
# takes one writer at a time and its busy handler sleeps 1-100 ms between tries rather than
# queueing, so more threads there only turn waits into sleeps. On PostgreSQL 2: paired under
# bench.load, 2 made more calls a second than 4 in five pairs of six, and 4 more than 8 (the
# threads contend for the GIL with the event loop).
AHP_ORM_THREADS = int(os.environ.get("AHP_ORM_THREADS") or (1 if DATABASES["default"]["ENGINE"].endswith("sqlite3") else 2))
# Threads for host tools' synchronous bodies (tools_app/tool_threads.py), and how many of one
# tenant's may run at once in a process: a tenant's long calls wait on each other, not on another
# tenant's. Each thread that touched the database keeps a connection, so as many per process.
AHP_TOOL_THREADS = int(os.environ.get("AHP_TOOL_THREADS") or 32)
AHP_TOOL_THREADS_PER_TENANT = int(os.environ.get("AHP_TOOL_THREADS_PER_TENANT") or 8)
# How long a host tool's body may run before its call fails: longer than any of the host's own
# tools may take (a command in a computer: a minute; an MCP server's call: its own timeout), so
# only a runaway plugin reaches it. How many overrunning bodies a process lets run on in spare
# threads without holding their tenant's slot.
AHP_HOST_TOOL_SECONDS = float(os.environ.get("AHP_HOST_TOOL_SECONDS") or 600)
AHP_TOOL_THREADS_ABANDONED = int(os.environ.get("AHP_TOOL_THREADS_ABANDONED") or 16)
# Each of these threads may hold a database connection: docs/deployment.md sums them per node.
ENVIRONMENT_KEYS += ("AHP_ORM_THREADS", "AHP_TOOL_THREADS", "AHP_TOOL_THREADS_ABANDONED")

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
FORMAT_MODULE_PATH = ["ahp.formats"]  # times to the second

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REDIS_URL = os.environ.get("REDIS_URL", "")
# What the host's own Redis keys start with (kernel/shared_counts.py: counts every node shares).
AHP_REDIS_KEY_PREFIX = "ahp"
# Messages a channel of the in-memory layer may hold undelivered before it drops new ones (100
# by default, logged only at INFO): a socket or a process's wake-up reader behind a burst of a
# busy tenant must not lose a `toolCallReady` or a wake-up. On Redis the layer is pub/sub, which
# holds nothing undelivered and so drops nothing (kernel.channel_layer). Waiters still read their
# rows and subscribers catch up from the log.
CHANNEL_CAPACITY = 100_000
# Processes serving sockets and requests, one per core: ahp/front.py hands each tenant's
# connections to one of them, so one tenant's churn costs its own process's event loop.
SERVING_PROCESSES = int(os.environ.get("AHP_SERVING_PROCESSES") or os.cpu_count() or 1)
if REDIS_URL:
    CHANNEL_LAYERS = {"default": {"BACKEND": "kernel.channel_layer.PubSubChannelLayer",
                                  "CONFIG": {"hosts": [REDIS_URL]}}}
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "kernel.memory_layer.MemoryChannelLayer",
                                  "CONFIG": {"capacity": CHANNEL_CAPACITY}}}
    CELERY_BROKER_URL = "filesystem://localhost/"  # the host part is unused; naming it keeps kombu quiet
    CELERY_BROKER_TRANSPORT = "kernel.filesystem_broker:Transport"  # writes each message whole
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
# Embedded, beat keeps its schedule in memory: every entry is a sweep at an interval, and what is
# due lives in rows the sweeps read, so nothing is lost with a beat. Celery's default shelve file
# was left half written by a killed beat, and the next one logged a traceback removing it.
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
if REDIS_URL:
    # Every node may start a beat: RedBeat's lock in Redis lets one send the schedule, the others
    # wait and one takes over within the lock's timeout once the holder is gone.
    CELERY_BEAT_SCHEDULER = "redbeat.RedBeatScheduler"
    CELERY_REDBEAT_REDIS_URL = REDIS_URL
    CELERY_REDBEAT_REDIS_OPTIONS: dict[str, object] = {}
    CELERY_REDBEAT_KEY_PREFIX = f"{AHP_REDIS_KEY_PREFIX}:redbeat"
    CELERY_REDBEAT_LOCK_TIMEOUT = 30
    CELERY_BEAT_MAX_LOOP_INTERVAL = 5  # the holder renews its lock, and the others try for it, this often
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    # Fires whatever scheduled work is due and was missed (downtime, a dead process).
    "sweep-due-work": {"task": "sessions_app.tasks.sweep_due_work", "schedule": 5.0},
    "sweep-wakeups": {"task": "tools_app.families.wakeups.tasks.sweep_wakeups", "schedule": 5.0},
    "sweep-orphaned-terminals": {"task": "tools_app.families.terminals.tasks.sweep_orphaned_terminals", "schedule": 15.0},
    "sweep-deferred-reruns": {"task": "tools_app.families.agent_merge.tasks.sweep_deferred_reruns", "schedule": 30.0},
    # Each watch has its own due time (AHP_AGENT_MERGE_POLL_SECONDS); this only looks for due ones.
    "watch-pull-requests": {"task": "tools_app.families.agent_merge.tasks.watch_pull_requests", "schedule": 15.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["grants.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "UNAUTHENTICATED_USER": None,
    # The socket's frame rules for bodies (no NaN, NUL, lone surrogates, deep nesting), every content type.
    "DEFAULT_PARSER_CLASSES": ["ahp.parsers.StrictJSONParser", "ahp.parsers.StrictFormParser",
                               "ahp.parsers.StrictMultiPartParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AHP host API",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Its schema warnings are about documentation, not deployment: `check --deploy` lists only the latter.
    "ENABLE_DJANGO_DEPLOY_CHECK": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # The Copilot SDK logs each request its CLI does not know (it then falls back) with a traceback;
    # httpx logs every request the host makes (a model check, an MCP call) at INFO.
    "loggers": {"copilot": {"level": "ERROR"}, "httpx": {"level": "WARNING"}},
}

# The per-session sandbox everything run for a tenant runs in (docs/security.md).
# Each sandbox runs as a user id of its own, in its tenant's group, from this range ("first-last",
# ids no account of the machine uses); claims are files in AHP_SANDBOX_ID_FOLDER, which every
# host installed on one machine shares, as they share its ids.
AHP_SANDBOX_IDS = os.environ.get("AHP_SANDBOX_IDS", "100000-199999")
AHP_SANDBOX_ID_FOLDER = os.environ.get("AHP_SANDBOX_ID_FOLDER", "/var/lib/ahp/sandbox-ids")
AHP_SANDBOX_CPU_SECONDS = int(os.environ.get("AHP_SANDBOX_CPU_SECONDS", "3600"))
AHP_SANDBOX_MEMORY_MB = int(os.environ.get("AHP_SANDBOX_MEMORY_MB", "16384"))  # address space, per process
# Memory a sandbox's processes hold in all (its control group; 0: none), where the host may make one.
AHP_SANDBOX_SESSION_MEMORY_MB = int(os.environ.get("AHP_SANDBOX_SESSION_MEMORY_MB", "8192"))
AHP_SANDBOX_PROCESSES = int(os.environ.get("AHP_SANDBOX_PROCESSES", "1024"))
AHP_MAX_TERMINALS_PER_SESSION = int(os.environ.get("AHP_MAX_TERMINALS_PER_SESSION", "16"))
AHP_SANDBOX_FILE_MB = int(os.environ.get("AHP_SANDBOX_FILE_MB", "2048"))
# A chat's harness process stays warm between turns (agents/warm.py): stopped after this long
# idle, and at most this many, holding at most this much memory in all, per serving process
# (the least recently used goes first); a stopped chat's next turn resumes its conversation.
AHP_HARNESS_IDLE_SECONDS = float(os.environ.get("AHP_HARNESS_IDLE_SECONDS", "600"))
AHP_HARNESS_WARM_MAX = int(os.environ.get("AHP_HARNESS_WARM_MAX", "16"))
AHP_HARNESS_WARM_MEMORY_MB = int(os.environ.get("AHP_HARNESS_WARM_MEMORY_MB", "6144"))
# Stdio MCP servers tenants may pick by name, beside the superuser's StdioServer rows:
# {"name": {"command": "/abs/path", "args": [...], "env": {...}, "readOnlyPaths": [...]}}.
AHP_STDIO_MCP_SERVERS = json.loads(os.environ.get("AHP_STDIO_MCP_SERVERS") or "{}")
# How many sessions' MCP servers one process lists at once; the rest wait their turn.
AHP_MCP_LISTING_WORKERS = int(os.environ.get("AHP_MCP_LISTING_WORKERS", "4"))

# Where the host may reach and keep things for a tenant (docs/security.md): host-wide outbound
# allow-list, the workspace root tenants' folders live under, and the key tenant secrets are
# encrypted with (embedded: a key file under VAR_DIR, made on first use).
AHP_OUTBOUND_ALLOW = os.environ.get("AHP_OUTBOUND_ALLOW", "")
AHP_WORKSPACE_ROOT = os.environ.get("AHP_WORKSPACE_ROOT") or str(VAR_DIR / "workspaces")
AHP_SECRETS_KEY = os.environ.get("AHP_SECRETS_KEY", "")
ENVIRONMENT_KEYS += ("AHP_OUTBOUND_ALLOW", "AHP_WORKSPACE_ROOT", "AHP_SECRETS_KEY")
# This machine's name among the host's nodes (docs/deployment.md): what a session's home names, its
# worker's heartbeat is recorded under, /healthz reports; unset, a name made once and kept in
# VAR_DIR/node_id (sessions_app.events.log.this_node). Two nodes never share one.
AHP_NODE_ID = os.environ.get("AHP_NODE_ID", "")
ENVIRONMENT_KEYS += ("AHP_NODE_ID",)
# The agents' host-wide defaults (agents/): each tenant's agentConnections overrides them.
ENVIRONMENT_KEYS += ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "AHP_CLAUDE_MODEL", "AHP_CLAUDE_CLI_PATH",
                     "AHP_COPILOT_TYPE", "AHP_COPILOT_BASE_URL", "AHP_COPILOT_API_KEY", "AHP_COPILOT_WIRE_API",
                     "AHP_COPILOT_MODEL", "COPILOT_CLI_PATH", "AHP_HARNESS_DIR", "AHP_ACP_AGENT_COMMAND",
                     "AHP_ACP_AGENT_READ_ONLY_PATHS", "AHP_ACP_AGENTS")
