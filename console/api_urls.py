from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from .api import HostConfigView, SessionCatalogView

urlpatterns = [
    path("config", HostConfigView.as_view(), name="host-config"),
    path("sessions/<uuid:session_id>/catalog", SessionCatalogView.as_view(), name="session-catalog"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
