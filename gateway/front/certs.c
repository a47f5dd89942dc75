/* The TLS listener's certificates, swapped on reload; design in certs.h. */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/tls.h"
#include "gateway/front/certs.h"
#include "gateway/front/wire.h"

struct gw_certs {
    _Atomic unsigned refs;
    struct config_tls_keypair *pairs; /* the first answers when no name matches */
    size_t n_pairs;
};

static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_certs *current;

struct gw_certs *gw_certs_load(const struct config_tls *tls, char *err, size_t err_len)
{
    struct gw_certs *set = calloc(1, sizeof *set);
    struct config_tls_keypair *pairs = calloc(tls->n_certs, sizeof *pairs);
    enum config_tls_blame blame;

    if (set == NULL || pairs == NULL) {
        free(set);
        free(pairs);
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    atomic_init(&set->refs, 1);
    set->pairs = pairs;
    for (; set->n_pairs < tls->n_certs; set->n_pairs++) {
        const struct config_tls_cert *c = &tls->certs[set->n_pairs];

        if (config_tls_keypair_load(c->cert, c->key, &set->pairs[set->n_pairs], &blame, err,
                                    err_len) != 0) {
            gw_certs_release(set);
            return NULL;
        }
    }
    return set;
}

void gw_certs_release(void *certs)
{
    struct gw_certs *set = certs;

    if (set == NULL || atomic_fetch_sub_explicit(&set->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < set->n_pairs; i++)
        config_tls_keypair_free(&set->pairs[i]);
    free(set->pairs);
    free(set);
}

void gw_certs_use(struct gw_certs *certs)
{
    struct gw_certs *old;

    pthread_mutex_lock(&current_lock);
    old = current;
    current = certs;
    pthread_mutex_unlock(&current_lock);
    gw_certs_release(old);
}

/* Whether the certificate name `pattern` (lower case) answers for `host` (lower case). */
static bool name_matches(const char *pattern, const char *host)
{
    const char *dot;

    if (strncmp(pattern, "*.", 2) != 0)
        return strcmp(pattern, host) == 0;
    dot = strchr(host, '.');
    return dot != NULL && dot != host && strcmp(dot, pattern + 1) == 0;
}

/* The pair for the server name the client sent, else the first. */
static const struct config_tls_keypair *pick(const struct gw_certs *set, gnutls_session_t session)
{
    char host[256];
    size_t len = sizeof host;
    unsigned type;

    if (gnutls_server_name_get(session, host, &len, &type, 0) != 0 || type != GNUTLS_NAME_DNS ||
        len >= sizeof host)
        return &set->pairs[0];
    host[len] = '\0';
    for (char *c = host; *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
    for (size_t i = 0; i < set->n_pairs; i++)
        for (size_t n = 0; n < set->pairs[i].n_names; n++)
            if (name_matches(set->pairs[i].names[n], host))
                return &set->pairs[i];
    return &set->pairs[0];
}

int gw_certs_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                      gnutls_pcert_st **pcert, unsigned int *pcert_length,
                      gnutls_privkey_t *privkey)
{
    struct gw_wire *wire = gw_wire_of_tls(session);
    const struct config_tls_keypair *pair;
    struct gw_certs *set;

    (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    if (wire == NULL)
        return -1;
    pthread_mutex_lock(&current_lock);
    set = current;
    if (set != NULL)
        atomic_fetch_add_explicit(&set->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&current_lock);
    if (set == NULL)
        return -1;
    gw_wire_keep(wire, set, gw_certs_release);
    pair = pick(set, session);
    *pcert = (gnutls_pcert_st *)pair->chain;
    *pcert_length = pair->n_chain;
    *privkey = pair->key;
    return 0;
}
