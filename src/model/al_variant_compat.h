/*
 * al_variant_compat.h - tables of interface versions 2 to 4 (the layout of
 * attnlab_variant_v4.h), wrapped into version 5.
 *
 * The one place that knows the older versions: a plugin built before
 * version 5 keeps loading, its binary unchanged. Each wrapper's context is
 * the old table and the shape, and each version-5 member calls the old
 * member with the shape, as the old interface did; a member the old table
 * lacks (NULL, or later than its version) is NULL in the wrapper, so the
 * registry settles its default as for any table.
 */
#ifndef AL_VARIANT_COMPAT_H
#define AL_VARIANT_COMPAT_H

#include "attnlab_variant.h"
#include "al_util.h"

typedef struct al_variant_compat al_variant_compat;

/* Wrap `old`, whose api_version is not AL_VARIANT_API_VERSION: *out owns
 * the version-5 table (al_variant_compat_table), which points into `old`
 * (kept: a plugin stays loaded). Errors, naming origin: a version outside
 * AL_VARIANT_API_MIN .. AL_VARIANT_API_VERSION (both numbers given). */
int al_variant_compat_wrap(const al_variant *old, const char *origin, al_variant_compat **out,
                           al_err *e);
const al_variant *al_variant_compat_table(const al_variant_compat *c);
void al_variant_compat_free(al_variant_compat *c);   /* NULL: nothing */

/* A name from a plugin for a message: control and non-ASCII bytes as '?',
 * at most n - 1 characters, so that the message stays one line. */
const char *al_variant_printable(char *out, size_t n, const char *s);

#endif
