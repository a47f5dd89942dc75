/*
 * modules: the pipeline sluice runs (pipeline.h), in order: the HTTP adapter's context, then
 * what the request is and its route, whether its client may use it, its limits, the upstream,
 * and last the access log (which writes the fields the others gave it).
 *
 * Adding a concern is one module (a folder under gateway/modules/ with its module table) and
 * one line here; README.md, "Adding a module", walks through it.
 */
#ifndef SLUICE_GATEWAY_MODULES_H
#define SLUICE_GATEWAY_MODULES_H

/* Registers the pipeline's modules; once, before the first request. 0, or -1. */
int gw_modules_register(void);

#endif
