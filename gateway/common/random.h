/*
 * random: unpredictable bytes for request ids, trace and span ids, without a system call per
 * request. libsodium's randombytes_buf() asks the kernel (getrandom) on every call, which was
 * two system calls per request, 4% of a denied request's CPU. Instead each thread keys a
 * ChaCha20 stream once from randombytes_buf() and hands out its keystream, a block of
 * GW_RANDOM_BLOCK bytes at a time, each new block under the next nonce; bytes handed out are
 * wiped from the buffer. The key stays in the thread, so threads never share a stream and
 * nothing is locked. sluice never forks, which is what would make two processes share one.
 */
#ifndef SLUICE_GATEWAY_RANDOM_H
#define SLUICE_GATEWAY_RANDOM_H

#include <stddef.h>
#include <stdint.h>

#define GW_RANDOM_BLOCK 512

/* Fills `out` with `len` unpredictable bytes. sodium_init() must have run. */
void gw_random_bytes(void *out, size_t len);

/* A uniform 32-bit number, as gw_random_bytes(). */
uint32_t gw_random_u32(void);

#endif
