/*
 * tls: the listener's certificates, read with GnuTLS: once by config_load() to check them
 * (so `sluice --check` and a reload refuse a bad one at the line that names it), and again by
 * the gateway to serve them (gateway/front/certs.h).
 *
 * A certificate file (a regular file of at most CONFIG_TLS_MAX_FILE bytes, as is a key file)
 * holds a PEM chain, the server's certificate first; a key file the PEM private key (PKCS#1, PKCS#8
 * or SEC1, unencrypted). They must belong together: GnuTLS checks that the certificate's public key
 * is the key's (gnutls_certificate_set_x509_key_mem), so a mismatch is refused here rather than
 * failing every handshake. A certificate answers for the DNS names of its subjectAltName, or,
 * without any, for its subject's CN.
 *
 * The priority string (server.tls.ciphers, a GnuTLS priority string, "NORMAL" when unset,
 * then the versions appended: "BASE:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" for min_version 1.2,
 * without TLS1.2 for 1.3) so that TLS 1.0 and 1.1 are never offered whatever the base says.
 */
#ifndef SLUICE_CONFIG_TLS_H
#define SLUICE_CONFIG_TLS_H

#include <gnutls/abstract.h>
#include <stddef.h>

#include "config/config.h"

#define CONFIG_TLS_MAX_FILE  (1024 * 1024) /* bytes of a certificate or key file */
#define CONFIG_TLS_MAX_CHAIN 16            /* certificates in one file */
#define CONFIG_TLS_MAX_NAMES 64            /* DNS names one certificate answers for */

/* One certificate ready for a handshake: its chain, its key, and the names it answers for. */
struct config_tls_keypair {
    gnutls_pcert_st chain[CONFIG_TLS_MAX_CHAIN];
    unsigned n_chain;
    gnutls_privkey_t key;
    char *names[CONFIG_TLS_MAX_NAMES]; /* lower case; "*.example.com" for a wildcard */
    size_t n_names;
};

/* Which file a failed load blames. */
enum config_tls_blame { CONFIG_TLS_BLAME_CERT, CONFIG_TLS_BLAME_KEY };

/* Loads `cert` and `key` into `out`. 0, or -1 with `*blame` and `why` (a sentence) filled
 * and nothing left to free. On success `out` is freed with config_tls_keypair_free(). */
int config_tls_keypair_load(const char *cert, const char *key, struct config_tls_keypair *out,
                            enum config_tls_blame *blame, char *why, size_t why_len);
void config_tls_keypair_free(struct config_tls_keypair *pair);

/* The GnuTLS priority string for `tls`, allocated (the caller frees it); NULL when memory is
 * short. */
char *config_tls_priorities(const char *ciphers, enum config_tls_version min_version);

#endif
