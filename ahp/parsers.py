"""The REST API's JSON parser: the socket's frame rules for request bodies too.

A body holding NaN, escaped lone surrogates, NUL characters or nesting past the frame limit
is refused with 400 before any view sees it: no database stores such text, and a refusal that
quotes it back could not even be rendered.
"""
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .protocol import frames


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
        except UnicodeDecodeError:
            raise ParseError("The body is not valid text.") from None
        try:
            return frames.parse(text)
        except frames.BadFrame as bad:
            raise ParseError(bad.message.replace("the frame", "the body")) from None
