"""The REST API's parsers: the socket's frame rules for request bodies too.

A JSON body holding NaN, escaped lone surrogates, NUL characters or nesting past the frame limit
is refused with 400 before any view sees it: no database stores such text, and a refusal that
quotes it back could not even be rendered. Form-encoded and multipart bodies get the same text
rule for every field name and value.
"""
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

from .protocol import frames

# The sentence a JSON body with such text gets, so every content type is refused alike.
BAD_TEXT = frames.BAD_TEXT


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


def _storable(text):
    try:
        text.encode("utf-8")  # a lone surrogate cannot be encoded, nor stored
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _check_fields(fields):
    for name, values in fields.lists():
        if not all(_storable(text) for text in (name, *(v for v in values if isinstance(v, str)))):
            raise ParseError(BAD_TEXT)


class StrictFormParser(FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        _check_fields(data)
        return data


class StrictMultiPartParser(MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        _check_fields(parsed.data)  # Django already strips what is not printable from file names
        return parsed
