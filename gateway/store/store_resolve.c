/* The Redis host's name resolved by a deadline; design in store_resolve.h. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/store/store_resolve.h"
#include "limiter/limiter.h"

struct gw_store_lookup {
    struct gaicb request;
    struct gaicb *list[1];
    struct addrinfo hints;
    bool under_way;
    char host[]; /* the name asked, which glibc reads while it resolves */
};

static bool is_numeric(const char *host)
{
    unsigned char address[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

/* Starts resolving `host` on `*lookup` (made first if need be). 0, or -1 with `why`. */
static int begin(struct gw_store_lookup **lookup, const char *host, char *why, size_t why_len)
{
    struct gw_store_lookup *l = *lookup;
    int rc;

    if (l == NULL) {
        l = *lookup = calloc(1, sizeof *l + strlen(host) + 1);
        if (l == NULL) {
            snprintf(why, why_len, "resolve %s: out of memory", host);
            return -1;
        }
        memcpy(l->host, host, strlen(host) + 1);
    }
    memset(&l->request, 0, sizeof l->request);
    l->hints = (struct addrinfo){.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    l->request.ar_name = l->host;
    l->request.ar_request = &l->hints;
    l->list[0] = &l->request;
    rc = getaddrinfo_a(GAI_NOWAIT, l->list, 1, NULL);
    if (rc != 0) {
        snprintf(why, why_len, "resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    l->under_way = true;
    return 0;
}

/* The lookup's answer, its first IPv4 address, else its first, in `ip`; freed. 0, or -1. */
static int take_address(struct gw_store_lookup *l, char ip[INET6_ADDRSTRLEN])
{
    const struct addrinfo *best = NULL;
    int rc = -1;

    for (const struct addrinfo *a = l->request.ar_result; a != NULL; a = a->ai_next)
        if (best == NULL || (best->ai_family != AF_INET && a->ai_family == AF_INET))
            best = a;
    if (best != NULL && getnameinfo(best->ai_addr, best->ai_addrlen, ip, INET6_ADDRSTRLEN, NULL, 0,
                                    NI_NUMERICHOST) == 0)
        rc = 0;
    freeaddrinfo(l->request.ar_result);
    l->request.ar_result = NULL;
    return rc;
}

int gw_store_resolve(struct gw_store_lookup **lookup, const char *host, int64_t deadline_ns,
                     char ip[INET6_ADDRSTRLEN], bool *timed_out, char *why, size_t why_len)
{
    int rc;

    *timed_out = false;
    if (is_numeric(host)) {
        snprintf(ip, INET6_ADDRSTRLEN, "%s", host);
        return 0;
    }
    if ((*lookup == NULL || !(*lookup)->under_way) && begin(lookup, host, why, why_len) != 0)
        return -1;
    while ((rc = gai_error(&(*lookup)->request)) == EAI_INPROGRESS) {
        int64_t left = deadline_ns - limiter_now_ns();
        struct timespec wait = {(time_t)(left / 1000000000), (long)(left % 1000000000)};

        if (left <= 0) {
            *timed_out = true;
            snprintf(why, why_len, "resolve %s: no answer by the deadline", host);
            return -1;
        }
        gai_suspend((const struct gaicb *const *)(*lookup)->list, 1, &wait);
    }
    (*lookup)->under_way = false;
    if (rc != 0) {
        snprintf(why, why_len, "resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    if (take_address(*lookup, ip) != 0) {
        snprintf(why, why_len, "resolve %s: no IPv4 or IPv6 address", host);
        return -1;
    }
    return 0;
}

void gw_store_lookup_end(struct gw_store_lookup *l)
{
    if (l == NULL)
        return;
    if (l->under_way && gai_cancel(&l->request) != EAI_CANCELED &&
        gai_error(&l->request) == EAI_INPROGRESS)
        return; /* glibc holds it until it is done: it stays allocated, unread */
    if (l->under_way && gai_error(&l->request) == 0)
        freeaddrinfo(l->request.ar_result);
    free(l);
}
