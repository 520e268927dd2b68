"""Validate the fake GitHub's responses against GitHub's own OpenAPI description.

The description (``shared/github/rest-api.openapi.json``, ~13 MB) is loaded once per process. OpenAPI
3.0 schemas are JSON Schema draft 4 plus ``nullable``; we rewrite ``nullable: true`` into draft-4
terms (``type: [T, "null"]``, ``enum + null``, or ``anyOf [..., {type: null}]``) and validate with
``jsonschema``'s draft-4 validator, resolving ``$ref`` against the whole document through a
``referencing`` registry.

A request path is matched to its path template first strictly (parameters hold no ``/``), then
leniently (parameters like ``{ref}``, ``{path}``, ``{branch}`` may contain ``/``, as on GitHub), the
template with the most literal characters winning.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

SPEC_URI = "urn:kbot:github-rest-openapi"
_lock = threading.Lock()


def _absolute_refs(node: Any) -> Any:
    """Point ``#/...`` references of an operation's inline schema at the registered description."""
    if isinstance(node, list):
        return [_absolute_refs(x) for x in node]
    if not isinstance(node, dict):
        return node
    return {k: (SPEC_URI + v if k == "$ref" and isinstance(v, str) and v.startswith("#") else _absolute_refs(v))
            for k, v in node.items()}


def _denullable(node: Any) -> Any:
    """OpenAPI 3.0 ``nullable`` → plain draft-4 JSON Schema (recursively, returns a new tree)."""
    if isinstance(node, list):
        return [_denullable(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _denullable(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True:
        if "type" in out and "$ref" not in out:
            t = out["type"]
            out["type"] = list(dict.fromkeys((t if isinstance(t, list) else [t]) + ["null"]))
            if "enum" in out and None not in out["enum"]:
                out["enum"] = list(out["enum"]) + [None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@dataclass
class _Template:
    template: str
    strict: re.Pattern
    lenient: re.Pattern
    literal_len: int


class OpenAPISpec:
    """The GitHub REST description, ready to validate responses."""

    def __init__(self, path: Path):
        raw = json.loads(Path(path).read_text())
        self.paths: dict[str, dict] = raw["paths"]
        self.doc = {"paths": self.paths, "components": _denullable(raw["components"])}
        # Operation-level schemas (inline ones) need the same rewrite; do it lazily per operation.
        resource = referencing.Resource.from_contents(self.doc, default_specification=referencing.jsonschema.DRAFT4)
        self.registry = referencing.Registry().with_resource(SPEC_URI, resource)
        self._templates = [self._compile(t) for t in self.paths]
        self._validators: dict[tuple[str, str, str], jsonschema.Draft4Validator | None] = {}

    @staticmethod
    def _compile(template: str) -> _Template:
        parts = re.split(r"(\{[^}]+\})", template)
        strict = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
        lenient = "".join(".+" if p.startswith("{") else re.escape(p) for p in parts)
        literal = sum(len(p) for p in parts if not p.startswith("{"))
        return _Template(template, re.compile(f"^{strict}$"), re.compile(f"^{lenient}$"), literal)

    def match(self, method: str, path: str) -> str | None:
        """The path template for a concrete request path (without query string), or None."""
        method = method.lower()
        for attr in ("strict", "lenient"):
            hits = [t for t in self._templates if getattr(t, attr).match(path) and method in self.paths[t.template]]
            if hits:
                return max(hits, key=lambda t: t.literal_len).template
        return None

    def template_matches(self, template: str, path: str) -> bool:
        """Whether ``path`` is an instance of the description's path ``template``."""
        t = next((t for t in self._templates if t.template == template), None)
        return t is not None and bool(t.strict.match(path) or t.lenient.match(path))

    def _response_schema(self, method: str, template: str, status: int) -> tuple[bool, dict | None]:
        """(documented?, json schema or None for no body)."""
        op = self.paths[template].get(method.lower())
        if op is None:
            return False, None
        responses = op.get("responses", {})
        resp = responses.get(str(status)) or responses.get(f"{str(status)[0]}XX") or responses.get("default")
        if resp is None:
            return False, None
        if "$ref" in resp:
            name = resp["$ref"].rsplit("/", 1)[-1]
            resp = self.doc["components"]["responses"][name]
        content = resp.get("content") or {}
        for ctype, media in content.items():
            if "json" in ctype and "schema" in media:
                return True, media["schema"]
        return True, None

    def validator(self, method: str, template: str, status: int) -> jsonschema.Draft4Validator | None:
        key = (method.lower(), template, str(status))
        with _lock:
            if key not in self._validators:
                documented, schema = self._response_schema(method, template, status)
                if not documented:
                    raise KeyError(f"{method.upper()} {template} does not document status {status}")
                self._validators[key] = (
                    None if schema is None
                    else jsonschema.Draft4Validator(_absolute_refs(_denullable(schema)), registry=self.registry)
                )
            return self._validators[key]

    def request_validator(self, method: str, template: str) -> jsonschema.Draft4Validator | None:
        """Validator for the operation's JSON request body, or None if it takes none."""
        key = (method.lower(), template, "request")
        with _lock:
            if key not in self._validators:
                op = self.paths.get(template, {}).get(method.lower()) or {}
                body = op.get("requestBody") or {}
                if "$ref" in body:
                    body = self.doc["components"]["requestBodies"][body["$ref"].rsplit("/", 1)[-1]]
                schema = next((m["schema"] for c, m in (body.get("content") or {}).items()
                               if "json" in c and "schema" in m), None)
                self._validators[key] = (
                    None if schema is None
                    else jsonschema.Draft4Validator(_absolute_refs(_denullable(schema)), registry=self.registry)
                )
            return self._validators[key]

    def validate_request(self, method: str, template: str, body: Any) -> list[str]:
        """Problems with a request body, worded like GitHub's 422 answers."""
        validator = self.request_validator(method, template)
        if validator is None:
            return []
        return [f"For '{'/'.join(map(str, e.absolute_path)) or 'body'}', {e.message[:200]}"
                for e in validator.iter_errors(body)][:5]

    def error_validator(self) -> jsonschema.Draft4Validator:
        return jsonschema.Draft4Validator({"$ref": f"{SPEC_URI}#/components/schemas/basic-error"},
                                          registry=self.registry)

    def validate(self, method: str, path: str, status: int, body: Any, *, template: str | None = None) -> list[str]:
        """Problems with one response (empty list: it conforms)."""
        template = template or self.match(method, path)
        if template is None:
            return [f"{method} {path}: no OpenAPI path template matches"]
        if method.lower() not in self.paths.get(template, {}):
            return [f"{method} {template}: not an operation of the OpenAPI description"]
        try:
            validator = self.validator(method, template, status)
        except KeyError as exc:
            return [str(exc.args[0])]
        if validator is None and status >= 400 and body not in (None, b"", ""):
            # Error answers documented without a body still carry GitHub's standard error object.
            validator = self.error_validator()
        if validator is None:
            if body not in (None, b"", ""):
                return [f"{method} {path} -> {status}: the description has no body here, got {str(body)[:200]}"]
            return []
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        return [
            f"{method} {path} -> {status}: at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in errors[:20]
        ]


@functools.lru_cache(maxsize=2)
def load_spec(path: str) -> OpenAPISpec:
    """One parsed description per process (it takes about a second)."""
    return OpenAPISpec(Path(path))
