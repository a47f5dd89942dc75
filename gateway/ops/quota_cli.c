/* `sluice quota`; design in quota_cli.h. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "gateway/ops/quota_cli.h"
#include "gateway/upstream/fetch.h"

#define MAX_PARAMS 16
#define MAX_ANSWER (1024 * 1024)

enum exit_code { DONE, NO_CONFIG, USAGE, REFUSED, UNAUTHORIZED, UNREACHABLE };

static const char quota_usage[] =
    "usage: sluice quota show|reset|grant -c FILE --route R (--key K | --consumer C)\n"
    "                    [--ip A] [--limit-key SOURCE=VALUE]... [--limit L] [--n N]\n"
    "                    [--method M] [--format table|json]\n";

/* The call as the command line gives it: the action, and the query's parameters. */
struct call {
    const char *action, *config, *format;
    const char *names[MAX_PARAMS], *values[MAX_PARAMS];
    size_t n;
};

int gw_admin_url(const struct config *config, const char *path, char *out, size_t len)
{
    const char *host = config->server.admin_listen.host;

    if (host == NULL)
        return -1;
    if (strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        host = "::1";
    snprintf(out, len, "http://%s%s%s:%u%s", strchr(host, ':') ? "[" : "", host,
             strchr(host, ':') ? "]" : "", config->server.admin_listen.port, path);
    return 0;
}

static int add(struct call *call, const char *name, const char *value)
{
    if (call->n == MAX_PARAMS)
        return -1;
    call->names[call->n] = name;
    call->values[call->n++] = value;
    return 0;
}

/* --limit-key SOURCE=VALUE: a parameter named as the key source (header:x-user=bob). */
static int add_limit_key(struct call *call, char *text)
{
    char *eq = strchr(text, '=');

    if (eq == NULL || (strncmp(text, "header:", 7) != 0 && strncmp(text, "query:", 6) != 0))
        return -1;
    *eq = '\0';
    return add(call, text, eq + 1);
}

/* The options after the action into `call`: 0; 1 for --help; -1 for a bad command line. */
static int read_options(int argc, char **argv, struct call *call)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'}, {"route", required_argument, NULL, 'r'},
        {"key", required_argument, NULL, 'k'},    {"consumer", required_argument, NULL, 'C'},
        {"ip", required_argument, NULL, 'i'},     {"limit-key", required_argument, NULL, 'K'},
        {"limit", required_argument, NULL, 'l'},  {"n", required_argument, NULL, 'n'},
        {"method", required_argument, NULL, 'm'}, {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    static const char *const names[] = {
        ['r'] = "route", ['k'] = "key", ['C'] = "consumer", ['i'] = "ip",
        ['l'] = "limit", ['n'] = "n",   ['m'] = "method"};
    int opt;

    optind = 2; /* after "quota" and the action */
    while ((opt = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
        if (opt == 'h')
            return 1;
        if (opt == 'c')
            call->config = optarg;
        else if (opt == 'f' && (strcmp(optarg, "table") == 0 || strcmp(optarg, "json") == 0))
            call->format = optarg;
        else if (opt == 'K' && add_limit_key(call, optarg) == 0)
            continue;
        else if (opt > 0 && opt < (int)(sizeof names / sizeof names[0]) && names[opt] != NULL &&
                 add(call, names[opt], optarg) == 0)
            continue;
        else
            return -1;
    }
    return optind == argc && call->config != NULL ? 0 : -1;
}

/* The URL of the call: the admin address, the endpoint, each parameter %-escaped. */
static char *url_of(const struct config *config, const struct call *call)
{
    const char *path = strcmp(call->action, "grant") == 0 ? "/quota/grant" : "/quota";
    char base[300], *text = NULL;
    size_t len = 0;
    FILE *out;

    if (gw_admin_url(config, path, base, sizeof base) != 0 ||
        (out = open_memstream(&text, &len)) == NULL)
        return NULL;
    fputs(base, out);
    for (size_t i = 0; i < call->n; i++) {
        char *name = gw_fetch_escape(call->names[i]), *value = gw_fetch_escape(call->values[i]);

        if (name != NULL && value != NULL)
            fprintf(out, "%c%s=%s", i == 0 ? '?' : '&', name, value);
        free(name);
        free(value);
    }
    fclose(out);
    return text;
}

/* The exit status for the gateway's answer `status`. */
static int exit_for(long status)
{
    if (status >= 200 && status < 300)
        return DONE;
    if (status == 401)
        return UNAUTHORIZED;
    if (status >= 400 && status < 500)
        return REFUSED;
    return UNREACHABLE;
}

/* Sends the call with the config's token; prints the answer. */
static int send_call(const struct config *config, const struct call *call)
{
    static const char *const methods[] = {"GET", "DELETE", "POST"};
    const char *why, *user = getenv("USER");
    int action = strcmp(call->action, "show") == 0 ? 0 : strcmp(call->action, "reset") == 0 ? 1 : 2;
    char authorization[4200], accept[40], operator[100];
    const char *headers[] = {authorization, accept, operator, NULL };
    struct gw_fetch_answer answer = {.max_body = MAX_ANSWER};
    bool text = call->format == NULL || strcmp(call->format, "table") == 0;
    char *url = url_of(config, call);
    int rc;

    if (url == NULL) {
        fputs("sluice quota: out of memory\n", stderr);
        return UNREACHABLE;
    }
    snprintf(authorization, sizeof authorization, "Authorization: Bearer %s",
             config->server.admin.token);
    snprintf(accept, sizeof accept, "Accept: %s", text ? "text/plain" : "application/json");
    snprintf(operator, sizeof operator, "X-Sluice-Operator: %.64s", user ? user : "-");
    rc = gw_fetch(&(struct gw_fetch_ask){methods[action], url, headers, 5000}, &answer, &why);
    if (rc != 0) {
        fprintf(stderr, "sluice quota: cannot reach the admin listener on %s:%u: %s\n",
                config->server.admin_listen.host, config->server.admin_listen.port,
                why ? why : "out of memory");
        rc = UNREACHABLE;
    } else {
        rc = exit_for(answer.status);
        if (rc == DONE)
            fputs(answer.body != NULL ? answer.body : "", stdout);
        else if (rc == UNAUTHORIZED)
            fprintf(stderr, "sluice quota: the gateway refused the admin token of %s\n",
                    call->config);
        else if (text)
            fprintf(stderr, "sluice quota: %ld: %s", answer.status,
                    answer.body != NULL ? answer.body : "\n");
        else
            fprintf(stderr, "%s\n", answer.body != NULL ? answer.body : "");
    }
    free(answer.body);
    free(url);
    return rc;
}

int gw_quota_main(int argc, char **argv)
{
    struct call call = {0};
    struct config *config;
    char *errors = NULL;
    int rc;

    if (argc < 2 || (strcmp(argv[1], "show") != 0 && strcmp(argv[1], "reset") != 0 &&
                     strcmp(argv[1], "grant") != 0)) {
        fputs(quota_usage, argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        return argc >= 2 && strcmp(argv[1], "--help") == 0 ? DONE : USAGE;
    }
    call.action = argv[1];
    rc = read_options(argc, argv, &call);
    if (rc != 0) {
        fputs(quota_usage, rc > 0 ? stdout : stderr);
        return rc > 0 ? DONE : USAGE;
    }
    config = config_load(call.config, &errors);
    if (config == NULL) {
        fprintf(stderr, "sluice quota: cannot use %s:\n%s", call.config, errors);
        free(errors);
        return NO_CONFIG;
    }
    if (config->server.admin_listen.host == NULL || config->server.admin.token == NULL) {
        fprintf(stderr,
                "sluice quota: %s sets no server.admin_listen and admin token (%s), "
                "so there is no quota endpoint to ask\n",
                call.config,
                config->server.admin.token == NULL ? "admin_token or "
                                                     "admin_token_file"
                                                   : "admin_listen");
        config_free(config);
        return NO_CONFIG;
    }
    if (!config->server.admin.quota) {
        fprintf(stderr, "sluice quota: %s turns the quota endpoints off (admin_quota: false)\n",
                call.config);
        config_free(config);
        return NO_CONFIG;
    }
    rc = send_call(config, &call);
    config_free(config);
    return rc;
}
