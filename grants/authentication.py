from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .models import ApiToken, Principal


def token_from_headers(headers):
    """The bearer token in an `Authorization` header value, or None."""
    scheme, _, value = (headers or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>`; request.user is the person (None for a root token) and
    request.auth the Principal acting."""

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        token = ApiToken.authenticate(token_from_headers(header))
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        principal = token.principal()
        return (principal, principal)

    def authenticate_header(self, request):
        return "Bearer"


def acting_principal(request: Request) -> Principal:
    """request.auth as BearerTokenAuthentication sets it; a request it did not authenticate is refused."""
    if not isinstance(request.auth, Principal):
        raise exceptions.NotAuthenticated()
    return request.auth
