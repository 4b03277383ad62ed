from django.urls import path

from . import views

urlpatterns = [
    path("sessions", views.SessionList.as_view(), name="session-list"),
    path("sessions/<uuid:session_id>", views.SessionDetail.as_view(), name="session-detail"),
]
