from django.contrib import admin
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.landing, name="landing"),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("api/v1/", include("sessions_app.urls")),
    path("api/v1/", include("tools_app.urls")),
    path("api/v1/", include("ahp.mcp.urls")),
    path("api/v1/", include("console.api_urls")),
    path("console/", include("console.urls")),
]
