from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "leaseboard.sandbox"
    label = "sandbox"
    verbose_name = "Payments sandbox (demo recipient)"
    default_auto_field = "django.db.models.BigAutoField"
