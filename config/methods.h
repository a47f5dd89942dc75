/*
 * methods: what sluice knows of HTTP request methods, in one table: the standard ones, those
 * that may be sent twice, those a retry may send again. The config checks the methods a route
 * or a cost: names against it; the gateway asks it of the method a request carries. It lives
 * in config/ because config needs it and every gateway/ folder stands above config; limiter/,
 * the one layer below, knows nothing of HTTP.
 *
 * The standard methods are RFC 9110's (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE)
 * and PATCH (RFC 5789). Methods are case-sensitive (RFC 9110 section 9.1): `get` is not GET
 * but an extension method, yet some upstreams fold the case and would run it as GET, so a
 * standard method spelled in another case is told apart (config_method_is_miscased()). A
 * config may name a method in any case and keeps it in capitals (config_method_standard()).
 *
 * Idempotent (RFC 9110 section 9.2.2): a request that may be sent twice with the effect of
 * once, GET, HEAD, OPTIONS, TRACE, PUT and DELETE; libcurl may resend those on a reused
 * connection that died. A retry (retries:, on another server) sends again only GET, HEAD,
 * PUT, DELETE and OPTIONS: the idempotent ones, TRACE aside.
 *
 * Names compare byte for byte, case aside where a function says so: `GET `, "" and NULL name
 * no method. Nothing here allocates or keeps its argument; all may be called from any thread.
 *
 * Example: config_method_standard("patch") is "PATCH"; config_method_is_standard("patch") is
 * false and config_method_is_miscased("patch") true; config_method_is_idempotent("TRACE") is
 * true and config_method_may_retry("TRACE") false.
 */
#ifndef SLUICE_CONFIG_METHODS_H
#define SLUICE_CONFIG_METHODS_H

#include <stdbool.h>

/* The standard methods, for a message that lists what is expected, and how many. */
#define CONFIG_METHOD_LIST  "GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE or PATCH"
#define CONFIG_METHOD_COUNT 9

/* The standard method `text` names in any case, in capitals as a request line carries it
 * ("get" gives "GET"): a static string. NULL when it names none. */
const char *config_method_standard(const char *text);

/* True when `method` is a standard method, spelled exactly so (GET, not get). */
bool config_method_is_standard(const char *method);

/* True when `method` is a standard method spelled in another case (get, Post). */
bool config_method_is_miscased(const char *method);

/* The place of `method` among the standard methods, spelled exactly so, from 0 to
 * CONFIG_METHOD_COUNT - 1 (for a set of methods kept as bits); -1 for any other. */
int config_method_index(const char *method);

/* True when `method` is idempotent (RFC 9110 section 9.2.2): GET, HEAD, OPTIONS, TRACE, PUT,
 * DELETE, spelled exactly so. */
bool config_method_is_idempotent(const char *method);

/* True when a retry may send a request of `method` again: an idempotent method, TRACE
 * aside (GET, HEAD, PUT, DELETE, OPTIONS). */
bool config_method_may_retry(const char *method);

#endif
