/* The pipeline sluice runs; design in modules.h. */
#include "gateway/modules.h"
#include "gateway/core/pipeline.h"
#include "gateway/front/http_module.h"
#include "gateway/modules/access/access.h"
#include "gateway/modules/forward/forward.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/log/log.h"
#include "gateway/modules/route/route.h"

int gw_modules_register(void)
{
    static struct gw_module *const pipeline[] = {
        &gw_http_module,  &gw_route_module,   &gw_access_module,
        &gw_limit_module, &gw_forward_module, &gw_log_module,
    };

    return gw_pipeline_register(pipeline, sizeof pipeline / sizeof pipeline[0]);
}
