from django.contrib import admin

from .models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("hostname", "seen")

    def has_add_permission(self, request):
        return False  # a worker writes its own heartbeat
