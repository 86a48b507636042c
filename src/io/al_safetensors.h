/*
 * al_safetensors.h - reading and writing the public safetensors layout.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON (an
 * object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
 * plus an optional "__metadata__" object of string -> string), then the raw
 * row-major data; offsets are relative to the end of the header. This layer
 * knows nothing about models: checkpoint.c maps a model onto it.
 *
 * Reading checks the whole file before anything is used: the header length
 * against the file size, the JSON (through jansson), every entry's dtype,
 * shape and offsets, and that the data regions tile the data section exactly
 * (contiguous from 0, no overlap, ending at the end of the file). Any
 * problem is one line naming the file and what is wrong, never a crash.
 * Writing is atomic (al_open_atomic / al_commit_atomic), the header padded
 * with spaces so the data starts 8-byte aligned.
 */
#ifndef AL_SAFETENSORS_H
#define AL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "al_util.h"

#define AL_ST_MAX_DIMS 8
#define AL_ST_MAX_HEADER (100u << 20)   /* as the reference implementation */

enum al_st_dtype {
    AL_ST_F64, AL_ST_F32, AL_ST_F16, AL_ST_BF16, AL_ST_I64, AL_ST_I32, AL_ST_I16,
    AL_ST_I8, AL_ST_U64, AL_ST_U32, AL_ST_U16, AL_ST_U8, AL_ST_BOOL, AL_ST_N_DTYPES
};
const char *al_st_dtype_name(int dtype);
size_t al_st_dtype_size(int dtype);

/* A tensor to write: data holds numel(shape) elements of dtype. */
typedef struct al_st_out {
    const char *name;
    int dtype;                        /* enum al_st_dtype */
    int ndim;
    int64_t shape[AL_ST_MAX_DIMS];
    const void *data;
} al_st_out;

/* Write tensors (in this order) and metadata pairs meta[2i] -> meta[2i+1]
 * to path atomically. */
int al_st_write(const char *path, const al_st_out *t, int n, const char *const *meta,
                int n_meta, al_err *e);

/* A tensor read from a file; data points into the file's buffer (possibly
 * unaligned: copy it out with memcpy). */
typedef struct al_st_tensor {
    char *name;                       /* owned by the al_st_file */
    int dtype, ndim;
    int64_t shape[AL_ST_MAX_DIMS];
    size_t begin, end;                /* relative to the data section */
    size_t numel;
    const unsigned char *data;
} al_st_tensor;

typedef struct al_st_file {
    char path[1024];                  /* for error messages */
    char *buf;                        /* the whole file, owned */
    size_t size, data_start;
    int n;
    al_st_tensor *t;                  /* owned, in header order */
    int n_meta;
    char **meta_key, **meta_val;      /* owned */
} al_st_file;

/* Read and check path. On failure f holds nothing to free. */
int al_st_read(const char *path, al_st_file *f, al_err *e);
const al_st_tensor *al_st_find(const al_st_file *f, const char *name);
/* A metadata value, or NULL. */
const char *al_st_meta(const al_st_file *f, const char *key);
void al_st_free(al_st_file *f);

/* Copy s into out (n bytes) with control and non-ASCII bytes replaced by
 * '?', so that text from a corrupt file keeps an error message on one line. */
const char *al_st_printable(char *out, size_t n, const char *s);

#endif
