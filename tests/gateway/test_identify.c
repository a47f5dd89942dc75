/* Who the client is to a route's limits (gateway/modules/limit/identify.c, and the client
 * gw_req_begin() reads behind trusted proxies), on requests built in memory: the key of a
 * header or a query parameter, the address when there is none, the consumer a key names.
 * Each route here lets one request an hour through per key, so which key a request was
 * counted under shows in whether the next one passes. */
#include <stdio.h>
#include <string.h>

#include "gateway/modules/limit/identify.h"
#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

#define UPSTREAM    "    upstream: \"http://127.0.0.1:9000\"\n"
#define ONE_AN_HOUR "    limit: {algorithm: token_bucket, requests: 1, per: 1h}\n"

static const char keys_yaml[] =
    "server:\n  access_log: \"off\"\n"
    "  trusted_proxies: [\"10.0.0.0/8\", \"2001:db8:ffff::/48\"]\n"
    "routes:\n"
    "  - name: by_header\n    match: {path_prefix: /h/}\n" UPSTREAM
    "    key: \"header:X-API-Key\"\n" ONE_AN_HOUR
    "  - name: by_query\n    match: {path_prefix: /q/}\n" UPSTREAM
    "    key: \"query:api_key\"\n" ONE_AN_HOUR
    "  - name: by_ip\n    match: {path_prefix: /ip/}\n" UPSTREAM ONE_AN_HOUR;

/* printf bob-key | sha256sum */
#define BOB_SHA256 "9b94dc1a51a38769f135edf04033ad7f2f487b6c25929be7a861cfc1ab10cf98"

/* acme holds gold (100 a minute), bob free (2 an hour). /api/ rejects a key no consumer
 * holds; /open/ counts it by its address under the route's own limits. */
static const char consumers_yaml[] =
    "server: {access_log: \"off\"}\n"
    "plans:\n"
    "  free: {algorithm: token_bucket, requests: 2, per: 1h}\n"
    "  gold: {algorithm: token_bucket, requests: 100, per: 1m}\n"
    "consumers:\n"
    "  - {name: acme, key: acme-key, plan: gold}\n"
    "  - {name: bob, key: \"sha256:" BOB_SHA256 "\", plan: free}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /api/}\n" UPSTREAM
    "    key: \"header:X-API-Key\"\n    plan: free\n"
    "  - name: open\n    match: {path_prefix: /open/}\n" UPSTREAM
    "    key: \"query:key\"\n    plan: free\n    unknown_key: anonymous\n";

#define CLIENT "198.51.100.1"
#define PROXY  "10.0.0.1"

/* The key `rq` (its head run) is counted under for a limit keyed `kind` `name`. */
static const char *key_of(struct gw_req *rq, enum config_key_kind kind, const char *name)
{
    static char key[GW_KEY_LEN];

    CU_ASSERT_EQUAL(gw_identify_key(rq, kind, name, key), 0);
    return key;
}

/* The request's head refused with `status` and a detail holding `words`
 * (fixture_expect_refused()), before any limit decided and with no consumer, a 401 naming
 * the credential it wants (every route here that answers 401 is keyed by X-API-Key); then
 * freed. */
static void expect_refused(struct gw_req *rq, unsigned status, const char *words)
{
    fixture_expect_refused(rq, status, words);
    CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
    CU_ASSERT_PTR_NULL(rq->consumer);
    if (status == 401) {
        CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "WWW-Authenticate"),
                                  "ApiKey header=\"X-API-Key\""));
    } else {
        CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "WWW-Authenticate"));
    }
    gw_req_free(rq);
}

static void test_key_from_header(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, keys_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/h/items", "X-API-Key", "alpha", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_HEADER, "X-API-Key"), "header:alpha"));
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_HEADER, "x-api-key"), "header:alpha"));
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_IP, NULL), "ip:198.51.100.1"));
    gw_req_free(rq);
    /* alpha has spent its hour, whatever the field's case or the address it comes from; beta
     * and the address alone have not. */
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, CLIENT, "GET", "/h/items", "x-api-key", "alpha", NULL),
                     NULL),
        429);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, "203.0.113.9", "GET", "/h/items", "X-API-Key",
                                                 "alpha", NULL),
                                 NULL),
                    429);
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, CLIENT, "GET", "/h/items", "X-API-Key", "beta", NULL),
                     NULL),
        0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/h/items", NULL), NULL), 0);
    fixture_stop(&fx);
}

static void test_key_from_query(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, keys_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/q/items?x=1&api_key=a+b", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_QUERY, "api_key"), "query:a b"));
    gw_req_free(rq);
    /* Spelled another way, the same value has no fresh quota. */
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, CLIENT, "GET", "/q/items?api_key=a%20b", NULL), NULL),
        429);
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, CLIENT, "GET", "/q/items?api_key=c", NULL), NULL), 0);
    /* A key read two ways is refused rather than guessed. */
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/q/items?api_key=c&api_key=d", NULL), 400,
                   "more than once");
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/q/items?API_KEY=c&api_key=d", NULL), 400,
                   "spelled another way");
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/q/items?api%5fkey=e", NULL), 400,
                   "spelled another way");
    fixture_stop(&fx);
}

static void test_duplicate_key_header(void)
{
    struct fixture fx;

    fixture_start(&fx, keys_yaml);
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/h/items", "X-API-Key", "alpha",
                                   "X-API-Key", "beta", NULL),
                   400, "the key header is given more than once");
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/h/items", "X-API-Key", "alpha",
                                   "x-api-KEY", "alpha", NULL),
                   400, "more than once");
    /* Another route's key is no key here. */
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/ip/items", "X-API-Key",
                                                 "alpha", "X-API-Key", "beta", NULL),
                                 NULL),
                    0);
    fixture_stop(&fx);
}

/* The upstream would drop a field Connection names: it would serve as anonymous a request
 * counted under a key of the client's choice. */
static void test_connection_names_key(void)
{
    struct fixture fx;

    fixture_start(&fx, keys_yaml);
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/h/items", "Connection",
                                   "keep-alive, X-API-Key", "X-API-Key", "alpha", NULL),
                   400, "the Connection field names the key header");
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/h/items", "Connection", "x-api-key", NULL),
                   400, "Connection field names the key header");
    /* Over two Connection fields too. */
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/h/items", "Connection", "keep-alive",
                                   "Connection", "X-API-Key", "X-API-Key", "alpha", NULL),
                   400, "Connection field names the key header");
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/h/items", "Connection",
                                                 "keep-alive, X-Other", "X-API-Key", "alpha", NULL),
                                 NULL),
                    0);
    fixture_stop(&fx);
}

static void test_fallback_to_ip(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, keys_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/h/items", "X-API-Key", "", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_HEADER, "X-API-Key"), "ip:198.51.100.1"));
    gw_req_free(rq);
    rq = fixture_request(&fx, "2001:db8:1:2::5", "GET", "/q/items?other=1", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_QUERY, "api_key"), "ip:2001:db8:1:2::/64"));
    gw_req_free(rq);
    /* The empty key above spent the address's hour; the query route counts its own. */
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/h/items", NULL), NULL), 429);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/q/items", NULL), NULL), 0);
    /* The rest of the /64 is the same client. */
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, "2001:db8:1:2::9", "GET", "/q/items", NULL), NULL), 429);
    CU_ASSERT_EQUAL(
        fixture_head(fixture_request(&fx, "2001:db8:1:3::5", "GET", "/q/items", NULL), NULL), 0);
    fixture_stop(&fx);
}

/* The client a request from `peer` with X-Forwarded-For `forwarded_for` is taken for. */
static void expect_client(struct fixture *fx, const char *peer, const char *forwarded_for,
                          const char *client)
{
    struct gw_req *rq =
        fixture_request(fx, peer, "GET", "/ip/x", "X-Forwarded-For", forwarded_for, NULL);

    if (!fixture_addr_is(&rq->client, client))
        fprintf(stderr, "\n%s, X-Forwarded-For %s: expected the client %s\n", peer, forwarded_for,
                client);
    CU_ASSERT_TRUE(fixture_addr_is(&rq->client, client));
    gw_req_free(rq);
}

static void test_trusted_proxies(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, keys_yaml);
    rq = fixture_request(&fx, PROXY, "GET", "/ip/x", "X-Forwarded-For", "203.0.113.7", NULL);
    CU_ASSERT_TRUE(rq->trusted_peer);
    CU_ASSERT_TRUE(fixture_addr_is(&rq->peer, PROXY));
    CU_ASSERT_TRUE(fixture_addr_is(&rq->client, "203.0.113.7"));
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(key_of(rq, CONFIG_KEY_IP, NULL), "ip:203.0.113.7"));
    gw_req_free(rq);
    /* Walked from the right, past trusted hops, to the first untrusted one. */
    expect_client(&fx, PROXY, "198.51.100.3, 203.0.113.7, 10.9.9.9", "203.0.113.7");
    expect_client(&fx, "2001:db8:ffff::1", "203.0.113.7:4711, [2001:db8:ffff::2]:443",
                  "203.0.113.7");
    /* An entry no proxy of ours wrote stops the walk at the last trusted hop. */
    expect_client(&fx, PROXY, "203.0.113.7, unknown, 10.9.9.9", "10.9.9.9");
    /* An untrusted peer's header is not read. */
    rq = fixture_request(&fx, CLIENT, "GET", "/ip/x", "X-Forwarded-For", "203.0.113.7", NULL);
    CU_ASSERT_FALSE(rq->trusted_peer);
    CU_ASSERT_TRUE(fixture_addr_is(&rq->client, CLIENT));
    gw_req_free(rq);
    expect_client(&fx, "10.0.0.1", "192.0.2.1", "192.0.2.1");
    expect_client(&fx, "11.0.0.1", "192.0.2.1", "11.0.0.1");
    fixture_stop(&fx);
}

/* Behind one proxy, each client has its own quota; no client buys one with the header. */
static void test_proxied_clients_counted_apart(void)
{
    struct fixture fx;

    fixture_start(&fx, keys_yaml);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, PROXY, "GET", "/ip/x", "X-Forwarded-For",
                                                 "203.0.113.7", NULL),
                                 NULL),
                    0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, PROXY, "GET", "/ip/x", "X-Forwarded-For",
                                                 "203.0.113.8", NULL),
                                 NULL),
                    0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, "10.200.0.1", "GET", "/ip/x",
                                                 "X-Forwarded-For", "203.0.113.7", NULL),
                                 NULL),
                    429);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/ip/x", "X-Forwarded-For",
                                                 "192.0.2.1", NULL),
                                 NULL),
                    0);
    CU_ASSERT_EQUAL(fixture_head(fixture_request(&fx, CLIENT, "GET", "/ip/x", "X-Forwarded-For",
                                                 "192.0.2.2", NULL),
                                 NULL),
                    429);
    fixture_stop(&fx);
}

static void test_known_consumer(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, consumers_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/api/items", "X-API-Key", "acme-key", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->refusal, 0);
    CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
    CU_ASSERT_TRUE(fixture_is(rq->consumer, "acme"));
    CU_ASSERT_TRUE(fixture_is(rq->plan, "gold"));
    /* The answer says which limits held it: the route's version of gold. */
    rq->answer.status = 200;
    gw_pipeline_answer(rq);
    CU_ASSERT_TRUE(
        fixture_is(gw_fields_get(&rq->answer.fields, "RateLimit-Policy"), "\"gold\";q=100;w=60"));
    gw_req_free(rq);
    /* A key given as its digest; free lets two an hour through, under bob's name whatever
     * the address. */
    for (int i = 0; i < 2; i++) {
        rq = fixture_request(&fx, i == 0 ? CLIENT : "203.0.113.9", "GET", "/api/items", "X-API-Key",
                             "bob-key", NULL);
        CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
        CU_ASSERT_TRUE(fixture_is(rq->consumer, "bob"));
        CU_ASSERT_TRUE(fixture_is(rq->plan, "free"));
        gw_req_free(rq);
    }
    rq = fixture_request(&fx, "192.0.2.77", "GET", "/api/items", "X-API-Key", "bob-key", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, 429);
    CU_ASSERT_EQUAL(rq->decision, GW_DENIED);
    CU_ASSERT_TRUE(fixture_is(rq->consumer, "bob"));
    gw_req_free(rq);
    /* A query key names its consumer just the same. */
    rq = fixture_request(&fx, CLIENT, "GET", "/open/items?key=acme-key", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_TRUE(fixture_is(rq->consumer, "acme"));
    gw_req_free(rq);
    CU_ASSERT_EQUAL(fx.waits, 0);
    fixture_stop(&fx);
}

static void test_unknown_key(void)
{
    struct fixture fx;
    struct gw_req *rq;
    static const char detail[] =
        "an API key issued for this API is required in the X-API-Key header";

    fixture_start(&fx, consumers_yaml);
    /* unknown_key: reject (the default with consumers): 401, for a key no one holds or none. */
    for (int i = 0; i < 3; i++) {
        rq = i < 2 ? fixture_request(&fx, CLIENT, "GET", "/api/items", "X-API-Key", "nope", NULL)
                   : fixture_request(&fx, CLIENT, "GET", "/api/items", NULL);
        expect_refused(rq, 401, detail);
    }
    /* Nor is a consumer's key half-spelled, or doubled. */
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/api/items", "X-API-Key", "acme-ke", NULL),
                   401, detail);
    expect_refused(fixture_request(&fx, CLIENT, "GET", "/api/items", "X-API-Key", "acme-key",
                                   "X-API-Key", "acme-key", NULL),
                   400, "more than once");
    /* unknown_key: anonymous: counted by address under the route's own limits (free). */
    for (int i = 0; i < 3; i++) {
        enum gw_decision decision;
        unsigned refusal;

        rq = fixture_request(&fx, CLIENT, "GET",
                             i == 0 ? "/open/items?key=nope" : "/open/items?key=other", NULL);
        refusal = fixture_head(rq, &decision);
        CU_ASSERT_EQUAL(refusal, i < 2 ? 0 : 429);
        CU_ASSERT_EQUAL(decision, i < 2 ? GW_ALLOWED : GW_DENIED);
    }
    rq = fixture_request(&fx, CLIENT, "GET", "/open/items?key=acme-key", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT); /* acme's own plan, not the address's */
    CU_ASSERT_TRUE(fixture_is(rq->consumer, "acme"));
    gw_req_free(rq);
    fixture_stop(&fx);
}

void register_identify_tests(void)
{
    CU_pSuite s = add_suite_with("gateway_identify", fixture_register_pipeline, NULL);

    add_test(s, "a key from a header", test_key_from_header);
    add_test(s, "a key from the query, decoded; read two ways: 400", test_key_from_query);
    add_test(s, "the key header twice: 400", test_duplicate_key_header);
    add_test(s, "Connection naming the key header: 400", test_connection_names_key);
    add_test(s, "no key: the address, IPv6 by its /64", test_fallback_to_ip);
    add_test(s, "X-Forwarded-For, walked only from a trusted peer", test_trusted_proxies);
    add_test(s, "clients behind a proxy counted apart", test_proxied_clients_counted_apart);
    add_test(s, "a known key: its consumer and plan", test_known_consumer);
    add_test(s, "an unknown key: 401, or the address under unknown_key: anonymous",
             test_unknown_key);
}
