#!/usr/bin/env bash
# `make container-test`: builds docker/Dockerfile with podman (no Docker engine needed) and
# checks that the build stage stays small (build dependencies only), then the running image: a
# proxied answer, a 429, a non-root user, the HEALTHCHECK, and a `podman stop` that ends in
# exit code 0 within the drain timeout.
#
# The base image debian:bookworm-slim is made locally with debootstrap from the configured
# Debian mirror (no image registry is needed), cached in $WORK between runs.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/var/tmp/sluice-container}
ROOTFS=$WORK/rootfs
IMAGE=localhost/sluice:test
UPSTREAM_IMAGE=localhost/sluice-demo-upstream:test
BUILD_IMAGE=localhost/sluice-build:test
POD=sluice-ct-$$
mkdir -p "$WORK"

say() { printf '== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

# A loopback port no socket uses, below the kernel's ephemeral range (so that no outgoing
# connection can take it meanwhile), and not $1.
free_port() {
  local port low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  for _ in $(seq 100); do
    port=$((10000 + RANDOM % (low - 10000)))
    [ "$port" != "${1:-}" ] || continue
    ss -Htan "sport = :$port" | grep -q . || { echo "$port"; return; }
  done
  fail "no free port"
}

say "tools"
for tool in podman runc debootstrap docker-compose curl ss; do
  command -v "$tool" >/dev/null || missing=1
done
[ -z "${missing:-}" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc \
  debootstrap uidmap slirp4netns fuse-overlayfs docker-compose curl iproute2 >/dev/null

say "docker/compose.yaml follows the Compose file format"
docker-compose -f docker/compose.yaml config -q || fail "docker/compose.yaml is invalid"

# runc: crun refuses this kind of host's hybrid cgroup layout. Limits no higher than the
# host's hard limits (there is no CAP_SYS_RESOURCE to raise them).
cat >"$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=16384:16384"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$WORK/containers.conf" BUILDAH_ISOLATION=chroot

say "base image debian:bookworm-slim"
if ! podman image exists docker.io/library/debian:bookworm-slim; then
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  [ -x "$ROOTFS/bin/sh" ] || debootstrap --variant=minbase bookworm "$ROOTFS" "$mirror" >"$WORK/debootstrap.log"
  chroot "$ROOTFS" apt-get clean
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* \
         "$ROOTFS"/usr/share/locale/* "$ROOTFS"/etc/apt/sources.list "$ROOTFS"/var/cache/apt/*.bin
  grep -v '^ *#' /etc/apt/sources.list.d/debian.sources >"$ROOTFS/etc/apt/sources.list.d/debian.sources"
  # the apt and dpkg settings the official slim image ships
  printf 'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n' >"$ROOTFS/etc/apt/apt.conf.d/docker-clean"
  echo 'Acquire::Languages "none";' >"$ROOTFS/etc/apt/apt.conf.d/docker-no-languages"
  printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/locale/*\n' \
    >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker"
  tar -C "$ROOTFS" -c . | podman import -q --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim >/dev/null
fi

say "build"
# --format docker keeps HEALTHCHECK; --pull=never takes the local base image
podman build -q --pull=never --format docker -f docker/Dockerfile -t "$IMAGE" . >/dev/null
podman build -q --pull=never --format docker -f docker/Dockerfile --target demo-upstream \
  -t "$UPSTREAM_IMAGE" . >/dev/null
size=$(podman image inspect -f '{{.Size}}' "$IMAGE")
say "image size: $((size / 1000000)) MB"
# The build stage holds the build dependencies only (make deps): 355 MB; with the tests'
# toolchain it was 1.6 GB.
podman build -q --pull=never --format docker -f docker/Dockerfile --target build \
  -t "$BUILD_IMAGE" . >/dev/null
size=$(podman image inspect -f '{{.Size}}' "$BUILD_IMAGE")
say "build stage size: $((size / 1000000)) MB"
[ "$size" -lt 500000000 ] || fail "the build stage is past 500 MB: does it install the tests' tools?"

say "run"
conf=$(mktemp -d "$WORK/conf.XXXXXX")
cleanup() {
  podman pod rm -f -t 2 "$POD" >/dev/null 2>&1 || true
  rm -rf "$conf"
}
trap cleanup EXIT
cat >"$conf/sluice.yaml" <<YAML
server:
  listen: "0.0.0.0:8080"
  admin_listen: "0.0.0.0:9901"
  drain_timeout: 5s
routes:
  - name: api
    match: {path_prefix: /}
    upstream: "\${SLUICE_UPSTREAM}"
    limit: {algorithm: fixed_window, requests: 3, per: 1h}
YAML
chmod -R a+rX "$conf"
http_port=$(free_port)
admin_port=$(free_port "$http_port")
# A pod shares one network namespace: sluice reaches the upstream on its loopback.
podman pod create --name "$POD" -p "127.0.0.1:$http_port:8080" -p "127.0.0.1:$admin_port:9901" >/dev/null
podman run -d -q --pod "$POD" --name "$POD-upstream" "$UPSTREAM_IMAGE" test_upstream 127.0.0.1:9000 >/dev/null
# (Without systemd podman cannot time the HEALTHCHECK and says so; it is run by hand below.)
podman run -d -q --pod "$POD" --name "$POD-sluice" -e SLUICE_UPSTREAM=http://127.0.0.1:9000 \
  -v "$conf:/etc/sluice:ro" "$IMAGE" 2> >(grep -v 'systemd connection' >&2) >/dev/null

up=""
for _ in $(seq 50); do
  curl -fsS -o /dev/null -m 2 "http://127.0.0.1:$admin_port/readyz" 2>/dev/null && { up=1; break; }
  sleep 0.2
done
[ -n "$up" ] || { podman logs "$POD-sluice"; fail "sluice did not come up"; }

say "a proxied request"
body=$(curl -fsS -m 5 "http://127.0.0.1:$http_port/hello?x=1")
grep -q '^target /hello?x=1$' <<<"$body" || fail "not proxied: $body"

say "a 429 once the quota is spent"
codes=$(for _ in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$http_port/x"; done)
[ "$codes" = "200 200 429 " ] || fail "expected 200 200 429, got $codes"
headers=$(curl -s -D - -o /dev/null "http://127.0.0.1:$http_port/x")
grep -qi '^Retry-After: [1-9]' <<<"$headers" || fail "no Retry-After: $headers"

say "editing the mounted config on the host changes the limit live"
sed -i 's/requests: 3,/requests: 5,/' "$conf/sluice.yaml"
for _ in $(seq 50); do
  podman logs "$POD-sluice" 2>&1 | grep -q 'reloaded' && break
  sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/x")
[ "$code" = 200 ] || fail "after raising the limit: $code"

say "non-root"
user=$(podman inspect -f '{{.Config.User}}' "$POD-sluice")
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "runs as '$user'"
podman exec "$POD-sluice" id | grep -q 'uid=10001' || fail "uid is not 10001"

say "healthcheck"
[ -n "$(podman image inspect -f '{{.HealthCheck}}' "$IMAGE" | sed 's/<nil>//')" ] || fail "no HEALTHCHECK"
podman healthcheck run "$POD-sluice" >/dev/null || fail "healthcheck failed"

say "metrics"
curl -fsS "http://127.0.0.1:$admin_port/metrics" |
  grep -q '^sluice_requests_total{route="api",decision="denied"} 2$' || fail "metrics do not count"

say "podman stop drains and exits 0"
start=$(date +%s%N)
podman stop -t 15 "$POD-sluice" 2> >(grep -v 'systemd connection' >&2) >/dev/null
took_ms=$((($(date +%s%N) - start) / 1000000))
code=$(podman inspect -f '{{.State.ExitCode}}' "$POD-sluice")
[ "$code" = 0 ] || { podman logs "$POD-sluice" | tail; fail "exit code $code"; }
[ "$took_ms" -lt 6000 ] || fail "stop took ${took_ms} ms, past the 5 s drain timeout"
podman logs "$POD-sluice" 2>&1 | grep -q 'stopped' || fail "no graceful stop in the log"

echo "container-test: 9 passed, 0 failed (stop took ${took_ms} ms)"
