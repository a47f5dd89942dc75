/*
 * certs: the certificates the TLS listener presents, held by sluice so that a reload swaps
 * them without restarting a daemon or dropping a connection.
 *
 * libmicrohttpd hands each handshake to gw_certs_retrieve() (MHD_OPTION_HTTPS_CERT_CALLBACK,
 * GnuTLS's retrieve_function2), which picks from the current set: the certificate whose names
 * (tls.h: its subjectAltName DNS entries, else its CN) match the server name the client sent
 * (SNI), comparing without case, a wildcard `*.example.com` matching exactly one label
 * (`a.example.com`, not `example.com` nor `a.b.example.com`); when none matches, or the client
 * sent no name, the first certificate of the set (server.tls cert/key, else the first of
 * certificates:). The first matching certificate wins.
 *
 * A set is reference-counted. The callback takes a reference for the connection (kept on its
 * wire until it closes: wire.h gw_wire_keep()), since GnuTLS uses the chain and the key it was
 * given for the rest of the handshake and keeps pointers to them for the session's life; the
 * reload thread replaces the current set under a mutex held for that pointer alone, and the
 * old set is freed when the last connection that took it ends. GnuTLS's callback has no
 * argument of its own, so the current set is this file's (one server per process).
 */
#ifndef SLUICE_GATEWAY_CERTS_H
#define SLUICE_GATEWAY_CERTS_H

#include <gnutls/abstract.h>
#include <stddef.h>

#include "config/config.h"

struct gw_certs;

/* Reads the certificates `tls` names (tls.h). The set, with one reference, or NULL with
 * `err` filled. */
struct gw_certs *gw_certs_load(const struct config_tls *tls, char *err, size_t err_len);

/* Makes `certs` (taken over; NULL to stop serving any) the set new handshakes pick from; the
 * one it replaces is released. */
void gw_certs_use(struct gw_certs *certs);

/* Drops a reference; the set is freed with its last. `certs` (a struct gw_certs *) may be
 * NULL. */
void gw_certs_release(void *certs);

/* GnuTLS's certificate callback (the shape of gnutls_certificate_retrieve_function2): the
 * chain and key for `session`, owned by the set, which the session's connection holds. 0, or
 * -1 (the handshake fails) for a connection not read strictly or when no set is in use. */
int gw_certs_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                      gnutls_pcert_st **pcert, unsigned int *pcert_length,
                      gnutls_privkey_t *privkey);

#endif
