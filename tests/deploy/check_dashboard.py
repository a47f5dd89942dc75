#!/usr/bin/python3
"""Checks a Grafana dashboard's PromQL against what sluice really exports:

    tests/deploy/check_dashboard.py DASHBOARD.json METRICS.txt

METRICS.txt is a /metrics page scraped from a running sluice. Every expression (each panel's
targets, in rows too, and each query variable) may name only metrics that have samples on
that page, and only label names that the metrics of that expression carry; any other word must be PromQL's own
(a function, an aggregation, a keyword). Grafana's variables ($route, $__rate_interval) and
quoted label values are left aside. The dashboard must also pick its Prometheus through a
datasource variable, which every panel, target and query variable uses. Prints one line per problem and exits
1 if there was one."""
import json
import re
import sys

PROMQL = {
    # aggregations and their modifiers
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without",
    # functions
    "rate", "irate", "increase", "delta", "idelta", "deriv", "histogram_quantile", "abs",
    "clamp_min", "clamp_max", "round", "ceil", "floor", "time", "vector", "scalar", "changes",
    "resets", "absent", "label_replace", "sort", "sort_desc", "avg_over_time", "max_over_time",
    "min_over_time", "sum_over_time", "count_over_time", "last_over_time",
    # binary operators and vector matching
    "and", "or", "unless", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    # Grafana's template queries
    "label_values",
}
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s")


def exported(page):
    """{metric name: {label names}} from the samples of a Prometheus text page."""
    metrics = {}
    for line in page.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', m.group(2) or "")
            metrics.setdefault(m.group(1), set()).update(labels)
    return metrics


def expressions(dashboard):
    """(where, expr) for every PromQL expression of the dashboard."""
    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dashboard.get("panels", [])):
        for t in p.get("targets", []):
            yield f"panel {p.get('title')!r} target {t.get('refId')}", t.get("expr", "")
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            yield f"variable {v.get('name')!r}", q.get("query", "") if isinstance(q, dict) else q


def words(expr):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    expr = re.sub(r"\$\{?\w+\}?", "", expr)         # Grafana's variables
    expr = re.sub(r"\[[^\]]*\]", "", expr)          # range selectors
    expr = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "", expr)
    return re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr)


def check_expr(expr, metrics):
    found = [w for w in words(expr) if w in metrics]
    if not found:
        yield "names no metric sluice exports"
    labels = set().union(*(metrics[w] for w in found)) if found else set()
    for w in dict.fromkeys(words(expr)):
        if w not in metrics and w not in labels and w not in PROMQL:
            kind = "metric" if w.startswith("sluice_") else "label or word"
            yield f"{w}: not a {kind} that {', '.join(sorted(set(found))) or 'sluice'} exports"


def check_datasources(dashboard):
    variables = {v.get("name") for v in dashboard.get("templating", {}).get("list", [])
                 if v.get("type") == "datasource" and v.get("query") == "prometheus"}
    if not variables:
        yield "no datasource variable of type prometheus"
    wanted = {"${" + v + "}" for v in variables} | {"$" + v for v in variables}
    users = [(f"panel {p.get('title')!r}", item) for p in dashboard.get("panels", [])
             if p.get("type") != "row" for item in [p] + p.get("targets", [])]
    users += [(f"variable {v.get('name')!r}", v)
              for v in dashboard.get("templating", {}).get("list", []) if v.get("type") == "query"]
    for where, item in users:
        uid = (item.get("datasource") or {}).get("uid")
        if uid not in wanted:
            yield f"{where}: datasource {uid!r} is not the variable's"


def main():
    dashboard = json.load(open(sys.argv[1]))
    metrics = exported(open(sys.argv[2]).read())
    problems = list(check_datasources(dashboard))
    count = 0
    for where, expr in expressions(dashboard):
        count += 1
        problems += [f"{where}: {p} ({expr})" for p in check_expr(expr, metrics)]
    if count == 0:
        problems.append("no PromQL expression")
    for p in problems:
        print(p)
    print(f"{count} expressions, {len(problems)} problems")
    return 1 if problems else 0


sys.exit(main())
