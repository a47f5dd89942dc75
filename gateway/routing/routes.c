#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/chars.h"
#include "gateway/routing/routes.h"

static bool method_accepted(const struct config_route *route, const char *method)
{
    /* HEAD is answered as GET is, minus the body: a GET-only route that let HEAD fall through
     * to a looser catch-all would let a client probe the upstream outside the GET limit. */
    bool head = strcmp(method, "HEAD") == 0;

    if (route->methods == NULL)
        return true;
    for (char **m = route->methods; *m != NULL; m++)
        if (strcmp(*m, method) == 0 || (head && strcmp(*m, "GET") == 0))
            return true;
    return false;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* `*text` of `*len` bytes without the SP and HTAB around it. */
static void trim_ows(const char **text, size_t *len)
{
    while (*len > 0 && is_ows(**text)) {
        (*text)++;
        (*len)--;
    }
    while (*len > 0 && is_ows((*text)[*len - 1]))
        (*len)--;
}

/* The name part of a Host value: no SP/HTAB around it, no port, no brackets around an IPv6
 * literal, no single trailing dot ("Api.Example.com.:8080" gives "Api.Example.com"). 0, or -1
 * for an unclosed bracket. */
static int host_name(const char *host, const char **name, size_t *len)
{
    size_t host_len = strlen(host);
    const char *colon;

    trim_ows(&host, &host_len);
    if (host_len > 0 && host[0] == '[') {
        const char *close = memchr(host, ']', host_len);

        if (close == NULL)
            return -1;
        *name = host + 1;
        *len = (size_t)(close - *name);
        return 0;
    }
    colon = memchr(host, ':', host_len);
    *name = host;
    *len = colon != NULL ? (size_t)(colon - host) : host_len;
    /* "example.com." is the same name made absolute, and upstreams treat it as the same
     * virtual host; only one dot goes, since "example.com.." is no name at all. */
    if (*len > 0 && (*name)[*len - 1] == '.')
        (*len)--;
    return 0;
}

static bool host_accepted(const struct config_route *route, const char *host)
{
    const char *name;
    size_t len, route_len;

    if (route->host == NULL)
        return true;
    if (host == NULL || host_name(host, &name, &len) != 0)
        return false;
    route_len = strlen(route->host);
    if (route_len > 0 && route->host[route_len - 1] == '.')
        route_len--;
    return len == route_len && strncasecmp(name, route->host, len) == 0;
}

/* A route that strips its prefix matches whole segments only: /api takes /api and /api/x,
 * not /apiadmin, whose rest ("admin") would be sent on as a path of its own ("/admin"). */
static bool segment_ends(const struct config_route *r, const char *path, size_t len)
{
    return !r->forwarding.strip_prefix || len == 0 || r->path_prefix[len - 1] == '/' ||
           path[len] == '\0' || path[len] == '/';
}

static int match(const struct config *config, const char *method, const char *path,
                 const char *host, bool any_case)
{
    int best = -1;
    size_t best_len = 0;

    for (size_t i = 0; i < config->n_routes; i++) {
        const struct config_route *r = &config->routes[i];
        size_t len = strlen(r->path_prefix);

        if ((best < 0 || len > best_len) &&
            (any_case ? strncasecmp(path, r->path_prefix, len)
                      : strncmp(path, r->path_prefix, len)) == 0 &&
            segment_ends(r, path, len) && method_accepted(r, method) && host_accepted(r, host)) {
            best = (int)i;
            best_len = len;
        }
    }
    return best;
}

int gw_route_match(const struct config *config, const char *method, const char *path,
                   const char *host)
{
    return match(config, method, path, host, false);
}

int gw_route_match_any_case(const struct config *config, const char *method, const char *path,
                            const char *host)
{
    return match(config, method, path, host, true);
}

/* The end of the reg-name that starts `text`: its first ':' or `end`; NULL if the name is
 * empty, has a character outside the set, or an empty label other than one trailing dot. */
static const char *reg_name_end(const char *text, const char *end)
{
    const char *p = text;
    size_t label_len = 0;

    while (p < end && *p != ':') {
        if (*p == '.') {
            if (label_len == 0)
                return NULL;
            label_len = 0;
            p++;
            continue;
        }
        if (*p == '%') {
            /* %XX is for the octets of a non-ASCII (UTF-8) name. Standing for an ASCII
             * character ("%2E", "%40") it is a second spelling that some upstreams decode
             * and others do not, so the request could be routed as one host and served as
             * another. */
            if (p + 2 >= end || gw_percent_byte(p) < 0x80)
                return NULL;
            p += 3;
        } else if (gw_is_alnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '~') {
            p++;
        } else {
            return NULL;
        }
        label_len++;
    }
    /* A last label left empty is the one trailing dot ("a."; "a.." and "." returned above).
     * An empty name (":80") is no host. */
    return p == text ? NULL : p;
}

static bool ipv6_literal_valid(const char *text, size_t len)
{
    char buf[INET6_ADDRSTRLEN];
    unsigned char bytes[16];

    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, bytes) == 1;
}

bool gw_host_is_valid(const char *host)
{
    const char *end, *rest;
    size_t len;

    if (host == NULL)
        return true;
    len = strlen(host);
    trim_ows(&host, &len);
    if (len == 0)
        return true;
    end = host + len;
    if (host[0] == '[') {
        const char *close = memchr(host, ']', len);

        /* No zone ID ("%25eth0") and no IPvFuture: inet_pton takes neither, nor would an
         * upstream's virtual host. */
        if (close == NULL || !ipv6_literal_valid(host + 1, (size_t)(close - host - 1)))
            return false;
        rest = close + 1;
    } else {
        rest = reg_name_end(host, end);
        if (rest == NULL)
            return false;
    }
    return rest == end || (*rest == ':' && gw_port_valid(rest + 1, (size_t)(end - rest - 1)));
}
