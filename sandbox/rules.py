"""One entry of the operator's outbound allow-list, as the environment or the admin gives it."""
import ipaddress


def parse_rule(text):
    """A rule is ("network", ip_network) or ("name", lower-case host name); ValueError if neither."""
    text = text.strip()
    if not text:
        raise ValueError("An allow-list entry is a host name or a CIDR such as 127.0.0.1/32.")
    try:
        return "network", ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    name = text.lower().rstrip(".")
    labels = name.split(".")
    if len(name) > 253 or not all(label and len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
                                  for label in labels):
        raise ValueError(f"{text} is neither a host name nor a CIDR such as 127.0.0.1/32.")
    return "name", name
