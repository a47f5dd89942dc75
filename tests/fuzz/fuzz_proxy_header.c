/* libFuzzer: the PROXY protocol header reader (proxy_header.c). The first byte picks the
 * versions accepted; the rest is read as it would arrive, one byte more each time. A header
 * is MORE until it is whole, then DONE with the same length however much follows; INVALID,
 * once said, stays said; a DONE header is never longer than what was read, nor than
 * GW_PROXY_HEADER_MAX, and an address it gives is IPv4 or IPv6. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gateway/front/proxy_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum gw_proxy_header_step last = GW_PROXY_HEADER_MORE;
    size_t done_length = 0;
    unsigned versions;

    if (size < 1)
        return 0;
    versions = (data[0] % 3) + 1; /* v1, v2 or both */
    data++, size--;
    if (size > GW_PROXY_HEADER_MAX + 16)
        size = GW_PROXY_HEADER_MAX + 16;
    for (size_t len = 0; len <= size; len++) {
        struct gw_proxy_header h;
        enum gw_proxy_header_step step = gw_proxy_header_read(data, len, versions, &h);

        if (last == GW_PROXY_HEADER_INVALID && step != GW_PROXY_HEADER_INVALID)
            abort();
        if (last == GW_PROXY_HEADER_DONE &&
            (step != GW_PROXY_HEADER_DONE || h.length != done_length))
            abort();
        if (step == GW_PROXY_HEADER_MORE && len >= GW_PROXY_HEADER_MAX)
            abort();
        if (step == GW_PROXY_HEADER_INVALID && h.why == NULL)
            abort();
        if (step == GW_PROXY_HEADER_DONE) {
            if (h.length == 0 || h.length > len || h.length > GW_PROXY_HEADER_MAX)
                abort();
            if (h.has_source && h.source.ss_family != AF_INET && h.source.ss_family != AF_INET6)
                abort();
            done_length = h.length;
        }
        last = step;
    }
    return 0;
}
