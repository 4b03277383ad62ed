from django.urls import path

from . import views

urlpatterns = [
    path("sessions/<uuid:session_id>/tools-endpoint", views.ToolsEndpointView.as_view(), name="session-tools-endpoint"),
]
