/* What deploy/ ships, checked offline: the Kubernetes manifests, the base and the Redis
 * overlay as rendered, against the API's schemas (tests/deploy/check_manifests.py and its
 * vendored k8s-schema.json) and against the configs their ConfigMaps hold (grace period,
 * replicas), those configs against sluice --check, and the Grafana dashboard's PromQL against a
 * /metrics page scraped here from a running sluice (tests/deploy/check_dashboard.py), so
 * that neither can drift from the code. Each checker is also shown a broken copy, and must
 * refuse it, saying what is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define MANIFESTS       "deploy/kubernetes"
#define DASHBOARD       "deploy/grafana/sluice.json"
#define CHECK_MANIFESTS "/usr/bin/python3 tests/deploy/check_manifests.py"
#define CHECK_DASHBOARD "/usr/bin/python3 tests/deploy/check_dashboard.py"

static struct redis redis;
static char dir[] = "/tmp/sluice-deploy-XXXXXX";

/* A store route and a memory route with limits, an upstream that is down: every family the
 * dashboard reads has samples. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  redis: {address: \"127.0.0.1:%2$u\"}\n"
    "upstreams:\n  app: \"http://127.0.0.1:%1$u\"\n"
    "routes:\n"
    "  - name: shared\n    match: {path_prefix: /shared/}\n"
    "    upstream: app\n"
    "    limit: {name: burst, algorithm: fixed_window, requests: 1, per: 1h}\n"
    "  - name: local\n    match: {path_prefix: /local/}\n    store: memory\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    limit: {name: hourly, algorithm: sliding_window_counter, requests: 1, per: 1h}\n"
    "  - name: down\n    match: {path_prefix: /down/}\n    upstream: \"http://127.0.0.1:1\"\n";

static int init(void)
{
    return mkdtemp(dir) != NULL && start_redis(&redis) == 0 ? 0 : -1;
}

static int clean(void)
{
    char out[256];

    stop_redis(&redis);
    snprintf(out, sizeof out, "rm -rf %s", dir);
    return system(out) == 0 ? 0 : -1;
}

/* `text` with the first `from` replaced by `to`, or NULL when it is NULL or holds no `from` (then
 * the broken copy would not be broken, and the case fails). The caller frees it. */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = text != NULL ? strstr(text, from) : NULL;
    char *copy;
    size_t n;

    if (at == NULL)
        return NULL;
    n = strlen(text) - strlen(from) + strlen(to) + 1;
    copy = malloc(n);
    snprintf(copy, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return copy;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* Runs `checker` on `original` with `from` replaced by `to` (written to DIR/`name`; when
 * `name` is FOLDER/FILE, the checker is run on DIR/FOLDER) and `args`, and expects exit code 1
 * and `expected` in what it printed. */
static void refuses(const char *checker, const char *original, const char *name, const char *args,
                    const char *from, const char *to, const char *expected)
{
    char *text = read_file(original), *broken = replaced(text, from, to);
    char path[128], command[512], out[8192];
    int code;

    check_case(broken != NULL, name, "%s holds no %s to break", original, from);
    if (broken != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        write_text(path, broken);
        if (strchr(name, '/') != NULL)
            *strrchr(path, '/') = '\0';
        snprintf(command, sizeof command, "%s %s %s", checker, path, args);
        code = run_command(command, out, sizeof out);
        check_case(code == 1 && strstr(out, expected) != NULL, name,
                   "exit %d, wanted 1 saying \"%s\":\n%s", code, expected, out);
    }
    free(broken);
    free(text);
}

static void test_manifests_validate(void)
{
    static const char *const configs[] = {"base-sluice-config.yaml", "redis-sluice-config.yaml"};
    char command[512], out[8192];
    int code;

    snprintf(command, sizeof command, "%s --configs %s " MANIFESTS "/base " MANIFESTS "/redis",
             CHECK_MANIFESTS, dir);
    code = run_command(command, out, sizeof out);
    check_case(code == 0 && out[0] == '\0', "manifests", "exit %d:\n%s", code, out);

    /* The ConfigMaps' sluice.yaml, as the pods will read it (with the upstream the Deployment
     * would give it on loopback here, so that --check resolves no name). */
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        snprintf(command, sizeof command,
                 "SLUICE_UPSTREAM=http://127.0.0.1:%u REDIS_PASSWORD=x %s --check -c %s/%s",
                 upstream.port, sluice_binary(), dir, configs[i]);
        code = run_command(command, out, sizeof out);
        check_case(code == 0 && strstr(out, ": OK, 1 routes") != NULL, configs[i], "exit %d:\n%s",
                   code, out);
    }
}

static void test_broken_manifests_refused(void)
{
    static const char deployment[] = MANIFESTS "/base/deployment.yaml";

    refuses(CHECK_MANIFESTS, deployment, "misspelled.yaml", "",
            "readinessProbe:", "readynessProbe:", "('readynessProbe' was unexpected)");
    refuses(CHECK_MANIFESTS, deployment, "wrong-type.yaml", "", "containerPort: 8080",
            "containerPort: \"8080\"",
            "spec.template.spec.containers.0.ports.0.containerPort: '8080' is not of type "
            "'integer'");
    refuses(CHECK_MANIFESTS, deployment, "no-name.yaml", "", "- name: sluice\n",
            "- imagePullPolicy: Always\n",
            "spec.template.spec.containers.0: 'name' is a required property");
    refuses(CHECK_MANIFESTS, deployment, "old-api.yaml", "", "apiVersion: apps/v1",
            "apiVersion: extensions/v1beta1",
            "apiVersion/kind extensions/v1beta1/Deployment is not one of");
    /* A grace period the preStop sleep and the drain do not fit in. */
    refuses(CHECK_MANIFESTS, deployment, "short-grace.yaml", MANIFESTS "/base/configmap.yaml",
            "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 25",
            "terminationGracePeriodSeconds: 25 s is not above preStop's 10 s plus "
            "server.drain_timeout (20 s)");
    /* One replica is an outage on every node drain. */
    refuses(CHECK_MANIFESTS, deployment, "one-replica.yaml", MANIFESTS "/base/configmap.yaml",
            "replicas: 2", "replicas: 1",
            "spec.replicas: 1: a node drain or a crash leaves no gateway");
    /* An image that moves under the same name, a token the pod never uses. */
    refuses(CHECK_MANIFESTS, deployment, "latest.yaml", "", "image: sluice:0.1.0",
            "image: sluice:latest", "image: sluice:latest is not pinned by a tag");
    refuses(CHECK_MANIFESTS, deployment, "untagged.yaml", "", "image: sluice:0.1.0",
            "image: registry.example:5000/sluice", "is not pinned by a tag");
    refuses(CHECK_MANIFESTS, deployment, "token.yaml", "", "automountServiceAccountToken: false",
            "automountServiceAccountToken: true", "automountServiceAccountToken: not false");
    /* The admin port open beyond the cluster, or no policy over the pods at all. */
    refuses(CHECK_MANIFESTS, MANIFESTS "/base/networkpolicy.yaml", "open-admin.yaml",
            MANIFESTS "/base/deployment.yaml " MANIFESTS "/base/configmap.yaml",
            "        - namespaceSelector: {}", "        - ipBlock: {cidr: 0.0.0.0/0}",
            "NetworkPolicy/sluice: spec.ingress.1 admits the admin port from outside the cluster");
    refuses(CHECK_MANIFESTS, MANIFESTS "/base/networkpolicy.yaml", "all-ports.yaml",
            MANIFESTS "/base/deployment.yaml " MANIFESTS "/base/configmap.yaml",
            "        - port: http", "        - protocol: TCP",
            "NetworkPolicy/sluice: spec.ingress.0 admits the admin port from outside the cluster");
    refuses(CHECK_MANIFESTS, MANIFESTS "/base/networkpolicy.yaml", "range.yaml",
            MANIFESTS "/base/deployment.yaml " MANIFESTS "/base/configmap.yaml",
            "        - port: http", "        - {port: 8000, endPort: 9999}",
            "NetworkPolicy/sluice: spec.ingress.0 admits the admin port from outside the cluster");
    refuses(CHECK_MANIFESTS, MANIFESTS "/base/networkpolicy.yaml", "other-pods.yaml",
            MANIFESTS "/base/deployment.yaml " MANIFESTS "/base/configmap.yaml",
            "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: sluice",
            "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: web",
            "no NetworkPolicy selects its pods: the admin port is open to all");
}

/* The Deployment runs the image of this build, by its tag. */
static void test_image_is_this_release(void)
{
    char out[128], want[160], *text = read_file(MANIFESTS "/base/deployment.yaml");

    CU_ASSERT_EQUAL_FATAL(run_sluice("--version", out, sizeof out), 0);
    out[strcspn(out, "\n")] = '\0';
    CU_ASSERT_PTR_NOT_NULL_FATAL(strchr(out, ' '));
    snprintf(want, sizeof want, "image: sluice:%s\n", strchr(out, ' ') + 1);
    check_case(text != NULL && strstr(text, want) != NULL, "image tag",
               "deployment.yaml does not run %s", want);
    free(text);
}

/* The Redis overlay, copied with its base named by an absolute path. */
static void test_broken_overlay_refused(void)
{
    char pristine[128], command[1024], out[8192], cwd[512];
    char *text = read_file(MANIFESTS "/redis/kustomization.yaml"), *rebased;
    int code;

    CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(out, sizeof out, "  - %s/" MANIFESTS "/base\n", cwd);
    rebased = replaced(text, "  - ../base\n", out);
    CU_ASSERT_FATAL(rebased != NULL);
    snprintf(pristine, sizeof pristine, "%s/overlay.kustomization.yaml", dir);
    write_text(pristine, rebased);
    snprintf(command, sizeof command,
             "mkdir -p %1$s/overlay && cp " MANIFESTS "/redis/*.yaml %1$s/overlay/ && "
             "cp %2$s %1$s/overlay/kustomization.yaml && %3$s %1$s/overlay",
             dir, pristine, CHECK_MANIFESTS);
    code = run_command(command, out, sizeof out);
    check_case(code == 0 && out[0] == '\0', "overlay copy", "exit %d:\n%s", code, out);

    refuses(CHECK_MANIFESTS, pristine, "overlay/kustomization.yaml", "", "value: 3", "value: 4",
            "spec.replicas: 4, but its sluice.yaml says limiter.replicas: 3");
    refuses(CHECK_MANIFESTS, pristine, "overlay/kustomization.yaml", "",
            "resources:", "namePrefix: edge-\nresources:", "namePrefix: not rendered here");
    refuses(CHECK_MANIFESTS, pristine, "overlay/kustomization.yaml", "", "op: remove", "op: move",
            "move /spec/maxUnavailable: not applied here");
    /* What a patch makes is validated as the files are. */
    refuses(CHECK_MANIFESTS, pristine, "overlay/kustomization.yaml", "", "path: /spec/minAvailable",
            "path: /spec/minAvailabel",
            "spec: Additional properties are not allowed "
            "('minAvailabel' was unexpected)");
    free(rebased);
    free(text);
}

static void test_dashboard_names_what_metrics_export(void)
{
    struct proc gw;
    struct reply r;
    char metrics[128], command[512], out[8192];
    int code;

    CU_ASSERT_FATAL(start_sluice(&gw, config, upstream.port, redis.port) == 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/shared/a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/shared/a", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/local/a", NULL), 200);
    CU_ASSERT_EQUAL(get_status(gw.port, "/local/a", NULL), 429);
    CU_ASSERT_EQUAL(get_status(gw.port, "/down/a", NULL), 502);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_limit_denials_total{route=\"local\",limit=\"hourly\"}"), 1);
    http(gw.admin_port, "GET", "/metrics", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    snprintf(metrics, sizeof metrics, "%s/metrics.txt", dir);
    write_text(metrics, r.body != NULL ? r.body : "");
    reply_free(&r);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    snprintf(command, sizeof command, "%s %s %s", CHECK_DASHBOARD, DASHBOARD, metrics);
    code = run_command(command, out, sizeof out);
    check_case(code == 0 && strstr(out, " expressions, 0 problems") != NULL, "dashboard",
               "exit %d:\n%s", code, out);

    refuses(CHECK_DASHBOARD, DASHBOARD, "misspelled-metric.json", metrics,
            "sluice_limit_denials_total{", "sluice_limit_denial_total{",
            "sluice_limit_denial_total: not a metric that sluice exports");
    refuses(CHECK_DASHBOARD, DASHBOARD, "foreign-label.json", metrics, "by (route, limit)",
            "by (route, status)",
            "status: not a label or word that sluice_limit_denials_total exports");
    refuses(CHECK_DASHBOARD, DASHBOARD, "fixed-datasource.json", metrics,
            "\"uid\": \"${datasource}\"", "\"uid\": \"prometheus-prod\"",
            "datasource 'prometheus-prod' is not the variable's");
}

void register_deploy_tests(void)
{
    CU_pSuite s = add_suite_with("deploy", init, clean);

    add_test(s, "the Kubernetes manifests match the API's schema", test_manifests_validate);
    add_test(s, "the Deployment runs this release's image", test_image_is_this_release);
    add_test(s,
             "a misspelled field, a wrong type, a missing field, one replica, an unpinned "
             "image, a token, an open admin port are refused",
             test_broken_manifests_refused);
    add_test(s, "an overlay whose replicas disagree with its config is refused",
             test_broken_overlay_refused);
    add_test(s, "the dashboard names only metrics and labels sluice exports",
             test_dashboard_names_what_metrics_export);
}
