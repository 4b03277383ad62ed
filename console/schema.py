"""Tells drf-spectacular how the API authenticates: `Authorization: Bearer <token>`."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "grants.authentication.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A connection token of the tenant (minttoken, or the admin's API tokens page)."}
