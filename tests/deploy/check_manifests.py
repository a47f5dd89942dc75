#!/usr/bin/python3
"""Validates Kubernetes manifests offline against tests/deploy/k8s-schema.json (JSON Schemas
for exactly the kinds and API versions deploy/kubernetes/ uses, see k8s_schema_gen.py):

    tests/deploy/check_manifests.py [--configs DIR] PATH...

PATH is a manifest file, or a directory holding a kustomization.yaml, whose objects are
rendered as `kubectl apply -k` would for the little these use (resources, files or
directories; patches: a file deep-merged into the object of its kind and name, without lists,
or an inline JSON patch of add, replace and remove for a target kind and name); anything else
in a kustomization is an error rather than a guess. Every object must be of a kind and API
version the schema holds and match it: a misspelled or unknown field, a value of the wrong
type or a missing required field is an error. Within each PATH it also checks what the schema
cannot see (the files named are one set, each directory another), for each Deployment that mounts a ConfigMap holding sluice.yaml: that
terminationGracePeriodSeconds stays above the preStop sleep plus server.drain_timeout, and
that with limiter.store: redis, limiter.replicas is the Deployment's replicas, that there are
two replicas at least, and that a NetworkPolicy keeps the admin port (the container port
named admin) to peers inside the cluster; and, for every Deployment, that its pods mount no
service account token and its images are pinned by a tag. With --configs,
each such sluice.yaml is written to DIR/<directory's name, or files>-<ConfigMap's name>.yaml for
`sluice --check`. Prints one line per problem (WHERE: KIND/NAME: FIELD: message) and exits 1
if there was one."""
import argparse
import json
import re
import sys
from pathlib import Path

import jsonschema
import yaml

SCHEMA = Path(__file__).with_name("k8s-schema.json")
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


class Unsupported(Exception):
    pass


def load(path):
    return [d for d in yaml.safe_load_all(Path(path).read_text()) if d is not None]


def merge(into, patch, where):
    for key, value in patch.items():
        if isinstance(value, list) or isinstance(into.get(key), list):
            raise Unsupported(f"{where}: {key}: lists in a patch file are not merged here")
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value, where)
        else:
            into[key] = value


def json_patch(doc, ops, where):
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~")
                          for p in op["path"].split("/")[1:]]
        node = doc
        for p in parents:
            node = node[int(p) if isinstance(node, list) else p]
        if op["op"] in ("replace", "remove") and last not in node:
            raise Unsupported(f"{where}: {op['op']} {op['path']}: no such field")
        if op["op"] == "add" and isinstance(node, list) and last == "-":
            node.append(op["value"])
        elif op["op"] in ("add", "replace") and isinstance(node, dict):
            node[last] = op["value"]
        elif op["op"] == "remove" and isinstance(node, dict):
            del node[last]
        else:
            raise Unsupported(f"{where}: {op['op']} {op['path']}: not applied here")


def find(docs, kind, name, where):
    found = [d for d in docs if d.get("kind") == kind and d["metadata"].get("name") == name]
    if len(found) != 1:
        raise Unsupported(f"{where}: {len(found)} objects {kind}/{name} to patch")
    return found[0]


def render(folder):
    """The objects of the kustomization in `folder`, each with the file it came from."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    where = folder / "kustomization.yaml"
    if set(k) - {"resources", "patches"}:
        raise Unsupported(f"{where}: {', '.join(sorted(set(k) - {'resources', 'patches'}))}: "
                          "not rendered here")
    objects = []
    for r in k.get("resources", []):
        objects += render(folder / r) if (folder / r).is_dir() else \
            [(folder / r, d) for d in load(folder / r)]
    docs = [d for _, d in objects]
    for p in k.get("patches", []):
        if set(p) == {"path"}:
            for d in load(folder / p["path"]):
                merge(find(docs, d["kind"], d["metadata"]["name"], where), d, where)
        elif set(p) == {"target", "patch"} and set(p["target"]) == {"kind", "name"}:
            json_patch(find(docs, p["target"]["kind"], p["target"]["name"], where),
                       yaml.safe_load(p["patch"]), where)
        else:
            raise Unsupported(f"{where}: a patch of the form {sorted(p)}: not applied here")
    return objects


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", str(text))
    return int(m.group(1)) * UNITS[m.group(2)] if m else None


def mounted_maps(deployment):
    """The ConfigMaps `deployment` mounts, by volume name."""
    pod = deployment["spec"]["template"]["spec"]
    return {v["name"]: v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}


def config_problems(deployment, configs):
    """Each container of `deployment` against the sluice.yaml of its ConfigMap volumes: the
    grace period holds preStop and the drain; with the Redis store, limiter.replicas is the
    Deployment's; with the memory store, two replicas at least (one is an outage on every
    node drain)."""
    pod = deployment["spec"]["template"]["spec"]
    grace = pod.get("terminationGracePeriodSeconds", 30)
    maps = mounted_maps(deployment)
    for c in pod["containers"]:
        command = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        sleep = int(command[1]) if len(command) == 2 and command[0] == "sleep" else 0
        for mount in c.get("volumeMounts", []):
            text = configs.get(maps.get(mount["name"]))
            if text is None:
                continue
            config = yaml.safe_load(text)
            drain = seconds((config.get("server") or {}).get("drain_timeout", "10s"))
            if drain is None or sleep + drain >= grace:
                yield (f"spec.template.spec.terminationGracePeriodSeconds: {grace} s is not "
                       f"above preStop's {sleep} s plus server.drain_timeout ({drain} s)")
            limiter = config.get("limiter") or {}
            replicas = deployment["spec"].get("replicas", 1)
            if limiter.get("store") == "redis" and limiter.get("replicas", 1) != replicas:
                yield (f"spec.replicas: {replicas}, but its sluice.yaml says limiter.replicas: "
                       f"{limiter.get('replicas', 1)}")
            if replicas < 2:
                yield (f"spec.replicas: {replicas}: a node drain or a crash leaves no gateway "
                       "(run two at least)")


def pod_problems(deployment):
    """What any Deployment here must hold: no API token mounted, every image pinned by a tag
    or a digest."""
    pod = deployment["spec"]["template"]["spec"]
    if pod.get("automountServiceAccountToken") is not False:
        yield ("spec.template.spec.automountServiceAccountToken: not false (the pod would "
               "hold an API token it never uses)")
    for i, c in enumerate(pod["containers"]):
        name = c.get("image", "").rpartition("/")[2]
        tag = name.partition(":")[2] if "@" not in name else "digest"
        if tag in ("", "latest"):
            yield (f"spec.template.spec.containers.{i}.image: {c.get('image')} is not pinned "
                   "by a tag")


def admits(rule, name, number):
    """Whether the ingress `rule` lets traffic in on the container port `name` (`number`): a
    rule without ports, an entry without a port (all of them), the name, the number, or a
    range from port to endPort that holds it."""
    for p in rule.get("ports", [{}]):
        port = p.get("port")
        if port is None or port in (name, number) or \
                (isinstance(port, int) and port <= number <= p.get("endPort", port)):
            return True
    return False


def admin_problems(deployment, policies):
    """sluice's admin port (the container port named admin) reached from the cluster alone:
    a NetworkPolicy selects the pods, and each of its rules admitting that port names only
    pods or namespaces as peers (no ipBlock, no rule open to all)."""
    labels = deployment["spec"]["template"]["metadata"].get("labels", {})
    for c in deployment["spec"]["template"]["spec"]["containers"]:
        admin = [(p.get("name"), p["containerPort"]) for p in c.get("ports", [])
                 if p.get("name") == "admin"]
        if not admin:
            continue
        name, number = admin[0]
        for n in policies:
            if "matchExpressions" in n["spec"]["podSelector"]:
                yield (f"NetworkPolicy/{n['metadata']['name']}: podSelector.matchExpressions: "
                       "not evaluated here")
        mine = [n for n in policies if "Ingress" in n["spec"].get("policyTypes", ["Ingress"])
                and n["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()]
        if not mine:
            yield "no NetworkPolicy selects its pods: the admin port is open to all"
        for n in mine:
            for i, rule in enumerate(n["spec"].get("ingress", [])):
                peers = rule.get("from")
                if admits(rule, name, number) and \
                        (not peers or any("ipBlock" in p for p in peers)):
                    yield (f"NetworkPolicy/{n['metadata']['name']}: spec.ingress.{i} admits the "
                           "admin port from outside the cluster")


def check(objects, label, schema, configs_dir):
    problems, deployments, configs, policies = [], [], {}, []
    for f, doc in objects:
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
            configs[name] = doc["data"]["sluice.yaml"]
            if configs_dir:
                (Path(configs_dir) / f"{label}-{name}.yaml").write_text(configs[name])
        if kind == "apps/v1/Deployment":
            deployments.append((where, doc))
        if kind == "networking.k8s.io/v1/NetworkPolicy":
            policies.append(doc)
    for where, d in deployments:
        problems += [f"{where}: {p}" for p in pod_problems(d)]
        problems += [f"{where}: {p}" for p in config_problems(d, configs)]
        if any(m in configs for m in mounted_maps(d).values()):
            problems += [f"{where}: {p}" for p in admin_problems(d, policies)]
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", metavar="DIR")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    schema = json.loads(SCHEMA.read_text())
    problems = []

    files = [Path(p) for p in args.paths if not Path(p).is_dir()]
    sets = [(Path(p).name, Path(p)) for p in args.paths if Path(p).is_dir()]
    for label, path in sets + ([("files", files)] if files else []):
        try:
            objects = render(path) if label != "files" else [(f, d) for f in path for d in load(f)]
        except (Unsupported, OSError, KeyError, IndexError, ValueError, yaml.YAMLError) as e:
            problems.append(f"{path if label != 'files' else 'files'}: {e}")
            continue
        problems += check(objects, label, schema, args.configs)
    for p in problems:
        print(p)
    return 1 if problems else 0


sys.exit(main())
