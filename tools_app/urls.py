from django.urls import path

from . import views
from .families.session.api import SessionlessToolCall

urlpatterns = [
    path("agent-definitions", views.AgentDefinitionList.as_view(), name="agent-definition-list"),
    path("agent-definitions/<int:definition_id>", views.AgentDefinitionDetail.as_view(), name="agent-definition-detail"),
    path("tools/<str:name>", SessionlessToolCall.as_view(), name="sessionless-tool-call"),
    path("tool-outputs/<uuid:call_id>", views.ToolOutputDetail.as_view(), name="tool-output"),
]
