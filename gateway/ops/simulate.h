/*
 * `sluice simulate`: replays access log lines (access_log.h, read by log_line.h) against a
 * proposed config, offline, and reports what its limits would have denied.
 *
 *   sluice simulate -c PROPOSED.yaml [--compare CURRENT.yaml] [--format text|json]
 *                   [--max-denied 0.1%] [--decisions] FILE...      ("-" is standard input;
 *                   a .gz log: zcat access.log.gz | sluice simulate -c p.yaml -)
 *
 * Each line is routed by the proposed config's routes (routes.h: method, the routing path of
 * `path`, `host`), held to the limits the gateway would select (gateway/limits/decide.h:
 * gw_limits_select(), each limit's key and its cost for the method) and decided by limiters
 * built from them (max_clients as the gateway has it) through gw_limits_decide_local(), all or
 * none as the gateway charges, at the line's decided_ns: the same code on the same clock, so a
 * log recorded under config A replayed against A gives the decisions A gave, line for line. Each
 * limit counts the client under its key's source (gw_key_source()) as logged in `keys`: the hash
 * stands in for the key, one to one.
 *
 * On a route that names consumers, the line's `consumer` (the consumer's configured name, as
 * the access log has it; never its key) is looked up by name in the proposed config, and the
 * route's version of that consumer's plan there decides, its limits on the route's key
 * counting under the logged "consumer" hash (the gateway's key "consumer:NAME"), so moving a
 * consumer to another plan, or changing a plan, is simulated. A line with no consumer is
 * anonymous, as it was when recorded: the anonymous plan or the route's own limits, by the
 * client's address. Limit names in the report are "PLAN/LIMIT" for a plan's, as in metrics.
 *
 * Lines are replayed in the order given; a gateway writes a line when its request ends, so
 * requests that overlapped may be logged out of their decision order, and then a clock step
 * backwards is taken as the limiter takes one (no extra quota). Not replayed, counted per
 * reason: not_decided (decided_ns 0: refused before the limits, blocked, exempt), no_route
 * (no route of the proposed config matches, or its path is refused), key_not_logged (a
 * limit counts under a key source the line lacks), consumer_missing (the line's consumer is
 * not in the proposed config), unknown_key (an anonymous line on a route the proposed config
 * answers 401 for keys no consumer holds). Malformed lines are counted, the first 10 reported
 * as FILE:LINE; a line longer than any the access log writes is one of them, read past in
 * bounded memory (log_reader.h).
 *
 * The report, per route and per limit: requests, would-be denials, the share denied, the
 * first denial's time, the ten clients (their hashes; a consumer's name where the limit
 * counts consumers) most denied, and denials per minute; with --compare the current
 * config's figures beside each and, per route, the clients denied under the proposed config
 * but never under the current one. Memory: each limiter
 * holds at most max_clients clients, and each limit's denied-client counts at most
 * max_clients (denials of clients past that are counted, not named).
 *
 * Exit status: 0; 1 when --max-denied is given and the proposed config denies a larger share
 * of the replayed requests; 2 for bad usage, a config that does not load, or a log that cannot
 * be opened or read to its end (then no report is printed: never one over part of the input).
 */
#ifndef SLUICE_GATEWAY_SIMULATE_H
#define SLUICE_GATEWAY_SIMULATE_H

/* Runs `sluice simulate` with its arguments (argv[0] is "simulate"); the exit status. */
int gw_simulate_main(int argc, char **argv);

#endif
