from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The operators' console: REST config API, audit, dashboard and admin pages. Nothing in
    the other apps imports it; it only reads their rows and calls their `do_*` functions."""

    name = "console"
    verbose_name = "Operators' console"

    def ready(self):
        from . import schema  # noqa: F401  (registers the bearer scheme with drf-spectacular)
