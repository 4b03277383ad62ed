from django.urls import path

from . import views

app_name = "console"
urlpatterns = [
    path("", views.tenants, name="tenants"),
    path("<slug:slug>/dashboard", views.tenant_dashboard, name="dashboard"),
]
