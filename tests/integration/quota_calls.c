/* What the suites of the quota endpoints share; see quota_calls.h. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/quota_calls.h"

const char quota_memory_config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:%2$u\", admin_token: \"" TOKEN
    "\"}\n" ROUTES;

long admin_call(const struct proc *gw, const char *method, const char *target,
                const char *const *headers, struct reply *r)
{
    http(gw->admin_port, method, target, headers, NULL, r);
    return r->status;
}

long as_operator(const struct proc *gw, const char *method, const char *target, struct reply *r)
{
    const char *const headers[] = {AUTH, OPERATOR, NULL};

    return admin_call(gw, method, target, headers, r);
}

bool json_at(const char *json, const char *limit, const char *field, char *out, size_t cap)
{
    json_object *root = json ? json_tokener_parse(json) : NULL, *limits, *value;
    json_object *object = limit == NULL ? root : NULL;
    bool found = false;

    if (limit != NULL && json_object_object_get_ex(root, "limits", &limits))
        for (size_t i = 0; i < json_object_array_length(limits); i++) {
            json_object *item = json_object_array_get_idx(limits, i), *name;

            if (json_object_object_get_ex(item, "name", &name) &&
                strcmp(json_object_get_string(name), limit) == 0)
                object = item;
        }
    if (object != NULL && json_object_object_get_ex(object, field, &value)) {
        snprintf(out, cap, "%s", json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN));
        found = true;
    }
    json_object_put(root);
    return found;
}

long long limit_number(const char *json, const char *limit, const char *field)
{
    char text[64], *end;
    long long n;

    if (!json_at(json, limit, field, text, sizeof text))
        return -1;
    n = strtoll(text, &end, 10);
    return end != text && *end == '\0' ? n : -1;
}

bool json_is(const char *json, const char *limit, const char *field, const char *want)
{
    char text[256];

    return json_at(json, limit, field, text, sizeof text) && strcmp(text, want) == 0;
}

long long remaining(const struct proc *gw, const char *route, const char *key, const char *limit)
{
    char target[256];
    struct reply r;
    long long n = -1;

    snprintf(target, sizeof target, "/quota?route=%s&key=%s", route, key);
    if (as_operator(gw, "GET", target, &r) == 200)
        n = limit_number(r.body, limit, "remaining");
    reply_free(&r);
    return n;
}

int send_requests(const unsigned *ports, int n_ports, const char *path, const char *key, int n)
{
    int passed = 0;

    for (int i = 0; i < n; i++)
        passed += get_status(ports[i % n_ports], path, key) == 200;
    return passed;
}

void expect_passes(unsigned port, const char *path, const char *key, int n, const char *label)
{
    long last = 0;
    int passed = 0;

    for (int i = 0; i <= n; i++) {
        last = get_status(port, path, key);
        if (last != 200)
            break;
        passed++;
    }
    check_case(passed == n && last == 429, label, "%d passed, then %ld (expected %d, then 429)",
               passed, last, n);
}
