from django.urls import path

from . import views

urlpatterns = [
    path("agent-definitions", views.AgentDefinitionList.as_view(), name="agent-definition-list"),
    path("agent-definitions/<int:definition_id>", views.AgentDefinitionDetail.as_view(), name="agent-definition-detail"),
]
