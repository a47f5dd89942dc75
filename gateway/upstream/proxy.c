/* libcurl's global state, and shutdown's abort that every wait looks at; the design of
 * forwarding is in proxy.h, and handle.h says which file holds which part of it. */
#include <curl/curl.h>
#include <stdatomic.h>

#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"

static atomic_bool aborting;

int gw_proxy_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

const char *gw_proxy_library_version(void)
{
    return curl_version_info(CURLVERSION_NOW)->version;
}

void gw_proxy_cleanup(void)
{
    gw_upstream_pools_free(NULL);
    curl_global_cleanup();
}

void gw_proxy_abort_all(void)
{
    atomic_store(&aborting, true);
}

bool gw_proxy_aborting(void)
{
    return atomic_load(&aborting);
}
