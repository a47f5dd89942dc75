#!/usr/bin/env bash
# `make run`: the demo upstream on 127.0.0.1:9000, and sluice in front of it with a fresh copy
# of config/sluice.yaml, build/demo/sluice.yaml, to edit while it runs (the example in the
# repository stays as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p build/demo
# The admin token of the quota endpoints (README, "When a client is at 429"): a fresh one for
# each run, in a file beside the copy, which names it.
(umask 077 && head -c 24 /dev/urandom | base64 | tr '+/' '-_' > build/demo/admin-token)
sed 's|^  # admin_token_file: .*|  admin_token_file: admin-token|' config/sluice.yaml \
  > build/demo/sluice.yaml

build/test_upstream 127.0.0.1:9000 >/dev/null &
upstream=$!
trap 'kill $upstream 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM

cat <<'TEXT'
sluice listens on http://127.0.0.1:8080, in front of a demo upstream on 127.0.0.1:9000
(which echoes each request back). In another terminal, try:

  curl -i http://127.0.0.1:8080/hello
  curl -si -H 'X-API-Key: demo' 'http://127.0.0.1:8080/api/items?[1-6]' | grep -E '^(HTTP|Retry-After|RateLimit:)'

The first is proxied; in the second, key "demo" spends its burst of 5 and the sixth gets 429.
Edit build/demo/sluice.yaml (a copy of config/sluice.yaml) and save: the limits change at
once. Metrics:
  curl -s http://127.0.0.1:9901/metrics | grep sluice_requests_total
A client's quota, read and reset through the admin port (its token is in build/demo/admin-token):
  build/sluice quota show -c build/demo/sluice.yaml --route api --key demo
Ctrl-C stops both.

TEXT
build/sluice -c build/demo/sluice.yaml
