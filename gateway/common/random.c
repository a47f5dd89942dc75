/* Per-thread keystream randomness; design in random.h. */
#include <sodium.h>
#include <string.h>

#include "gateway/common/random.h"

struct stream {
    unsigned char key[crypto_stream_chacha20_KEYBYTES];
    uint64_t nonce;
    size_t left; /* unread bytes at the end of `block` */
    unsigned char block[GW_RANDOM_BLOCK];
};

static _Thread_local struct stream stream;

void gw_random_bytes(void *out, size_t len)
{
    unsigned char *to = out;

    while (len > 0) {
        size_t n;

        if (stream.left == 0) {
            unsigned char nonce[crypto_stream_chacha20_NONCEBYTES];

            if (stream.nonce == 0)
                randombytes_buf(stream.key, sizeof stream.key);
            stream.nonce++;
            memcpy(nonce, &stream.nonce, sizeof nonce);
            crypto_stream_chacha20(stream.block, sizeof stream.block, nonce, stream.key);
            stream.left = sizeof stream.block;
        }
        n = len < stream.left ? len : stream.left;
        memcpy(to, stream.block + sizeof stream.block - stream.left, n);
        sodium_memzero(stream.block + sizeof stream.block - stream.left, n);
        stream.left -= n;
        to += n;
        len -= n;
    }
}

uint32_t gw_random_u32(void)
{
    uint32_t value;

    gw_random_bytes(&value, sizeof value);
    return value;
}
