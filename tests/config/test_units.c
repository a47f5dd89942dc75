#include <arpa/inet.h>
#include <stdlib.h>

#include "config/config.h"
#include "tests/unit.h"

static void test_durations(void)
{
    int64_t ns;

    CU_ASSERT_EQUAL(config_parse_duration("250ms", &ns), 0);
    CU_ASSERT_EQUAL(ns, 250000000);
    CU_ASSERT_EQUAL(config_parse_duration("10s", &ns), 0);
    CU_ASSERT_EQUAL(ns, 10000000000);
    CU_ASSERT_EQUAL(config_parse_duration("1m", &ns), 0);
    CU_ASSERT_EQUAL(ns, 60000000000);
    CU_ASSERT_EQUAL(config_parse_duration("2h", &ns), 0);
    CU_ASSERT_EQUAL(ns, 7200000000000);
    CU_ASSERT_EQUAL(config_parse_duration("1d", &ns), 0);
    CU_ASSERT_EQUAL(ns, 86400000000000);
    CU_ASSERT_EQUAL(config_parse_duration("30", &ns), 0);
    CU_ASSERT_EQUAL(ns, 30000000000);
    CU_ASSERT_EQUAL(config_parse_duration("0", &ns), 0);
    CU_ASSERT_EQUAL(ns, 0);
    CU_ASSERT_EQUAL(config_parse_duration("", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("s", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("-1s", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("1.5s", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("10 s", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("10sec", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("99999999999999d", &ns), -1);
    CU_ASSERT_EQUAL(config_parse_duration("99999999999999999999999", &ns), -1);
}

static void test_sizes(void)
{
    uint64_t b;

    CU_ASSERT_EQUAL(config_parse_size("512", &b), 0);
    CU_ASSERT_EQUAL(b, 512);
    CU_ASSERT_EQUAL(config_parse_size("64KiB", &b), 0);
    CU_ASSERT_EQUAL(b, 65536);
    CU_ASSERT_EQUAL(config_parse_size("10MiB", &b), 0);
    CU_ASSERT_EQUAL(b, 10485760);
    CU_ASSERT_EQUAL(config_parse_size("1GiB", &b), 0);
    CU_ASSERT_EQUAL(b, 1073741824);
    CU_ASSERT_EQUAL(config_parse_size("2MB", &b), 0);
    CU_ASSERT_EQUAL(b, 2000000);
    CU_ASSERT_EQUAL(config_parse_size("10mib", &b), -1);
    CU_ASSERT_EQUAL(config_parse_size("MiB", &b), -1);
    CU_ASSERT_EQUAL(config_parse_size("-5", &b), -1);
    CU_ASSERT_EQUAL(config_parse_size("99999999999999GiB", &b), -1);
}

/* Bounds in error messages: the largest unit that holds the value whole, read back the same. */
static void test_formatting(void)
{
    char out[32];
    int64_t ns;
    uint64_t b;

    CU_ASSERT_STRING_EQUAL(config_format_duration(3600000000000, out, sizeof out), "1h");
    CU_ASSERT_STRING_EQUAL(config_format_duration(86400000000000, out, sizeof out), "1d");
    CU_ASSERT_STRING_EQUAL(config_format_duration(90000000000, out, sizeof out), "90s");
    CU_ASSERT_STRING_EQUAL(config_format_duration(1000000000, out, sizeof out), "1s");
    CU_ASSERT_STRING_EQUAL(config_format_duration(250000000, out, sizeof out), "250ms");
    CU_ASSERT_STRING_EQUAL(config_format_duration(1, out, sizeof out), "1ns");
    CU_ASSERT_STRING_EQUAL(config_format_duration(0, out, sizeof out), "0ns");
    CU_ASSERT_EQUAL(
        config_parse_duration(config_format_duration(5400000000000, out, sizeof out), &ns), 0);
    CU_ASSERT_EQUAL(ns, 5400000000000); /* 90m */
    CU_ASSERT_STRING_EQUAL(config_format_size(4096, out, sizeof out), "4KiB");
    CU_ASSERT_STRING_EQUAL(config_format_size(1 << 20, out, sizeof out), "1MiB");
    CU_ASSERT_STRING_EQUAL(config_format_size(3ULL << 30, out, sizeof out), "3GiB");
    CU_ASSERT_STRING_EQUAL(config_format_size(1536, out, sizeof out), "1536");
    CU_ASSERT_STRING_EQUAL(config_format_size(0, out, sizeof out), "0");
    CU_ASSERT_EQUAL(config_parse_size(config_format_size(20 << 10, out, sizeof out), &b), 0);
    CU_ASSERT_EQUAL(b, 20 << 10);
    CU_ASSERT_STRING_EQUAL(config_format_size(1 << 20, out, 3), "1M"); /* cut, terminated */
}

static void test_cidrs(void)
{
    struct config_cidr c;

    CU_ASSERT_EQUAL(config_parse_cidr("10.0.0.0/8", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET);
    CU_ASSERT_EQUAL(c.prefix_len, 8);
    CU_ASSERT_EQUAL(c.addr[0], 10);
    CU_ASSERT_EQUAL(config_parse_cidr("192.168.1.7", &c), 0);
    CU_ASSERT_EQUAL(c.prefix_len, 32);
    CU_ASSERT_EQUAL(config_parse_cidr("2001:db8::/32", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET6);
    CU_ASSERT_EQUAL(c.prefix_len, 32);
    CU_ASSERT_EQUAL(config_parse_cidr("::1", &c), 0);
    CU_ASSERT_EQUAL(c.prefix_len, 128);
    CU_ASSERT_EQUAL(config_parse_cidr("0.0.0.0/0", &c), 0);
    CU_ASSERT_EQUAL(config_parse_cidr("10.1.2.3/8", &c), -1); /* host bits set */
    CU_ASSERT_EQUAL(config_parse_cidr("10.0.0.0/33", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("10.0.0.0/", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("10.0.0.0/x", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("example.com/8", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("/8", &c), -1);
}

static void test_mapped_cidrs(void)
{
    struct config_cidr c;

    /* IPv4-mapped blocks are the IPv4 blocks they name. */
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:10.0.0.0/104", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET);
    CU_ASSERT_EQUAL(c.prefix_len, 8);
    CU_ASSERT_EQUAL(c.addr[0], 10);
    CU_ASSERT_EQUAL(c.addr[1], 0);
    CU_ASSERT_EQUAL(c.addr[12], 0);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:203.0.113.3", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET);
    CU_ASSERT_EQUAL(c.prefix_len, 32);
    CU_ASSERT_EQUAL(c.addr[0], 203);
    CU_ASSERT_EQUAL(c.addr[3], 3);
    CU_ASSERT_EQUAL(config_parse_cidr("::FFFF:c000:0200/120", &c), 0); /* 192.0.2.0/24 */
    CU_ASSERT_EQUAL(c.family, AF_INET);
    CU_ASSERT_EQUAL(c.prefix_len, 24);
    CU_ASSERT_EQUAL(c.addr[0], 192);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:0.0.0.0/96", &c), 0); /* all of IPv4 */
    CU_ASSERT_EQUAL(c.family, AF_INET);
    CU_ASSERT_EQUAL(c.prefix_len, 0);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:203.0.113.3/128", &c), 0);
    CU_ASSERT_EQUAL(c.prefix_len, 32);
    /* Host bits are checked on the IPv4 block. */
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:10.1.0.0/104", &c), -1);
    /* Shorter than /96: IPv4 and IPv6 in one block. */
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:0.0.0.0/95", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:0.0.0.0/80", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:10.0.0.0/8", &c), -1);
    CU_ASSERT_EQUAL(config_parse_cidr("::ffff:10.0.0.0/129", &c), -1);
    /* Not mapped: IPv6 as before. */
    CU_ASSERT_EQUAL(config_parse_cidr("::10.0.0.0/104", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET6);
    CU_ASSERT_EQUAL(config_parse_cidr("::/0", &c), 0);
    CU_ASSERT_EQUAL(c.family, AF_INET6);
    CU_ASSERT_EQUAL(c.prefix_len, 0);
}

static void test_endpoints(void)
{
    struct config_endpoint e;

    CU_ASSERT_EQUAL(config_parse_endpoint("127.0.0.1:8080", &e), 0);
    CU_ASSERT_STRING_EQUAL(e.host, "127.0.0.1");
    CU_ASSERT_EQUAL(e.port, 8080);
    free(e.host);
    CU_ASSERT_EQUAL(config_parse_endpoint("[::1]:0", &e), 0);
    CU_ASSERT_STRING_EQUAL(e.host, "::1");
    CU_ASSERT_EQUAL(e.port, 0);
    free(e.host);
    CU_ASSERT_EQUAL(config_parse_endpoint("localhost:80", &e), 0);
    free(e.host);
    CU_ASSERT_EQUAL(config_parse_endpoint("::1:8080", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint("[::1]8080", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint("[nonsense]:80", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint("host:65536", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint("host:", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint(":80", &e), -1);
    CU_ASSERT_EQUAL(config_parse_endpoint("host", &e), -1);
}

void register_units_tests(void)
{
    CU_pSuite s = add_suite("config_units");

    add_test(s, "durations", test_durations);
    add_test(s, "sizes", test_sizes);
    add_test(s, "durations and sizes written out", test_formatting);
    add_test(s, "address blocks", test_cidrs);
    add_test(s, "IPv4-mapped address blocks are IPv4", test_mapped_cidrs);
    add_test(s, "host:port", test_endpoints);
}
