/*
 * al_sha256.h - SHA-256 (FIPS 180-4), for checking cached corpus files and
 * naming the checkpoints runs start from.
 */
#ifndef AL_SHA256_H
#define AL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "al_util.h"

typedef struct al_sha256 {
    uint32_t h[8];
    uint64_t len;            /* bytes hashed so far */
    unsigned char buf[64];   /* a partial block */
    size_t nbuf;
} al_sha256;

void al_sha256_init(al_sha256 *s);
void al_sha256_update(al_sha256 *s, const void *data, size_t n);
void al_sha256_final(al_sha256 *s, unsigned char out[32]);
/* One call: the digest of data[0..n) as 64 lowercase hex digits + NUL. */
void al_sha256_hex(const void *data, size_t n, char hex[65]);
/* The digest of a whole file (which checkpoint a run came from). */
int al_sha256_file(const char *path, char hex[65], al_err *e);

#endif
