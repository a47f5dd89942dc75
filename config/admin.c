/* server.admin_token, admin_token_file, admin_quota and metrics_need_token: the admin
 * listener's credential and what needs it; see config.h ("struct config_admin"). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 4096

/* RFC 6750's b64token: letters, digits, "-._~+/", then "=" padding only. */
static bool is_bearer_token(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");

    return n > 0 && s[n + strspn(s + n, "=")] == '\0';
}

/* Takes `text` as the token, or reports why it cannot be one. */
static void take_token(struct loader *ld, yaml_node_t *node, const char *key, const char *text,
                       struct config_admin *admin)
{
    size_t len = strlen(text);

    if (len < TOKEN_MIN || len > TOKEN_MAX) {
        config_error(ld, node, "%s: the token must be %d to %d characters (this one has %zu)", key,
                     TOKEN_MIN, TOKEN_MAX, len);
        return;
    }
    if (!is_bearer_token(text)) {
        config_error(ld, node,
                     "%s: the token may hold only letters, digits and -._~+/ (then '=' "
                     "padding), as a bearer token does",
                     key);
        return;
    }
    free(admin->token);
    admin->token = strdup(text);
    if (admin->token == NULL)
        config_error(ld, node, "%s: out of memory", key);
}

void config_parse_admin_token(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_admin *admin = &((struct config *)object)->server.admin;
    const char *text = config_scalar(ld, node, "admin_token");

    if (text != NULL)
        take_token(ld, node, "admin_token", text, admin);
}

/* The file's first line, trailing white space dropped, into `buf`; 0, or -1 with errno. */
static int read_token_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t len;

    if (f == NULL)
        return -1;
    len = fread(buf, 1, size - 1, f);
    if (ferror(f)) {
        fclose(f);
        errno = EIO;
        return -1;
    }
    fclose(f);
    buf[len] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    for (len = strlen(buf); len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t'); len--)
        buf[len - 1] = '\0';
    return 0;
}

void config_parse_admin_token_file(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_admin *admin = &((struct config *)object)->server.admin;
    char *path = NULL, *buf = malloc(TOKEN_MAX + 2);

    config_relative_path(ld, node, "admin_token_file", &path);
    if (path == NULL || buf == NULL) {
        if (path != NULL)
            config_error(ld, node, "admin_token_file: out of memory");
    } else if (read_token_file(path, buf, TOKEN_MAX + 2) != 0) {
        config_error(ld, node, "admin_token_file: cannot read %s: %s", path, strerror(errno));
    } else {
        take_token(ld, node, "admin_token_file", buf, admin);
        free(admin->token_file);
        admin->token_file = path; /* watched, so that a rotated token takes at once */
        path = NULL;
    }
    if (buf != NULL)
        explicit_bzero(buf, TOKEN_MAX + 2);
    free(buf);
    free(path);
}

/* Whether `host` is a loopback address: 127.0.0.0/8, ::1 or localhost. */
static bool is_loopback(const char *host)
{
    struct in_addr v4;
    struct in6_addr v6;

    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

void config_check_admin(struct loader *ld, yaml_node_t *server, struct config *config)
{
    struct config_admin *admin = &config->server.admin;
    const char *host = config->server.admin_listen.host;
    yaml_node_t *token_file = config_find_value(ld, server, "admin_token_file");
    yaml_node_t *quota = config_find_value(ld, server, "admin_quota");

    if (token_file != NULL && config_find_value(ld, server, "admin_token") != NULL)
        config_error(ld, token_file,
                     "admin_token_file: give the token once, in admin_token or in a file");
    if (admin->metrics_need_token && admin->token == NULL && ld->n_errors == 0)
        config_error(ld, config_find_value(ld, server, "metrics_need_token"),
                     "metrics_need_token: needs server.admin_token or admin_token_file");
    if (admin->token != NULL && host != NULL && !is_loopback(host) && ld->n_errors == 0)
        config_warn_at(ld, config_value_or_self(ld, server, "admin_listen")->start_mark,
                       "the admin token travels in clear text to %s (the admin port is plain "
                       "HTTP): keep it on a network only operators reach",
                       host);
    if (quota == NULL) {
        admin->quota = admin->token != NULL; /* on with a token unless written off */
        return;
    }
    /* Written on without a token: off (404) on a loopback address, which only this host
     * reaches; refused anywhere else, where an operator surely meant it to be reachable. */
    if (admin->quota && admin->token == NULL && host != NULL && !is_loopback(host) &&
        ld->n_errors == 0)
        config_error(ld, quota,
                     "admin_quota: the quota endpoints on %s (not a loopback address) need "
                     "server.admin_token or admin_token_file",
                     host);
    else if (admin->quota && admin->token == NULL && ld->n_errors == 0)
        config_warn_at(ld, quota->start_mark,
                       "admin_quota: true, but no admin token is set: the quota endpoints stay "
                       "off (404)");
    if (admin->token == NULL)
        admin->quota = false;
}
