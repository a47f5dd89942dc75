/* One HTTP exchange for a command; design in fetch.h. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/upstream/fetch.h"

struct kept {
    struct gw_fetch_answer *answer;
    size_t len;
};

/* Keeps up to max_body bytes of the body; drops the rest. */
static size_t keep(char *data, size_t size, size_t n, void *cls)
{
    struct kept *k = cls;
    size_t room = k->answer->max_body - k->len, take = size * n < room ? size * n : room;

    if (take > 0) {
        memcpy(k->answer->body + k->len, data, take);
        k->len += take;
        k->answer->body[k->len] = '\0';
    }
    return size * n;
}

int gw_fetch(const struct gw_fetch_ask *ask, struct gw_fetch_answer *answer, const char **why)
{
    struct curl_slist *list = NULL, *more;
    struct kept k = {answer, 0};
    CURL *curl = curl_easy_init();
    CURLcode rc;

    *why = NULL;
    answer->status = 0;
    answer->body = answer->max_body > 0 ? calloc(1, answer->max_body + 1) : NULL;
    if (curl == NULL || (answer->max_body > 0 && answer->body == NULL)) {
        curl_easy_cleanup(curl);
        return -1;
    }
    for (size_t i = 0; ask->headers != NULL && ask->headers[i] != NULL; i++) {
        if ((more = curl_slist_append(list, ask->headers[i])) == NULL) {
            curl_slist_free_all(list);
            curl_easy_cleanup(curl);
            return -1;
        }
        list = more;
    }
    curl_easy_setopt(curl, CURLOPT_URL, ask->url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, ask->method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, ask->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    /* Straight to the address: never through an http_proxy of the environment, which would
     * see the admin token and the client's key. */
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &k);
    rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer->status);
    curl_easy_cleanup(curl);
    curl_slist_free_all(list);
    if (rc != CURLE_OK) {
        *why = curl_easy_strerror(rc);
        return -1;
    }
    return 0;
}

char *gw_fetch_escape(const char *text)
{
    char *escaped = curl_easy_escape(NULL, text, (int)strlen(text)), *copy;

    if (escaped == NULL)
        return NULL;
    copy = strdup(escaped);
    curl_free(escaped);
    return copy;
}
