/*
 * al_kjv.h - the King James Bible corpus (data.source: kjv).
 *
 * The text comes from Debian's bible-kjv package: `bible -f -p /usr/lib
 * Gen1:1-Rev22:21` prints one verse per line after its reference
 * ("Ge1:1 In the beginning ..."). The corpus keeps each verse's text
 * verbatim without the reference, one verse per line, and a blank line
 * between chapters: verse numbers and book/chapter headings are counters a
 * byte model would learn to predict for free, so they would flatter the
 * loss without measuring language. (-f rather than the pretty-printed
 * default: no line wrapping, so the output does not depend on COLUMNS.)
 *
 * The file is built once into the cache directory, written atomically,
 * and checked against the size and SHA-256 below every time it is read; a
 * cached file that fails the check is rebuilt.
 */
#ifndef AL_KJV_H
#define AL_KJV_H

#include <stddef.h>
#include "al_util.h"

#define AL_KJV_SIZE 4139038
#define AL_KJV_SHA256 "82a24e4e23c644fe579ed387b20e54eb529cc0a87a25e0810064edb2216780c2"
#define AL_KJV_FILE "kjv.txt"

/* The cache directory: $ATTNLAB_CACHE, else $XDG_CACHE_HOME/attnlab, else
 * $HOME/.cache/attnlab. */
int al_kjv_cache_dir(char *buf, size_t n, al_err *e);

/* The corpus, from cache_dir/kjv.txt when that file passes the check,
 * otherwise built by running `program` (looked up in PATH; "bible" for the
 * real thing) and then cached. *out is malloc'ed and NUL-terminated beyond
 * *n; the caller frees it. */
int al_kjv_corpus(const char *cache_dir, const char *program, char **out, size_t *n,
                  al_err *e);

#endif
