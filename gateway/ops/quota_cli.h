/*
 * `sluice quota`: a client's quota looked at or changed from the command line, through the
 * admin listener of a running gateway (the /quota endpoints), with the config's admin token.
 *
 *   sluice quota show|reset|grant -c FILE --route R (--key K | --consumer C)
 *                [--ip A] [--limit-key SOURCE=VALUE]... [--limit L] [--n N]
 *                [--method M] [--format table|json]
 *
 * FILE is the gateway's config: its server.admin_listen (a wildcard address is asked on
 * loopback) and its admin token (admin_token, admin_token_file). Every value is %-escaped into
 * the URL, so a key may hold any character. `reset` without --limit resets every limit of
 * the client's; `grant` needs --limit and --n. The table (the default) is the gateway's own
 * (Accept: text/plain); --format json prints the JSON answer as it came.
 *
 * Exit status: 0 done; 1 the config cannot be used (unreadable, no admin_listen, no admin
 * token); 2 a bad command line; 3 the gateway refused the call (no such route, consumer or
 * limit; a bad value; a limit that cannot change: 400, 404, 409), its reason printed; 4 the
 * admin token was refused (401); 5 the gateway could not be reached, or failed (5xx: the
 * shared store did not answer).
 */
#ifndef SLUICE_GATEWAY_OPS_QUOTA_CLI_H
#define SLUICE_GATEWAY_OPS_QUOTA_CLI_H

#include <stddef.h>

struct config;

/* The URL of `path` on the admin listener of `config` (a wildcard address asked on loopback),
 * into `out`. 0, or -1 when the config sets no admin_listen. */
int gw_admin_url(const struct config *config, const char *path, char *out, size_t len);

/* Runs `sluice quota` with its arguments (argv[0] is "quota"); the exit status. */
int gw_quota_main(int argc, char **argv);

#endif
