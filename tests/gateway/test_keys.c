#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "gateway/identity/keys.h"
#include "tests/unit.h"

static struct gw_addr addr(const char *text)
{
    struct gw_addr a;

    CU_ASSERT_EQUAL_FATAL(gw_addr_parse(text, strlen(text), &a), 0);
    return a;
}

static void key_of(const struct gw_addr *a, char out[GW_KEY_LEN])
{
    gw_ip_key(a, 64, out);
}

static struct config_cidr trusted_items[2];
static struct config_cidrs trusted = {trusted_items, 2};

static void setup_trusted(void)
{
    config_parse_cidr("10.0.0.0/8", &trusted_items[0]);
    config_parse_cidr("fd00::/8", &trusted_items[1]);
}

static void test_untrusted_peer_ignores_header(void)
{
    struct gw_addr peer = addr("203.0.113.5"), client;
    char key[GW_KEY_LEN];

    setup_trusted();
    client = gw_client_addr(&peer, "1.2.3.4", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:203.0.113.5");
}

static void test_trusted_peer_walks_from_the_right(void)
{
    struct gw_addr peer = addr("10.0.0.1"), client;
    char key[GW_KEY_LEN];

    setup_trusted();
    /* The client forged "6.6.6.6"; the first untrusted entry from the right is the truth. */
    client = gw_client_addr(&peer, "6.6.6.6, 198.51.100.7, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.7");
    client = gw_client_addr(&peer, "6.6.6.6,198.51.100.7", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.7");
    /* Several header fields arrive joined with ",". */
    client = gw_client_addr(&peer, "6.6.6.6,198.51.100.8,10.2.2.2", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.8");
    /* All trusted: the leftmost is the client. */
    client = gw_client_addr(&peer, "10.9.9.9, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.9.9.9");
    /* An entry that is no address stops the walk at the last trusted hop. */
    client = gw_client_addr(&peer, "198.51.100.9, garbage, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.1.1.1");
    /* No header: the peer. */
    client = gw_client_addr(&peer, NULL, &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.0.0.1");
    /* IPv6 entries, bracketed or not. */
    client = gw_client_addr(&peer, "[2001:db8:1:2:3:4:5:6], fd00::1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:2001:db8:1:2::/64");
}

/* The key gw_addr_parse gives `text`, or "" when it refuses it. */
static const char *parsed_key(const char *text, char out[GW_KEY_LEN])
{
    struct gw_addr a;

    out[0] = '\0';
    if (gw_addr_parse(text, strlen(text), &a) == 0)
        key_of(&a, out);
    return out;
}

static void test_entry_forms(void)
{
    char key[GW_KEY_LEN];

    CU_ASSERT_STRING_EQUAL(parsed_key("203.0.113.7", key), "ip:203.0.113.7");
    CU_ASSERT_STRING_EQUAL(parsed_key(" 203.0.113.7\t", key), "ip:203.0.113.7");
    /* Ports, as some load balancers write them. */
    CU_ASSERT_STRING_EQUAL(parsed_key("203.0.113.7:4711", key), "ip:203.0.113.7");
    CU_ASSERT_STRING_EQUAL(parsed_key(" 203.0.113.7:0 ", key), "ip:203.0.113.7");
    CU_ASSERT_STRING_EQUAL(parsed_key("203.0.113.7:65535", key), "ip:203.0.113.7");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1]:443", key), "ip:2001:db8::/64");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1]", key), "ip:2001:db8::/64");
    CU_ASSERT_STRING_EQUAL(parsed_key(" [2001:db8::1]:443 ", key), "ip:2001:db8::/64");
    /* Unbracketed, a last ":443" is an IPv6 group: inet_pton decides. */
    CU_ASSERT_STRING_EQUAL(parsed_key("2001:db8:1:2::1:443", key), "ip:2001:db8:1:2::/64");
    CU_ASSERT_STRING_EQUAL(parsed_key("2001:db8:1:2:3:4:5:6:443", key), "");
    /* IPv4-mapped is IPv4, with or without brackets and port. */
    CU_ASSERT_STRING_EQUAL(parsed_key("::ffff:203.0.113.3", key), "ip:203.0.113.3");
    CU_ASSERT_STRING_EQUAL(parsed_key("::FFFF:cb00:7103", key), "ip:203.0.113.3");
    CU_ASSERT_STRING_EQUAL(parsed_key("[::ffff:203.0.113.3]:80", key), "ip:203.0.113.3");
    CU_ASSERT_STRING_EQUAL(parsed_key("::203.0.113.3", key), "ip:::/64"); /* not mapped */
    /* Bad ports and other debris. */
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:99999", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:65536", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:000080", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:12a", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:-1", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4: 80", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4 :80", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("1.2.3.4:80:80", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key(":80", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1]:", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1]:99999", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1]443", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[2001:db8::1", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[]", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("[]:80", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("unknown", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("", key), "");
    CU_ASSERT_STRING_EQUAL(parsed_key("   ", key), "");
}

static void test_ports_and_mapped_in_the_walk(void)
{
    struct gw_addr peer = addr("10.0.0.1"), client;
    char key[GW_KEY_LEN];

    setup_trusted();
    /* A mapped trusted hop is trusted (10.0.0.0/8): the walk goes on past it. */
    client = gw_client_addr(&peer, "6.6.6.6, 198.51.100.7, ::ffff:10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.7");
    client = gw_client_addr(&peer, "6.6.6.6, 198.51.100.7, [::ffff:10.1.1.1]:443", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.7");
    /* A mapped client is keyed as its IPv4 address. */
    client = gw_client_addr(&peer, "::ffff:203.0.113.3, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:203.0.113.3");
    /* Ports on both families, on clients and on trusted hops. */
    client = gw_client_addr(&peer, "6.6.6.6, 198.51.100.7:4711, 10.1.1.1:80", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:198.51.100.7");
    client = gw_client_addr(&peer, "6.6.6.6, [2001:db8:1:2::9]:443, [fd00::1]:80", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:2001:db8:1:2::/64");
    /* A bad port is no entry a proxy of ours wrote: the walk stops at the last trusted hop. */
    client = gw_client_addr(&peer, "198.51.100.7, 1.2.3.4:, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.1.1.1");
    client = gw_client_addr(&peer, "198.51.100.7, 1.2.3.4:99999, 10.1.1.1", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.1.1.1");
    client = gw_client_addr(&peer, "198.51.100.7, 1.2.3.4:12a", &trusted);
    key_of(&client, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:10.0.0.1");
}

static void test_mapped_exemption(void)
{
    struct config_cidr exempt_items[2];
    struct config_cidrs exempt = {exempt_items, 2};
    struct gw_addr a;

    CU_ASSERT_EQUAL_FATAL(config_parse_cidr("192.0.2.0/24", &exempt_items[0]), 0);
    /* Written the mapped way in the config, kept as the IPv4 block 198.51.100.0/24. */
    CU_ASSERT_EQUAL_FATAL(config_parse_cidr("::ffff:198.51.100.0/120", &exempt_items[1]), 0);
    a = addr("::ffff:192.0.2.77");
    CU_ASSERT_EQUAL(a.family, AF_INET);
    CU_ASSERT_TRUE(gw_cidrs_contain(&exempt, &a));
    a = addr("[::ffff:192.0.2.77]:8080");
    CU_ASSERT_TRUE(gw_cidrs_contain(&exempt, &a));
    a = addr("198.51.100.4");
    CU_ASSERT_TRUE(gw_cidrs_contain(&exempt, &a));
    a = addr("::ffff:198.51.100.4");
    CU_ASSERT_TRUE(gw_cidrs_contain(&exempt, &a));
    a = addr("::ffff:192.0.3.1");
    CU_ASSERT_FALSE(gw_cidrs_contain(&exempt, &a));
    a = addr("::192.0.2.77"); /* IPv4-compatible, not mapped: an IPv6 address */
    CU_ASSERT_EQUAL(a.family, AF_INET6);
    CU_ASSERT_FALSE(gw_cidrs_contain(&exempt, &a));
}

/* IPv4 keys are written by hand, not by inet_ntop(): every octet width, the extremes, and
 * what inet_ntop() says for each of 2,000 addresses. */
static void test_ipv4_key_text(void)
{
    static const char *const texts[] = {"0.0.0.0", "255.255.255.255", "1.22.103.9", "10.0.0.1",
                                        "100.200.30.4"};
    char key[GW_KEY_LEN], expected[GW_KEY_LEN];
    struct gw_addr a;

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        a = addr(texts[i]);
        key_of(&a, key);
        snprintf(expected, sizeof expected, "ip:%s", texts[i]);
        CU_ASSERT_STRING_EQUAL(key, expected);
    }
    a.family = AF_INET;
    for (unsigned n = 0; n < 2000; n++) {
        char text[INET_ADDRSTRLEN];
        uint32_t value = n * 2654435761u;

        memcpy(a.bytes, &value, 4);
        inet_ntop(AF_INET, a.bytes, text, sizeof text);
        key_of(&a, key);
        snprintf(expected, sizeof expected, "ip:%s", text);
        CU_ASSERT_STRING_EQUAL_FATAL(key, expected);
    }
}

static void test_ipv6_grouping(void)
{
    struct gw_addr a = addr("2001:db8:aaaa:bbbb:1:2:3:4");
    struct gw_addr b = addr("2001:db8:aaaa:bbbb:ffff::9");
    char ka[GW_KEY_LEN], kb[GW_KEY_LEN];

    gw_ip_key(&a, 64, ka);
    gw_ip_key(&b, 64, kb);
    CU_ASSERT_STRING_EQUAL(ka, "ip:2001:db8:aaaa:bbbb::/64");
    CU_ASSERT_STRING_EQUAL(ka, kb);
    gw_ip_key(&a, 128, ka);
    CU_ASSERT_STRING_EQUAL(ka, "ip:2001:db8:aaaa:bbbb:1:2:3:4/128");
    gw_ip_key(&a, 60, ka);
    CU_ASSERT_STRING_EQUAL(ka, "ip:2001:db8:aaaa:bbb0::/60");
}

static void test_sockaddr(void)
{
    struct sockaddr_in6 six = {.sin6_family = AF_INET6};
    struct sockaddr_in four = {.sin_family = AF_INET};
    struct gw_addr a;
    char key[GW_KEY_LEN];

    inet_pton(AF_INET6, "::ffff:192.0.2.1", &six.sin6_addr);
    CU_ASSERT_EQUAL(gw_addr_from_sockaddr((struct sockaddr *)&six, &a), 0);
    key_of(&a, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:192.0.2.1");
    inet_pton(AF_INET, "192.0.2.2", &four.sin_addr);
    CU_ASSERT_EQUAL(gw_addr_from_sockaddr((struct sockaddr *)&four, &a), 0);
    key_of(&a, key);
    CU_ASSERT_STRING_EQUAL(key, "ip:192.0.2.2");
    CU_ASSERT_EQUAL(gw_addr_from_sockaddr(NULL, &a), -1);
}

static void test_value_keys(void)
{
    char key[GW_KEY_LEN], other[GW_KEY_LEN], long_value[1000];

    gw_value_key("header", "abc123", key);
    CU_ASSERT_STRING_EQUAL(key, "header:abc123");
    memset(long_value, 'k', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    gw_value_key("query", long_value, key);
    CU_ASSERT_EQUAL(strncmp(key, "query#", 6), 0);
    CU_ASSERT_EQUAL(strlen(key), 6 + 64);
    long_value[500] = 'j';
    gw_value_key("query", long_value, other);
    CU_ASSERT_STRING_NOT_EQUAL(key, other);
}

static void test_cidr_membership(void)
{
    struct gw_addr in = addr("10.200.0.1"), out = addr("11.0.0.1"), six = addr("fd12::1");

    setup_trusted();
    CU_ASSERT_TRUE(gw_cidrs_contain(&trusted, &in));
    CU_ASSERT_FALSE(gw_cidrs_contain(&trusted, &out));
    CU_ASSERT_TRUE(gw_cidrs_contain(&trusted, &six));
}

void register_keys_tests(void)
{
    CU_pSuite s = add_suite("gateway_keys");

    add_test(s, "an untrusted peer's X-Forwarded-For is ignored",
             test_untrusted_peer_ignores_header);
    add_test(s, "X-Forwarded-For is walked from the right", test_trusted_peer_walks_from_the_right);
    add_test(s, "X-Forwarded-For entries: ports, brackets, mapped", test_entry_forms);
    add_test(s, "ports and mapped addresses in the walk", test_ports_and_mapped_in_the_walk);
    add_test(s, "IPv4 exemptions match mapped addresses", test_mapped_exemption);
    add_test(s, "IPv4 keys: dotted decimal as inet_ntop() writes it", test_ipv4_key_text);
    add_test(s, "IPv6 clients are grouped by prefix", test_ipv6_grouping);
    add_test(s, "socket addresses, IPv4-mapped included", test_sockaddr);
    add_test(s, "header and query keys; long ones hashed", test_value_keys);
    add_test(s, "address block membership", test_cidr_membership);
}
