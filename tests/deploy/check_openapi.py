#!/usr/bin/python3
"""Holds the admin listener's real answers to its OpenAPI description.

usage: check_openapi.py OPENAPI.yaml CALLS.jsonl

Each line of CALLS is one call the gateway answered, as tests/integration/test_admin_api.c
recorded it: {"method", "path", "status", "content_type", "www_authenticate", "body"}. Each
answer must be one the description allows: the path and method documented, the status among
the operation's responses, the content type among that response's, the body valid against
its schema (JSON Schema 2020-12, as OpenAPI 3.1 has it), and a header the response documents
present. And every documented operation must have been called, so that the description can
drift from the gateway in neither direction. Exit 0 when all hold; 1 with one line per
problem.
"""
import json
import sys

import jsonschema
import yaml


def resolve(spec, node):
    """A $ref of the document itself (#/components/...) followed to what it names."""
    while isinstance(node, dict) and "$ref" in node:
        at = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            at = at[part]
        node = at
    return node


def check_structure(spec):
    problems = []
    if not str(spec.get("openapi", "")).startswith("3.1"):
        problems.append("openapi: expected a 3.1 description")
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if not op.get("responses"):
                problems.append(f"{method.upper()} {path}: no responses")
            for status, response in op.get("responses", {}).items():
                response = resolve(spec, response)
                for media in response.get("content", {}).values():
                    if "schema" in media:
                        schema = dict(media["schema"], components=spec.get("components", {}))
                        try:
                            jsonschema.Draft202012Validator.check_schema(schema)
                        except jsonschema.SchemaError as e:
                            problems.append(f"{method.upper()} {path} {status}: {e.message}")
    return problems


def check_call(spec, call):
    """The problems of one recorded call, as strings."""
    where = f"{call['method']} {call['path']} -> {call['status']}"
    item = spec["paths"].get(call["path"])
    op = item.get(call["method"].lower()) if item else None
    if op is None:
        return [f"{where}: not documented"]
    response = op["responses"].get(str(call["status"]))
    if response is None:
        return [f"{where}: status not among the operation's responses"]
    response = resolve(spec, response)
    media_type = call["content_type"].split(";")[0].strip()
    media = response.get("content", {}).get(media_type)
    if media is None:
        return [f"{where}: content type {media_type} not documented"]
    problems = []
    for name in response.get("headers", {}):
        if name.lower() == "www-authenticate" and not call.get("www_authenticate"):
            problems.append(f"{where}: no {name} header")
    schema = media.get("schema")
    if schema is None:
        return problems
    body = call["body"]
    if media_type.endswith("json"):
        try:
            body = json.loads(body)
        except ValueError as e:
            return problems + [f"{where}: body is not JSON ({e})"]
    root = dict(schema, components=spec.get("components", {}))
    validator = jsonschema.Draft202012Validator(root)
    for error in validator.iter_errors(body):
        problems.append(f"{where}: {'/'.join(map(str, error.path))}: {error.message}")
    return problems


def main():
    if len(sys.argv) != 3:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        spec = yaml.safe_load(f)
    with open(sys.argv[2]) as f:
        calls = [json.loads(line) for line in f if line.strip()]
    problems = check_structure(spec)
    called = set()
    for call in calls:
        problems += check_call(spec, call)
        called.add((call["path"], call["method"].lower()))
    for path, item in spec["paths"].items():
        for method in item:
            if (path, method) not in called:
                problems.append(f"{method.upper()} {path}: documented, never called")
    for p in problems:
        print(p)
    print(f"{len(calls)} calls against {sys.argv[1]}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
