"""The credentials in HostConfig's mcpServers: sealed when stored, masked wherever they are
shown, and scrubbed from any error that might quote them."""
import re
from urllib.parse import urlsplit, urlunsplit

from sandbox.sealing import seal

CREDENTIAL_KEYS = ("env", "headers")
MASK = "<set>"
# A flag or variable name that carries a credential: --token, --api-key, GITHUB_TOKEN=, ...
CREDENTIAL_NAME = re.compile(r"token|key|secret|passw|pwd|auth|credential|bearer|cookie", re.IGNORECASE)


def is_http_url(url):
    """Whether `url` is an http(s) URL naming a host (masked userinfo and query values included)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except (TypeError, ValueError, AttributeError):
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def masked_url(url):
    """`url` with its userinfo and query values reading `<set>` (all of it when it does not parse)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(f"{name}={MASK}" if sep and value else piece
                     for piece in parts.query.split("&") if piece
                     for name, sep, value in [piece.partition("=")])
    return urlunsplit((parts.scheme, netloc, parts.path, query if parts.query else "", parts.fragment))


def masked_args(args):
    """stdio args with what looks like a credential reading `<set>`: the value after a flag
    such as --token, a `--token=` or `API_KEY=` value, and a URL's userinfo and query."""
    masked, after_flag = [], False
    for arg in args:
        if not isinstance(arg, str):
            masked.append(arg)
            continue
        name, sep, value = arg.partition("=")
        if after_flag:
            arg = MASK
        elif sep and value and CREDENTIAL_NAME.search(name):
            arg = f"{name}={MASK}"
        elif "://" in arg:
            arg = masked_url(arg)
        after_flag = arg.startswith("-") and not sep and bool(CREDENTIAL_NAME.search(arg))
        masked.append(arg)
    return masked


def masked_entry(entry):
    if not isinstance(entry, dict):
        return entry
    shown = {k: ({ck: MASK for ck in v} if k in CREDENTIAL_KEYS and isinstance(v, dict) else v)
             for k, v in entry.items()}
    if isinstance(shown.get("url"), str):
        shown["url"] = masked_url(shown["url"])
    if isinstance(shown.get("args"), list):
        shown["args"] = masked_args(shown["args"])
    return shown


def masked_mcp_servers(servers):
    """Credentials (env and headers values, URL userinfo and query values, credential-like
    args) read `<set>` wherever configuration is shown."""
    if not servers:
        return servers
    return {name: masked_entry(entry) for name, entry in servers.items()}


def secret_values(entry):
    """Every secret an opened `entry` holds: env and headers values, URL userinfo and query
    values, credential-like args. None of them may appear in a log line or a recorded error."""
    found = set()
    for key in CREDENTIAL_KEYS:
        if isinstance(entry.get(key), dict):
            found.update(v for v in entry[key].values() if isinstance(v, str))
            found.update(v.split(" ", 1)[1] for v in entry[key].values() if isinstance(v, str) and " " in v)
    urls = [entry["url"]] if isinstance(entry.get("url"), str) else []
    args = entry.get("args") if isinstance(entry.get("args"), list) else []
    for shown, arg in zip(masked_args(args), args, strict=True):
        if shown == arg:
            continue
        if "://" in arg:
            urls.append(arg)
        else:
            found.add(arg.partition("=")[2] if shown != MASK else arg)
    for url in urls:
        try:
            parts = urlsplit(url)
        except ValueError:
            found.add(url)
            continue
        if "@" in parts.netloc:
            found.add(parts.netloc.rpartition("@")[0])
            found.update(parts.netloc.rpartition("@")[0].split(":"))
        found.update(piece.partition("=")[2] for piece in parts.query.split("&"))
    return {secret for secret in found if len(secret) >= 3}


def scrubbed(failure, secrets):
    """`failure` (and every exception grouped in it) with the secrets in its message read `<set>`."""
    if isinstance(failure, BaseExceptionGroup):
        for inner in failure.exceptions:
            scrubbed(inner, secrets)
    else:
        failure.args = tuple(_without(arg, secrets) if isinstance(arg, str) else arg for arg in failure.args)
    return failure


def _without(text, secrets):
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _kept_args(new_args, old_args):
    """An arg sent back as shown keeps the stored one (in order, for repeats)."""
    if not isinstance(new_args, list) or not isinstance(old_args, list):
        return new_args
    stored = {}
    for shown, old in zip(masked_args(old_args), old_args, strict=True):
        if shown != old:
            stored.setdefault(shown, []).append(old)
    return [stored[arg].pop(0) if isinstance(arg, str) and stored.get(arg) else arg for arg in new_args]


def stored_mcp_servers(new_servers, old_servers):
    """What an edit stores: values sent back as shown (`<set>`, masked URL or args) keep the
    stored ones; every other env and headers value is sealed (encrypted at rest)."""
    if not new_servers:
        return new_servers
    old_servers = old_servers if isinstance(old_servers, dict) else {}
    stored = {}
    for name, entry in new_servers.items():
        if not isinstance(entry, dict):
            stored[name] = entry
            continue
        old = old_servers.get(name) if isinstance(old_servers.get(name), dict) else {}
        entry = dict(entry)
        for key in CREDENTIAL_KEYS:
            if isinstance(entry.get(key), dict):
                old_values = old.get(key) if isinstance(old.get(key), dict) else {}
                entry[key] = {ck: (old_values[ck] if cv == MASK and ck in old_values
                                   else seal(cv) if isinstance(cv, str) else cv)
                              for ck, cv in entry[key].items()}
        if isinstance(entry.get("url"), str) and isinstance(old.get("url"), str) and entry["url"] == masked_url(old["url"]):
            entry["url"] = old["url"]
        if "args" in entry:
            entry["args"] = _kept_args(entry["args"], old.get("args"))
        stored[name] = entry
    return stored

