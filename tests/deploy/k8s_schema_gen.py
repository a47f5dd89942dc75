#!/usr/bin/python3
"""Writes tests/deploy/k8s-schema.json: JSON Schemas for exactly the kinds deploy/kubernetes/
uses, trimmed from the Kubernetes OpenAPI as Debian's python3-kubernetes carries it (its models
are generated from the API's OpenAPI document; 22.6.0 is release-1.22). Run it by hand, once
that package's models are at hand (MODELS, or `apt-get download python3-kubernetes` and
`dpkg-deb -x` it), when a manifest needs a kind or a field the vendored file lacks:

    tests/deploy/k8s_schema_gen.py MODELS_DIR > tests/deploy/k8s-schema.json

Each object lists its fields with additionalProperties false (a misspelled field fails), its
required fields (those whose setter refuses None) and each field's type. The API's int-or-string
fields are `object` in the models and accept an integer or a string here."""
import ast
import json
import re
import sys
from pathlib import Path

KINDS = {
    "apps/v1/Deployment": "V1Deployment",
    "v1/ConfigMap": "V1ConfigMap",
    "v1/Service": "V1Service",
    "policy/v1/PodDisruptionBudget": "V1PodDisruptionBudget",
    "networking.k8s.io/v1/NetworkPolicy": "V1NetworkPolicy",
    "v1/Secret": "V1Secret",
}
SCALARS = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string"},
    "date": {"type": "string"},
    "object": {"type": ["integer", "string"]},
}


def read_models(folder):
    models = {}
    for path in Path(folder).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    fields[stmt.targets[0].id] = ast.literal_eval(stmt.value) \
                        if stmt.targets[0].id in ("openapi_types", "attribute_map") else None
            required = re.findall(r"Invalid value for `(\w+)`, must not be `None`",
                                  path.read_text())
            models[node.name] = (fields.get("openapi_types", {}), fields.get("attribute_map", {}),
                                 required)
    return models


def main():
    models = read_models(sys.argv[1])
    definitions = {}

    def type_schema(t):
        if t in SCALARS:
            return dict(SCALARS[t])
        m = re.fullmatch(r"list\[(.+)\]", t)
        if m:
            return {"type": "array", "items": type_schema(m.group(1))}
        m = re.fullmatch(r"dict\(str, (.+)\)", t)
        if m:
            return {"type": "object", "additionalProperties": type_schema(m.group(1))}
        add(t)
        return {"$ref": "#/definitions/" + t}

    def add(name):
        if name in definitions:
            return
        types, names, required = models[name]
        definitions[name] = {}  # placed first: types may refer back to it
        definitions[name] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {names[a]: type_schema(t) for a, t in sorted(types.items())},
        }
        if required:
            definitions[name]["required"] = sorted({names[a] for a in required})

    for kind, model in KINDS.items():
        add(model)
        api_version, _, name = kind.rpartition("/")
        props = definitions[model]["properties"]
        props["apiVersion"] = {"const": api_version}
        props["kind"] = {"const": name}
        props.pop("status", None)  # written by the cluster, never by a manifest
        definitions[model]["required"] = sorted(set(definitions[model].get("required", []))
                                                | {"apiVersion", "kind", "metadata"})
    json.dump({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": "Kubernetes release-1.22 OpenAPI (python3-kubernetes 22.6.0 models), trimmed "
                    "to the kinds below by tests/deploy/k8s_schema_gen.py; do not edit by hand",
        "kinds": {k: {"$ref": "#/definitions/" + v} for k, v in KINDS.items()},
        "definitions": dict(sorted(definitions.items())),
    }, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


main()
