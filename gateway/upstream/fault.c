/* What went wrong with an exchange: each fault's name in the access log, what a client
 * answered 502 or 504 for it is told, and the fault and kind of failure a libcurl result
 * stands for (enum gw_fault in proxy.h). */
#include <curl/curl.h>

#include "gateway/upstream/proxy.h"

#define OTHER_DETAIL "the upstream's answer could not be read (other)"

/* Each fault's name, and what a client answered for it is told (never the server's address). */
static const struct {
    const char *name, *detail;
} faults[GW_N_FAULTS] = {
    [GW_FAULT_NONE] = {"", OTHER_DETAIL},
    [GW_FAULT_DNS] = {"dns", "the upstream's name could not be resolved (dns)"},
    [GW_FAULT_REFUSED] = {"refused",
                          "the upstream refused the connection or could not be reached (refused)"},
    [GW_FAULT_CONNECT_TIMEOUT] = {"connect_timeout", "the upstream did not accept the connection "
                                                     "in time (connect_timeout)"},
    [GW_FAULT_TLS] = {"tls", "the TLS handshake with the upstream failed (tls)"},
    [GW_FAULT_RESET] = {"reset", "the upstream closed the connection without answering (reset)"},
    [GW_FAULT_TIMEOUT] = {"timeout", "the upstream did not answer in time (timeout)"},
    [GW_FAULT_CUT] = {"cut", OTHER_DETAIL},
    [GW_FAULT_TOO_LARGE] = {"too_large", "the upstream's response head is larger than this "
                                         "gateway passes on (too_large)"},
    [GW_FAULT_INVALID] = {"invalid", "the upstream's answer was not HTTP/1.1 (invalid)"},
    [GW_FAULT_OTHER] = {"other", OTHER_DETAIL},
};

const char *gw_fault_name(enum gw_fault fault)
{
    return fault < GW_N_FAULTS ? faults[fault].name : "other";
}

const char *gw_fault_detail(enum gw_fault fault)
{
    return fault < GW_N_FAULTS ? faults[fault].detail : OTHER_DETAIL;
}

enum gw_fault gw_fault_of(int code)
{
    CURLcode result = (CURLcode)code;

    switch (result) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return GW_FAULT_DNS;
    case CURLE_COULDNT_CONNECT:
        return GW_FAULT_REFUSED;
    case CURLE_OPERATION_TIMEDOUT: /* only the connect timeout is curl's own */
        return GW_FAULT_CONNECT_TIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_USE_SSL_FAILED:
        return GW_FAULT_TLS;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_ABORTED_BY_CALLBACK: /* a reused connection died; the request may not go twice */
        return GW_FAULT_RESET;
    case CURLE_PARTIAL_FILE:
        return GW_FAULT_CUT;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_CONTENT_ENCODING:
        return GW_FAULT_INVALID;
    default:
        return GW_FAULT_OTHER;
    }
}

enum gw_upstream_error gw_fault_error(enum gw_fault fault)
{
    switch (fault) {
    case GW_FAULT_DNS:
    case GW_FAULT_REFUSED:
    case GW_FAULT_CONNECT_TIMEOUT:
    case GW_FAULT_TLS:
        return GW_UPSTREAM_CONNECT;
    case GW_FAULT_TIMEOUT:
        return GW_UPSTREAM_TIMEOUT;
    case GW_FAULT_TOO_LARGE:
        return GW_UPSTREAM_TOO_LARGE;
    default:
        return GW_UPSTREAM_OTHER;
    }
}
