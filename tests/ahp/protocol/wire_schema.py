"""The JSON Schema of the AHP 1.1 types kept beside these tests (schema/ahp-1.1.schema.json,
written by hand from the types: schema/make_schema.py says how), and its validators."""
import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA = json.loads((Path(__file__).parent / "schema" / "ahp-1.1.schema.json").read_text())


@cache
def validator(name: str) -> Draft202012Validator:
    """A validator of the schema's definition `name` (ActionEnvelope, serverNotification, ...)."""
    return Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{name}"})


def violations(name: str, value: Any) -> list[str]:
    """What in `value` the definition `name` refuses, each said with where it is."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator(name).iter_errors(value)]
