"""A request body over Django's limit is refused with a sentence, not a logged traceback and an
HTML page: a client sending too much is bad input, not a fault of the host."""
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin


def too_big_sentence() -> str:
    mib = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / (1024 * 1024)
    return f"The request body is over the {mib:g} MiB the host accepts; send less at a time."


class RequestTooBigMiddleware(MiddlewareMixin):
    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, RequestDataTooBig):
            return JsonResponse({"error": too_big_sentence()}, status=413)
        return None
