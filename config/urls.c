/* The URLs of a route's upstream: (each server's) and proxy:, read with libcurl's own URL
 * parser, the one that will use them: what the config accepts is what libcurl fetches. The
 * one file of config/ that names libcurl, and only its URL API. See sections.h. */
#include <ctype.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* One server's URL, http(s)://host[:port][/base-path], checked with libcurl's own URL parser,
 * into `server`; `key` (upstream, servers or url) names it in errors. The host is kept in
 * lower case: a server is the same server however its host is spelt. */
void config_parse_server_url(struct loader *ld, yaml_node_t *node, const char *key,
                             struct config_server *server)
{
    const char *text = config_scalar(ld, node, key);
    CURLU *url = NULL;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL, *user = NULL;
    size_t path_len;
    bool default_port;

    if (text == NULL)
        goto out;
    url = curl_url();
    if (url == NULL) {
        config_error(ld, node, "%s: out of memory", key);
        goto out;
    }
    if (curl_url_set(url, CURLUPART_URL, text, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        config_error(ld, node, "%s: \"%s\" is not a URL like http://127.0.0.1:9000", key, text);
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        config_error(ld, node, "%s: scheme must be http or https, not \"%s\"", key, scheme);
        goto out;
    }
    if (curl_url_get(url, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
        curl_url_get(url, CURLUPART_USER, &user, 0) == CURLUE_OK || strchr(text, '#') != NULL) {
        config_error(ld, node, "%s: only scheme, host, port and a base path are allowed", key);
        goto out;
    }
    for (char *c = host; *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
    path_len = strlen(path);
    while (path_len > 0 && path[path_len - 1] == '/')
        path_len--; /* "/base/" + "/x" must not become "/base//x" */
    /* A Host field leaves out the scheme's own port, as clients write it. */
    default_port = strcmp(port, strcmp(scheme, "https") == 0 ? "443" : "80") == 0;
    free(server->url);
    free(server->origin);
    free(server->base_path);
    free(server->authority);
    if (asprintf(&server->origin, "%s://%s:%s", scheme, host, port) < 0)
        server->origin = NULL;
    if (asprintf(&server->url, "%s://%s:%s%.*s", scheme, host, port, (int)path_len, path) < 0)
        server->url = NULL;
    if (asprintf(&server->authority, "%s%s%s", host, default_port ? "" : ":",
                 default_port ? "" : port) < 0)
        server->authority = NULL;
    server->base_path = strndup(path, path_len);
    if (server->origin == NULL || server->url == NULL || server->authority == NULL ||
        server->base_path == NULL)
        config_error(ld, node, "%s: out of memory", key);
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_free(user);
    curl_url_cleanup(url);
}

/* proxy: a forward proxy for the route's upstream requests, scheme://host:port and nothing
 * more. The port is required: libcurl would take 1080 for http:// too. "" (as "${PROXY:-}"
 * gives) is no proxy, as when the key is absent. */
void config_parse_proxy(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const schemes[] = {"http", "https", "socks5"};
    struct config_route *route = object;
    const char *text = config_scalar(ld, node, "proxy");
    CURLU *url = NULL;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *rest = NULL;
    bool known = false;
    size_t len;

    if (text == NULL || text[0] == '\0')
        goto out;
    url = curl_url();
    if (url == NULL) {
        config_error(ld, node, "proxy: out of memory");
        goto out;
    }
    /* NON_SUPPORT_SCHEME: socks5 is no scheme libcurl fetches, but it parses the rest. */
    if (curl_url_set(url, CURLUPART_URL, text, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        config_error(ld, node, "proxy: \"%s\" is not a URL like http://proxy.internal:3128", text);
        goto out;
    }
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        known = known || strcmp(scheme, schemes[i]) == 0;
    if (!known) {
        config_error(ld, node, "proxy: scheme must be http, https or socks5, not \"%s\"", scheme);
        goto out;
    }
    /* libcurl also reads "http:/host:1"; a proxy is written out in full. */
    len = strlen(scheme);
    if (strncasecmp(text, scheme, len) != 0 || strncmp(text + len, "://", 3) != 0) {
        config_error(ld, node, "proxy: \"%s\" is not a URL like %s://proxy.internal:3128", text,
                     scheme);
        goto out;
    }
    if (curl_url_get(url, CURLUPART_PORT, &port, 0) != CURLUE_OK || strcmp(port, "0") == 0) {
        config_error(ld, node, "proxy: \"%s\" needs a port (like %s://%s:3128)", text, scheme,
                     host);
        goto out;
    }
    if (strcmp(path, "/") != 0 || curl_url_get(url, CURLUPART_USER, &rest, 0) == CURLUE_OK ||
        curl_url_get(url, CURLUPART_QUERY, &rest, 0) == CURLUE_OK ||
        curl_url_get(url, CURLUPART_FRAGMENT, &rest, 0) == CURLUE_OK ||
        curl_url_get(url, CURLUPART_ZONEID, &rest, 0) == CURLUE_OK) {
        config_error(ld, node, "proxy: only scheme, host and port are allowed, not \"%s\"", text);
        goto out;
    }
    len = strlen(scheme) + strlen(host) + strlen(port) + 8;
    free(route->proxy);
    route->proxy = malloc(len);
    if (route->proxy == NULL)
        config_error(ld, node, "proxy: out of memory");
    else
        snprintf(route->proxy, len, "%s://%s:%s", scheme, host, port);
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(rest);
    curl_url_cleanup(url);
}
