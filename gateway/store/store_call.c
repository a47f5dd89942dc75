/* One decision asked of the Redis store; design in store_call.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/store/store_call.h"

struct gw_store_call *gw_store_call_new(int64_t deadline_ns, uint64_t state)
{
    struct gw_store_call *call = malloc(sizeof *call); /* its arguments are made in place */

    if (call == NULL)
        return NULL;
    call->next = NULL;
    call->deadline_ns = deadline_ns;
    call->state = state;
    call->resent = false;
    call->retried = false;
    call->out = NULL;
    call->done = NULL;
    call->done_arg = NULL;
    return call;
}

void gw_store_call_free(struct gw_store_call *call)
{
    free(call);
}

void gw_store_call_deliver(struct gw_store_call *call, enum gw_store_result result)
{
    if (result == GW_STORE_OK && call->out != NULL)
        memcpy(call->out, call->answer, call->args.n_limits * sizeof *call->out);
    if (call->done != NULL)
        call->done(call->done_arg, result);
    gw_store_call_free(call);
}
