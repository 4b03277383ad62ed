from django.apps import AppConfig


class AhpConfig(AppConfig):
    name = "ahp"
    verbose_name = "Host"
