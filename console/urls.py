from django.urls import path

from . import views

app_name = "console"
urlpatterns = [
    path("", views.tenants, name="tenants"),
    path("<slug:slug>/dashboard", views.tenant_dashboard, name="dashboard"),
    path("<slug:slug>/catalog", views.catalog_preview, name="catalog-preview"),
    path("<slug:slug>/live", views.live_sessions, name="live"),
    path("<slug:slug>/live/sessions", views.live_index, name="live-index"),
    path("sessions/<uuid:session_id>/catalog", views.session_catalog, name="session-catalog"),
]
