/* The admin daemon's credential and its quota endpoints: GET and DELETE /quota, POST
 * /quota/grant (gateway/modules/limit/quota.h does the work). Design in server.h. */
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/log.h"
#include "gateway/common/respond.h"
#include "gateway/common/text.h"
#include "gateway/core/runtime.h"
#include "gateway/front/server_private.h"
#include "gateway/identity/keys.h"
#include "gateway/modules/limit/quota.h"

#define REALM "Bearer realm=\"sluice-admin\""

/* The parameters the quota endpoints read (quota.h); header:NAME and query:NAME besides. */
static const char *const known_args[] = {"route", "key", "consumer", "ip", "limit", "method", "n"};

enum MHD_Result gw_admin_respond(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, const char *authenticate)
{
    struct MHD_Response *response;
    enum MHD_Result ret;

    if (body == NULL)
        return MHD_NO;
    response = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", type);
    MHD_add_response_header(response, "Cache-Control", "no-store");
    if (authenticate != NULL)
        MHD_add_response_header(response, "WWW-Authenticate", authenticate);
    ret = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return ret;
}

static enum MHD_Result problem(struct MHD_Connection *c, unsigned status, const char *detail,
                               const char *authenticate)
{
    return gw_admin_respond(c, status, "application/problem+json",
                            gw_problem_json(status, detail, NULL, NULL), authenticate);
}

/* Whether `given` (the Authorization field, or NULL) is "Bearer TOKEN". The two tokens are
 * compared by their BLAKE2b digests, in constant time (sodium_memcmp): neither how long the
 * comparison takes nor where it stops tells how much of a guess is right, or its length. */
static bool token_matches(const char *given, const char *token)
{
    unsigned char want[32], got[32];
    const char *credential;

    if (given == NULL || strncasecmp(given, "Bearer ", 7) != 0)
        return false;
    for (credential = given + 7; *credential == ' '; credential++)
        ;
    crypto_generichash(want, sizeof want, (const unsigned char *)token, strlen(token), NULL, 0);
    crypto_generichash(got, sizeof got, (const unsigned char *)credential, strlen(credential), NULL,
                       0);
    return sodium_memcmp(want, got, sizeof want) == 0;
}

enum gw_admin_auth gw_admin_check(struct gw_server *s, struct MHD_Connection *c,
                                  const struct config_admin *admin)
{
    const char *given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

    if (admin->token != NULL && token_matches(given, admin->token))
        return GW_ADMIN_AUTHORIZED;
    atomic_fetch_add(&s->admin_counts.refused, 1);
    return given == NULL ? GW_ADMIN_NO_CREDENTIAL : GW_ADMIN_BAD_CREDENTIAL;
}

enum MHD_Result gw_admin_refuse(struct MHD_Connection *c, enum gw_admin_auth auth)
{
    if (auth == GW_ADMIN_NO_CREDENTIAL)
        return problem(c, MHD_HTTP_UNAUTHORIZED,
                       "this endpoint needs the admin token: Authorization: Bearer TOKEN", REALM);
    return problem(c, MHD_HTTP_UNAUTHORIZED, "the admin token is not the one configured",
                   REALM ", error=\"invalid_token\"");
}

/* Each parameter given once, and each one the endpoints know: where two readings could
 * differ (key=a&key=b, a %00 that would cut a value short), or a name is misspelt (limt=), the
 * call is refused, not guessed. No key a request can present holds a control character. */
struct args_check {
    const char *bad;
    char seen[16][GW_QUOTA_PARAM_LEN]; /* the names so far: 7 known_args and a few keys */
    size_t n;
};

/* How many of the first `len` bytes of `text` come before a control character. */
static size_t printable_length(const char *text, size_t len)
{
    size_t n = 0;

    while (n < len && (unsigned char)text[n] >= 0x20 && text[n] != 0x7f)
        n++;
    return n;
}

static bool is_clean(const char *text, size_t len)
{
    return printable_length(text, len) == len;
}

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    struct args_check *check = cls;
    bool known = strncmp(key, "header:", 7) == 0 || strncmp(key, "query:", 6) == 0;

    (void)kind;
    for (size_t i = 0; i < sizeof known_args / sizeof known_args[0]; i++)
        known |= strcmp(key, known_args[i]) == 0;
    /* Without case: libmicrohttpd's look-up ignores it, so Key= and key= are one name. */
    for (size_t i = 0; i < check->n && known; i++)
        if (strcasecmp(check->seen[i], key) == 0)
            known = false;
    if (!known || check->n == 16 || key_size >= sizeof check->seen[0] || !is_clean(key, key_size) ||
        (value != NULL && !is_clean(value, value_size))) {
        check->bad = key;
        return MHD_NO;
    }
    snprintf(check->seen[check->n++], sizeof check->seen[0], "%s", key);
    return MHD_YES;
}

static const char *arg_of(void *cls, const char *name)
{
    return MHD_lookup_connection_value(cls, MHD_GET_ARGUMENT_KIND, name);
}

/* "from=ADDRESS operator=NAME" for the log line: who made the change. The operator is what
 * the caller says of itself (X-Sluice-Operator, as `sluice quota` sends it), letters, digits
 * and -._@ only, cut at 64. */
static void who(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const char *op = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Sluice-Operator");
    char address[64] = "-", name[65] = "-";
    struct gw_text t = gw_text_on(address, sizeof address - 1);
    struct gw_addr peer;

    if (info != NULL && gw_addr_from_sockaddr(info->client_addr, &peer) == 0) {
        gw_text_address(&t, peer.family, peer.bytes);
        gw_text_finish(&t);
    }
    if (op != NULL && op[0] != '\0') {
        size_t n = strspn(op, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._@");

        snprintf(name, sizeof name, "%.*s", (int)(n < 64 ? n : 64), n > 0 ? op : "?");
    }
    snprintf(out, len, "from=%s operator=%s", address, name);
}

enum MHD_Result gw_admin_quota(struct gw_server *s, struct MHD_Connection *c, const char *url,
                               const char *method, struct gw_runtime *rt)
{
    struct args_check check = {0};
    enum gw_quota_op op;
    struct gw_quota_done done;
    unsigned status;
    char *body, by[160];
    const char *accept;
    bool is_problem, text;

    if (strcmp(url, "/quota/grant") == 0 && strcmp(method, "POST") == 0)
        op = GW_QUOTA_GRANT;
    else if (strcmp(url, "/quota") == 0 && strcmp(method, "DELETE") == 0)
        op = GW_QUOTA_RESET;
    else if (strcmp(url, "/quota") == 0 && strcmp(method, "GET") == 0)
        op = GW_QUOTA_SHOW;
    else
        return problem(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or DELETE /quota, or POST /quota/grant",
                       NULL);
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, check_arg, &check);
    if (check.bad != NULL) {
        char detail[160];

        /* The name up to 40 bytes, cut at a control character. */
        snprintf(detail, sizeof detail,
                 "the parameter \"%.*s\" is unknown, given twice, or holds a control character",
                 (int)printable_length(check.bad, 40), check.bad);
        return problem(c, MHD_HTTP_BAD_REQUEST, detail, NULL);
    }
    accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    text = accept != NULL && strncasecmp(accept, "text/plain", 10) == 0;
    gw_quota_run(rt, op, arg_of, c, text, &status, &body, &is_problem, &done);
    if (done.changed) {
        atomic_fetch_add(op == GW_QUOTA_RESET ? &s->admin_counts.resets : &s->admin_counts.grants,
                         1);
        who(c, by, sizeof by);
        gw_info("quota %s: route=%s limits=%s client=%s %s", gw_quota_action(op), done.route,
                done.limits, done.client, by);
    }
    return gw_admin_respond(c, status,
                            text         ? "text/plain; charset=utf-8"
                            : is_problem ? "application/problem+json"
                                         : "application/json",
                            body, NULL);
}
