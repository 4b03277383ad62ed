from django.apps import AppConfig


class GrantsConfig(AppConfig):
    name = "grants"
    verbose_name = "Tenants, people and grants"

    def ready(self):
        from .liveness import watch_access_rows

        watch_access_rows()
