/* The listener's certificates, read with GnuTLS; design in tls.h. */
#include <ctype.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/tls.h"

static const char *const version_suffix[] = {
    [CONFIG_TLS_1_2] = ":-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
    [CONFIG_TLS_1_3] = ":-VERS-ALL:+VERS-TLS1.3",
};

char *config_tls_priorities(const char *ciphers, enum config_tls_version min_version)
{
    char *text = NULL;

    if (asprintf(&text, "%s%s", ciphers != NULL ? ciphers : "NORMAL", version_suffix[min_version]) <
        0)
        return NULL;
    return text;
}

static void lower(char *s)
{
    for (; *s != '\0'; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* The DNS names of `crt`'s subjectAltName, or its CN when it has none. 0, or -1 when memory
 * is short. Names that do not fit the array are left out (the first ones answer). */
static int read_names(gnutls_x509_crt_t crt, struct config_tls_keypair *out)
{
    char name[256];

    for (unsigned i = 0; out->n_names < CONFIG_TLS_MAX_NAMES; i++) {
        size_t len = sizeof name - 1;
        int type = gnutls_x509_crt_get_subject_alt_name(crt, i, name, &len, NULL);

        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        if (type != GNUTLS_SAN_DNSNAME || len == 0 || strlen(name) != len)
            continue; /* another kind, too long, or with a NUL inside */
        if ((out->names[out->n_names] = strdup(name)) == NULL)
            return -1;
        lower(out->names[out->n_names++]);
    }
    if (out->n_names == 0) {
        size_t len = sizeof name - 1;

        if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, name, &len) ==
                0 &&
            len > 0) {
            if ((out->names[0] = strdup(name)) == NULL)
                return -1;
            lower(out->names[0]);
            out->n_names = 1;
        }
    }
    return 0;
}

/* The PEM file `path`, at most CONFIG_TLS_MAX_FILE bytes, into `pem`. 0, or -1 with `why`. */
static int read_pem(const char *path, gnutls_datum_t *pem, char *why, size_t why_len)
{
    char *text, reason[128];
    size_t len;

    if (config_read_file(path, CONFIG_TLS_MAX_FILE, &text, &len, reason) != 0) {
        snprintf(why, why_len, "%s", reason);
        return -1;
    }
    pem->data = (unsigned char *)text;
    pem->size = (unsigned)len;
    return 0;
}

int config_tls_keypair_load(const char *cert, const char *key, struct config_tls_keypair *out,
                            enum config_tls_blame *blame, char *why, size_t why_len)
{
    gnutls_datum_t cert_pem = {NULL, 0}, key_pem = {NULL, 0};
    gnutls_certificate_credentials_t check = NULL;
    gnutls_x509_crt_t first = NULL;
    int rc = -1, ret;

    memset(out, 0, sizeof *out);
    *blame = CONFIG_TLS_BLAME_CERT;
    if (read_pem(cert, &cert_pem, why, why_len) != 0)
        goto out;
    out->n_chain = CONFIG_TLS_MAX_CHAIN;
    ret = gnutls_pcert_list_import_x509_raw(out->chain, &out->n_chain, &cert_pem,
                                            GNUTLS_X509_FMT_PEM, 0);
    if (ret < 0) {
        out->n_chain = 0;
        snprintf(why, why_len, "%s holds no PEM certificate chain GnuTLS can read: %s", cert,
                 gnutls_strerror(ret));
        goto out;
    }
    *blame = CONFIG_TLS_BLAME_KEY;
    if (read_pem(key, &key_pem, why, why_len) != 0)
        goto out;
    ret = gnutls_privkey_init(&out->key);
    if (ret >= 0)
        ret = gnutls_privkey_import_x509_raw(out->key, &key_pem, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (ret < 0) {
        snprintf(why, why_len, "%s holds no PEM private key GnuTLS can read: %s", key,
                 gnutls_strerror(ret));
        goto out;
    }
    /* GnuTLS's own check that the two belong together. */
    ret = gnutls_certificate_allocate_credentials(&check);
    if (ret >= 0)
        ret = gnutls_certificate_set_x509_key_mem(check, &cert_pem, &key_pem, GNUTLS_X509_FMT_PEM);
    if (ret < 0) {
        snprintf(why, why_len, "%s does not go with %s: %s", key, cert, gnutls_strerror(ret));
        goto out;
    }
    *blame = CONFIG_TLS_BLAME_CERT;
    ret = gnutls_x509_crt_init(&first);
    if (ret >= 0)
        ret = gnutls_x509_crt_import(first, &out->chain[0].cert, GNUTLS_X509_FMT_DER);
    if (ret < 0 || read_names(first, out) != 0) {
        snprintf(why, why_len, "%s: %s", cert, ret < 0 ? gnutls_strerror(ret) : "out of memory");
        goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        config_tls_keypair_free(out);
    if (first != NULL)
        gnutls_x509_crt_deinit(first);
    if (check != NULL)
        gnutls_certificate_free_credentials(check);
    free(cert_pem.data);
    free(key_pem.data);
    return rc;
}

void config_tls_keypair_free(struct config_tls_keypair *pair)
{
    for (unsigned i = 0; i < pair->n_chain; i++)
        gnutls_pcert_deinit(&pair->chain[i]);
    if (pair->key != NULL)
        gnutls_privkey_deinit(pair->key);
    for (size_t i = 0; i < pair->n_names; i++)
        free(pair->names[i]);
    memset(pair, 0, sizeof *pair);
}

const char *config_tls_library_version(void)
{
    return gnutls_check_version(NULL);
}
