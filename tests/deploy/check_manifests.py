#!/usr/bin/python3
"""Validates Kubernetes manifests offline against tests/deploy/k8s-schema.json (JSON Schemas
for exactly the kinds and API versions deploy/kubernetes/ uses, see k8s_schema_gen.py):

    tests/deploy/check_manifests.py [--configs DIR] PATH...

PATH is a manifest file or a directory searched for *.yaml (kustomization.yaml files, which
are kustomize's and not the API's, are skipped). Every document must be of a kind and API
version the schema holds and match it: a misspelled or unknown field, a value of the wrong
type or a missing required field is an error. It also checks what the schema cannot see:
terminationGracePeriodSeconds of each Deployment that mounts a ConfigMap holding sluice.yaml
stays above its preStop sleep plus that config's server.drain_timeout. With --configs, each
such ConfigMap's sluice.yaml is written to DIR/<directory>-<name>.yaml for `sluice --check`.
Prints one line per problem (FILE: KIND/NAME: PATH: message) and exits 1 if there was one."""
import argparse
import json
import re
import sys
from pathlib import Path

import jsonschema
import yaml

SCHEMA = Path(__file__).with_name("k8s-schema.json")
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def documents(paths):
    for path in paths:
        files = sorted(Path(path).rglob("*.yaml")) if Path(path).is_dir() else [Path(path)]
        for f in files:
            if f.name == "kustomization.yaml":
                continue
            for doc in yaml.safe_load_all(f.read_text()):
                if doc is not None:
                    yield f, doc


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", str(text))
    return int(m.group(1)) * UNITS[m.group(2)] if m else None


def grace_problems(deployment, configs):
    """Each container of `deployment` against the ConfigMaps of its volumes."""
    pod = deployment["spec"]["template"]["spec"]
    grace = pod.get("terminationGracePeriodSeconds", 30)
    maps = {v["name"]: v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    for c in pod["containers"]:
        command = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        sleep = int(command[1]) if len(command) == 2 and command[0] == "sleep" else 0
        for mount in c.get("volumeMounts", []):
            for text in configs.get(maps.get(mount["name"]), []):
                drain = seconds((yaml.safe_load(text).get("server") or {}).get("drain_timeout",
                                                                               "10s"))
                if drain is None or sleep + drain >= grace:
                    yield (f"spec.template.spec.terminationGracePeriodSeconds: {grace} s is not "
                           f"above preStop's {sleep} s plus server.drain_timeout ({drain} s)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", metavar="DIR")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    schema = json.loads(SCHEMA.read_text())
    problems, deployments, configs = [], [], {}

    for f, doc in documents(args.paths):
        kind = f"{doc.get('apiVersion')}/{doc.get('kind')}" if isinstance(doc, dict) else "?"
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None
        where = f"{f}: {kind.rpartition('/')[2]}/{name}"
        if kind not in schema["kinds"]:
            problems.append(f"{where}: apiVersion/kind {kind} is not one of "
                            f"{', '.join(sorted(schema['kinds']))}")
            continue
        validator = jsonschema.Draft7Validator(
            {"$ref": schema["kinds"][kind]["$ref"], "definitions": schema["definitions"]})
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        for e in errors:
            path = ".".join(str(p) for p in e.absolute_path) or "(top)"
            problems.append(f"{where}: {path}: {e.message}")
        if errors:
            continue
        if kind == "v1/ConfigMap" and "sluice.yaml" in doc.get("data", {}):
            configs.setdefault(name, []).append(doc["data"]["sluice.yaml"])
            if args.configs:
                out = Path(args.configs) / f"{f.parent.name}-{name}.yaml"
                out.write_text(doc["data"]["sluice.yaml"])
        if kind == "apps/v1/Deployment":
            deployments.append((where, doc))
    for where, d in deployments:
        problems += [f"{where}: {p}" for p in grace_problems(d, configs)]
    for p in problems:
        print(p)
    return 1 if problems else 0


sys.exit(main())
