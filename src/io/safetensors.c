/*
 * safetensors.c - the safetensors container: header through jansson, data
 * raw. See al_safetensors.h for what reading guarantees.
 */
#include "al_safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Data are written and read as the host lays them out; the format is
 * little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data are little-endian");

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
    {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},   {"BOOL", 1},
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == AL_ST_N_DTYPES, "dtype table");

const char *al_st_dtype_name(int d) { return d >= 0 && d < AL_ST_N_DTYPES ? dtypes[d].name : "?"; }
size_t al_st_dtype_size(int d) { return d >= 0 && d < AL_ST_N_DTYPES ? dtypes[d].size : 0; }

static int dtype_of(const char *s)
{
    for (int i = 0; i < AL_ST_N_DTYPES; i++)
        if (strcmp(dtypes[i].name, s) == 0) return i;
    return -1;
}

const char *al_st_printable(char *out, size_t n, const char *s)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < n; i++)
        out[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '?' : s[i];
    if (n) out[i < n ? i : n - 1] = 0;
    return out;
}

/* ------------------------------------------------------------ writing */

static json_t *tensor_entry(const al_st_out *t, size_t begin, size_t *end)
{
    json_t *shape = json_array();
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_array_append_new(shape, json_integer(t->shape[d]));
        numel *= (size_t)t->shape[d];
    }
    *end = begin + numel * al_st_dtype_size(t->dtype);
    return json_pack("{s:s, s:o, s:[I,I]}", "dtype", al_st_dtype_name(t->dtype), "shape",
                     shape, "data_offsets", (json_int_t)begin, (json_int_t)*end);
}

/* The header text, padded with spaces to a multiple of 8; *sizes gets each
 * tensor's byte count. Returns malloc'ed text. */
static char *build_header(const al_st_out *t, int n, const char *const *meta, int n_meta,
                          size_t *sizes, size_t *len)
{
    json_t *root = json_object();
    if (n_meta) {
        json_t *m = json_object();
        for (int i = 0; i < n_meta; i++)
            json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1]));
        json_object_set_new(root, "__metadata__", m);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        AL_ASSERT(t[i].ndim >= 0 && t[i].ndim <= AL_ST_MAX_DIMS && t[i].dtype >= 0 &&
                  t[i].dtype < AL_ST_N_DTYPES);
        size_t end;
        json_t *ent = tensor_entry(&t[i], off, &end);
        AL_ASSERT(ent != NULL && json_object_get(root, t[i].name) == NULL);
        json_object_set_new(root, t[i].name, ent);
        sizes[i] = end - off;
        off = end;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    AL_ASSERT(text != NULL);
    size_t raw = strlen(text), padded = (raw + 8 + 7) / 8 * 8 - 8;
    char *out = al_malloc(padded + 1);
    memcpy(out, text, raw);
    memset(out + raw, ' ', padded - raw);
    out[padded] = 0;
    free(text);
    *len = padded;
    return out;
}

int al_st_write(const char *path, const al_st_out *t, int n, const char *const *meta,
                int n_meta, al_err *e)
{
    size_t *sizes = al_calloc((size_t)n + 1, sizeof *sizes), hlen;
    char *header = build_header(t, n, meta, n_meta, sizes, &hlen), tmp[4200];
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int rc = -1;
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) goto free_header;
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(header, 1, hlen, f) != hlen;
    for (int i = 0; i < n && !bad; i++)
        bad = sizes[i] && fwrite(t[i].data, 1, sizes[i], f) != sizes[i];
    if (bad) {
        al_errf(e, "%s: write failed: %s", path, strerror(errno));
        fclose(f);
        unlink(tmp);
        goto free_header;
    }
    rc = al_commit_atomic(f, tmp, path, e);
free_header:
    free(header);
    free(sizes);
    return rc;
}

/* ------------------------------------------------------------ reading */

static int ferr(al_st_file *f, al_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ferr(al_st_file *f, al_err *e, const char *fmt, ...)
{
    char msg[768], clean[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    al_errf(e, "%s: %s", f->path, al_st_printable(clean, sizeof clean, msg));
    al_st_free(f);
    return -1;
}

static int read_shape(al_st_file *f, al_st_tensor *t, json_t *shape, al_err *e)
{
    if (!json_is_array(shape) || json_array_size(shape) > AL_ST_MAX_DIMS)
        return ferr(f, e, "tensor '%.80s': 'shape' must be an array of at most %d sizes",
                    t->name, AL_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *x = json_array_get(shape, d);
        json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
        if (v < 0 || (v > 0 && t->numel > (SIZE_MAX >> 4) / (uint64_t)v))
            return ferr(f, e, "tensor '%.80s': bad size in 'shape'", t->name);
        t->shape[d] = v;
        t->numel *= (size_t)v;
    }
    return 0;
}

static int read_offsets(al_st_file *f, al_st_tensor *t, json_t *off, al_err *e)
{
    json_t *b = json_array_get(off, 0), *x = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) ||
        !json_is_integer(x) || json_integer_value(b) < 0 ||
        json_integer_value(x) < json_integer_value(b))
        return ferr(f, e, "tensor '%.80s': 'data_offsets' must be [begin, end] with "
                    "0 <= begin <= end", t->name);
    t->begin = (size_t)json_integer_value(b);
    t->end = (size_t)json_integer_value(x);
    if (t->end - t->begin != t->numel * al_st_dtype_size(t->dtype))
        return ferr(f, e, "tensor '%.80s': data_offsets span %zu bytes, its %s shape "
                    "needs %zu", t->name, t->end - t->begin, al_st_dtype_name(t->dtype),
                    t->numel * al_st_dtype_size(t->dtype));
    return 0;
}

static int read_entry(al_st_file *f, al_st_tensor *t, const char *name, json_t *v, al_err *e)
{
    t->name = strdup(name);
    AL_ASSERT(t->name != NULL);
    if (!json_is_object(v))
        return ferr(f, e, "tensor '%.80s': entry must be an object", name);
    json_t *dt = json_object_get(v, "dtype");
    if (json_object_size(v) != 3 || !dt || !json_object_get(v, "shape") ||
        !json_object_get(v, "data_offsets"))
        return ferr(f, e, "tensor '%.80s': entry must have exactly 'dtype', 'shape' and "
                    "'data_offsets'", name);
    t->dtype = json_is_string(dt) ? dtype_of(json_string_value(dt)) : -1;
    if (t->dtype < 0)
        return ferr(f, e, "tensor '%.80s': unknown dtype", name);
    if (read_shape(f, t, json_object_get(v, "shape"), e)) return -1;
    return read_offsets(f, t, json_object_get(v, "data_offsets"), e);
}

static int read_metadata(al_st_file *f, json_t *m, al_err *e)
{
    if (!json_is_object(m)) return ferr(f, e, "'__metadata__' must be an object");
    f->meta_key = al_calloc(json_object_size(m) + 1, sizeof(char *));
    f->meta_val = al_calloc(json_object_size(m) + 1, sizeof(char *));
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return ferr(f, e, "'__metadata__' value of '%.80s' must be a string", k);
        f->meta_key[f->n_meta] = strdup(k);
        f->meta_val[f->n_meta++] = strdup(json_string_value(v));
        AL_ASSERT(f->meta_key[f->n_meta - 1] && f->meta_val[f->n_meta - 1]);
    }
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const al_st_tensor *x = *(al_st_tensor *const *)a, *y = *(al_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The data regions must tile [0, data size) exactly. */
static int check_tiling(al_st_file *f, al_err *e)
{
    size_t data = f->size - f->data_start, at = 0;
    al_st_tensor **order = al_calloc((size_t)f->n + 1, sizeof *order);
    for (int i = 0; i < f->n; i++) order[i] = &f->t[i];
    qsort(order, f->n, sizeof *order, by_begin);
    for (int i = 0; i < f->n; i++) {
        if (order[i]->begin != at) {
            char name[128];
            size_t begin = order[i]->begin;
            snprintf(name, sizeof name, "%s", order[i]->name);
            free(order);
            return ferr(f, e, "tensor '%.80s' starts at byte %zu of the data, expected %zu "
                        "(overlapping or non-contiguous offsets)", name, begin, at);
        }
        at = order[i]->end;
        order[i]->data = (const unsigned char *)f->buf + f->data_start + order[i]->begin;
    }
    free(order);
    if (at != data)
        return ferr(f, e, "tensors cover %zu bytes of data but the file holds %zu after the "
                    "header (truncated or corrupt)", at, data);
    return 0;
}

static int read_header(al_st_file *f, json_t *root, al_err *e)
{
    if (!json_is_object(root)) return ferr(f, e, "header must be a JSON object");
    size_t n = json_object_size(root);
    json_t *meta = json_object_get(root, "__metadata__");
    if (meta && read_metadata(f, meta, e)) return -1;
    f->t = al_calloc(n + 1, sizeof *f->t);
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) continue;
        if (read_entry(f, &f->t[f->n++], k, v, e)) return -1;
    }
    return check_tiling(f, e);
}

int al_st_read(const char *path, al_st_file *f, al_err *e)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    if (al_read_file(path, &f->buf, &f->size, e) != 0) return -1;
    if (f->size < 8)
        return ferr(f, e, "not a safetensors file: %zu bytes, fewer than the 8-byte header "
                    "length", f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)f->buf[i];
    if (hlen > f->size - 8 || hlen > AL_ST_MAX_HEADER)
        return ferr(f, e, "not a safetensors file, or truncated: header length %llu does not "
                    "fit the file's %zu bytes", (unsigned long long)hlen, f->size);
    f->data_start = 8 + (size_t)hlen;
    json_error_t je;
    json_t *root = json_loadb(f->buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ferr(f, e, "corrupt header: not valid JSON at byte %d: %s", je.position, je.text);
    int rc = read_header(f, root, e);   /* frees f on error */
    json_decref(root);
    return rc;
}

const al_st_tensor *al_st_find(const al_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *al_st_meta(const al_st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
    return NULL;
}

void al_st_free(al_st_file *f)
{
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_key[i]), free(f->meta_val[i]);
    free(f->t);
    free(f->meta_key);
    free(f->meta_val);
    free(f->buf);
    char path[sizeof f->path];
    memcpy(path, f->path, sizeof path);
    memset(f, 0, sizeof *f);
    memcpy(f->path, path, sizeof path);
}
