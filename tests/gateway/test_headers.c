#include "gateway/common/headers.h"
#include "tests/unit.h"

static void test_hop_by_hop(void)
{
    const char *fixed[] = {
        "Connection",        "keep-alive",        "Proxy-Connection", "TE",
        "Trailer",           "transfer-encoding", "Upgrade",          "Proxy-Authorization",
        "Proxy-Authenticate"};

    for (unsigned i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        CU_ASSERT_TRUE(gw_header_is_hop_by_hop(fixed[i], NULL));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("Content-Type", NULL));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("Authorization", NULL));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("Trailers", NULL));
}

static void test_named_by_connection(void)
{
    const char *connection = "close, X-Secret ,x-other,,";

    CU_ASSERT_TRUE(gw_header_is_hop_by_hop("X-Secret", connection));
    CU_ASSERT_TRUE(gw_header_is_hop_by_hop("X-Other", connection));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("X-Secre", connection));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("X-Secrets", connection));
    CU_ASSERT_FALSE(gw_header_is_hop_by_hop("Content-Type", connection));
}

void register_headers_tests(void)
{
    CU_pSuite s = add_suite("gateway_headers");

    add_test(s, "the hop-by-hop fields", test_hop_by_hop);
    add_test(s, "fields named by Connection", test_named_by_connection);
}
