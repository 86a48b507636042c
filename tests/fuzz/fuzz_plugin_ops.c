/*
 * fuzz_plugin_ops.c - what the core does with a plugin's ops tables,
 * in-process: al_plugin_register_entry (the loader after dlopen) is handed
 * an entry point whose reported version, tables, table sizes, members,
 * names and settings all come from the input; the tables that register are
 * listed (`attnlab variants`), named in a config that is decoded and
 * validated (the variant's check), and measured (params, kv_elems), with
 * those functions' answers taken from the input too. Then the registry is
 * truncated back to the built-ins.
 *
 * The tables are of the older layout (attnlab_variant_v4.h), so every one
 * goes through the adapter (src/model/variant_compat.c) that wraps it into
 * version 5. A table of a version that layout describes (AL_VARIANT_V4_MIN
 * .. AL_VARIANT_V4) is allocated with exactly al_variant_ops_size()
 * bytes, any other with a random size (at least api_version and name for
 * a version >= 1: members are only appended): so ASan catches the core
 * reading a member a table's version does not have.
 *
 * Properties: no crash, leak or undefined behaviour; a refusal is one line
 * naming the plugin (its origin) or the config key.
 */
#include <math.h>
#include <string.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_model.h"
#include "al_plugin.h"
#include "al_registry.h"
#include "attnlab_variant_v4.h"
#include "fuzz_common.h"

#define ORIGIN "/fuzz/libplugin.so"
#define MAX_TABLES 4
#define MAX_OWNED 256

/* ------------------------------------------------------------ input reader */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned u8(rd *r)
{
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static uint64_t u64(rd *r, int bytes)
{
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) x |= (uint64_t)u8(r) << (8 * i);
    return x;
}

static double f64(rd *r)
{
    uint64_t x = u64(r, 8);
    double d;
    memcpy(&d, &x, sizeof d);
    return d;
}

/* Everything allocated for one input, freed after it. */
static void *owned[MAX_OWNED];
static int n_owned;

static void *own(size_t n)
{
    FZ_CHECK(n_owned < MAX_OWNED, "too many allocations");
    return owned[n_owned++] = al_calloc(1, n);
}

/* A string of up to max bytes (never NUL inside), or NULL when the first
 * byte says so. */
static char *str(rd *r, unsigned max)
{
    unsigned len = u8(r);
    if (len == 255) return NULL;
    len %= max + 1;
    char *s = own(len + 1);
    for (unsigned i = 0; i < len; i++) {
        unsigned c = u8(r);
        s[i] = c ? (char)c : 'x';
    }
    return s;
}

/* Mostly versions the registry knows, sometimes any int. */
static int version(rd *r)
{
    static const int pick[8] = {AL_VARIANT_V4, AL_VARIANT_V4, AL_VARIANT_V4, AL_VARIANT_V4_MIN,
                                AL_VARIANT_V4_MIN, AL_VARIANT_V4_MIN - 1,
                                AL_VARIANT_API_VERSION + 1, 0};
    unsigned b = u8(r) % 8;
    return b == 7 ? (int)(uint32_t)u64(r, 4) : pick[b];
}

/* ------------------------------------------------------------ the variant's answers */

static struct {
    int n_params;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    size_t kv, act, scratch;
    int check_rc;
    char check_msg[600];
} beh;

static int f_check(const al_attn_shape *s, char *err, size_t errlen)
{
    if (beh.check_rc) memcpy(err, beh.check_msg, errlen < sizeof beh.check_msg ? errlen
                                                                            : sizeof beh.check_msg);
    return beh.check_rc;
}

static int f_params(const al_attn_shape *s, al_param_spec *out)
{
    memcpy(out, beh.spec, sizeof beh.spec);   /* the contract: out has AL_MAX_ATTN_PARAMS */
    return beh.n_params;
}

static size_t f_act(const al_attn_shape *s, int B, int T) { return beh.act; }
static size_t f_scratch(const al_attn_shape *s, int B, int T) { return beh.scratch; }
static size_t f_kv(const al_attn_shape *s) { return beh.kv; }
static void f_forward(const al_attn_shape *s, float *out, float *act, float *scratch,
                      const float *x, float *const *p, int B, int T) { abort(); }
static void f_backward(const al_attn_shape *s, float *dx, float *const *dp, float *scratch,
                       const float *dout, const float *x, const float *act, float *const *p,
                       int B, int T) { abort(); }
static void f_prefill(const al_attn_shape *s, al_kv_cache *c, const float *act,
                      float *const *p, int T) { abort(); }
static size_t f_dscratch(const al_attn_shape *s, int context) { return beh.scratch; }
static void f_decode(const al_attn_shape *s, float *out, float *scratch, const float *x,
                     float *const *p, al_kv_cache *c, int pos) { abort(); }
static void f_probs(const al_attn_shape *s, float *P, const float *act, float *const *p,
                    int T) { abort(); }
static size_t f_bscratch(const al_attn_shape *s, int context, int B) { return beh.scratch; }
static void f_batch(const al_attn_shape *s, float *out, float *scratch, const float *x,
                    float *const *p, al_kv_cache *const *c, const int *pos, int B) { abort(); }

static void read_behaviour(rd *r)
{
    static const int counts[8] = {1, 2, 4, 16, 0, -1, 17, 1000};
    unsigned b = u8(r);
    beh.n_params = b < 248 ? (int)(b % 17) : counts[b % 8];
    for (int i = 0; i < AL_MAX_ATTN_PARAMS; i++) {
        al_param_spec *p = &beh.spec[i];
        for (size_t k = 0; k < sizeof p->name; k++) p->name[k] = (char)u8(r);
        p->rows = (int)(int32_t)u64(r, 4);
        p->cols = (int)(int32_t)u64(r, 4);
        p->init = (int)(int8_t)u8(r);
    }
    beh.kv = (size_t)u64(r, u8(r) % 9);
    beh.act = (size_t)u64(r, u8(r) % 9);
    beh.scratch = (size_t)u64(r, u8(r) % 9);
    beh.check_rc = u8(r) & 1 ? -1 : 0;
    for (size_t k = 0; k < sizeof beh.check_msg; k++) beh.check_msg[k] = (char)u8(r);
}

/* ------------------------------------------------------------ tables */

static al_setting *read_settings(rd *r)
{
    unsigned n = u8(r);
    if (n == 255) return NULL;
    n %= AL_MAX_SETTINGS + 3;
    al_setting *s = own((n + 1) * sizeof *s);
    for (unsigned i = 0; i < n; i++) {
        s[i].name = str(r, 24);
        unsigned k = u8(r);
        s[i].kind = k < 250 ? (int)(k & 1) : (int)(int32_t)u64(r, 4);
        s[i].def = u8(r) & 1 ? f64(r) : (double)(int8_t)u8(r);
        s[i].required = (int)(u8(r) & 1);
        s[i].help = str(r, 40);
    }
    return s;   /* s[n] is all zero: the terminator */
}

/* One table: a full al_variant_ops built from the input, with the members
 * bit `drop` names left NULL, copied into exactly the bytes its version has. */
static const al_variant_ops *read_table(rd *r)
{
    al_variant_ops t = {
        .check = f_check, .params = f_params, .act_floats = f_act,
        .scratch_floats = f_scratch, .forward = f_forward, .backward = f_backward,
        .kv_elems = f_kv, .prefill = f_prefill, .decode_scratch_floats = f_dscratch,
        .decode = f_decode, .probs = f_probs, .decode_batch_scratch_floats = f_bscratch,
        .decode_batch = f_batch};
    t.api_version = version(r);
    /* This attnlab's own version has its own layout (al_variant, sub-tables),
     * which a real plugin claiming it was compiled against; a v4-shaped table
     * claiming it is not a plugin that can exist, and the core rightly reads
     * a whole al_variant there (the heap overflow CI's fuzzing reported on
     * 2026-12-05). It stands for an unknown version instead, which must be
     * refused. */
    if (t.api_version == AL_VARIANT_API_VERSION) t.api_version = AL_VARIANT_API_VERSION + 1;
    t.name = str(r, 70);
    t.description = str(r, 60);
    t.settings = read_settings(r);
    unsigned drop = (unsigned)u64(r, 2);
#define DROP(bit, member) if (drop & (1u << (bit))) t.member = NULL
    DROP(0, check);
    DROP(1, params);
    DROP(2, act_floats);
    DROP(3, scratch_floats);
    DROP(4, forward);
    DROP(5, backward);
    DROP(6, kv_elems);
    DROP(7, prefill);
    DROP(8, decode_scratch_floats);
    DROP(9, decode);
    DROP(10, probs);
    DROP(11, decode_batch_scratch_floats);
    DROP(12, decode_batch);
#undef DROP
    /* every version has api_version and name first (members are only
     * appended); a table claiming no version (< 1) may be any size */
    size_t size = al_variant_ops_size(t.api_version), least = t.api_version < 1
        ? sizeof(int) : offsetof(al_variant_ops, description);
    if (!size) size = least + u8(r) % (sizeof t - least + 1);
    al_variant_ops *buf = own(size);
    memcpy(buf, &t, size);
    return buf;
}

static int entry_version;
static const al_variant_ops *entry_list[MAX_TABLES + 1];
static int entry_null;

/* The entry point: an old plugin's list, which the loader reads by each
 * table's version. */
static const al_variant *const *entry(int *api_version)
{
    *api_version = entry_version;
    return entry_null ? NULL : (const al_variant *const *)(const void *)entry_list;
}

/* ------------------------------------------------------------ using a variant */

/* A config naming variant v with each setting given a value from the input. */
static void use_variant(const al_variant *v, rd *r)
{
    char yaml[4096];
    int len = snprintf(yaml, sizeof yaml, "model: {n_layer: 2, d_model: 8, n_head: 2, "
                       "seq_len: 8, vocab_size: 16,\n  attention: {variant: %s", v->name);
    for (int j = 0; j < al_variant_n_settings(v) && len < 3000; j++) {
        if (u8(r) & 1) continue;   /* left to its default (or missing, if required) */
        if (u8(r) & 1)
            len += snprintf(yaml + len, sizeof yaml - len, ", %s: %d", v->settings[j].name,
                            (int)(int32_t)u64(r, 4));
        else
            len += snprintf(yaml + len, sizeof yaml - len, ", %s: %.17g", v->settings[j].name,
                            f64(r));
    }
    snprintf(yaml + len, sizeof yaml - len, "}}\n");
    al_node *root;
    al_config c;
    al_err e = {""};
    if (al_yaml_parse("fuzz.yaml", yaml, &root, &e) != 0) return;   /* names the input made */
    int rc = al_config_decode(root, &c, &e);
    al_node_free(root);
    if (rc == 0 && al_model_param_count(&c.model, &e) == 0) rc = -1;
    if (rc == 0) (void)al_model_kv_elems_per_token(&c.model);
    else fz_check_message(&e);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    FZ_CHECK(freopen("/dev/null", "w", stdout) != NULL, "stdout");   /* the listings */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = {data, size};
    n_owned = 0;
    entry_version = version(&r);
    entry_null = u8(&r) == 255;
    int n = 1 + (int)(u8(&r) % MAX_TABLES);
    for (int i = 0; i < n; i++) entry_list[i] = read_table(&r);
    entry_list[n] = NULL;
    read_behaviour(&r);
    int before = al_variant_count();
    al_err e = {""};
    if (al_plugin_register_entry(entry, ORIGIN, &e) == 0) {
        FZ_CHECK(al_variant_count() > before, "registered nothing");
        FZ_CHECK(al_cmd_variants(0, NULL) == 0, "attnlab variants failed");
        for (int i = before; i < al_variant_count(); i++) use_variant(al_variant_at(i), &r);
        al_variant_truncate(before);
    } else {
        fz_check_message(&e);
        FZ_CHECK(strstr(e.msg, ORIGIN) != NULL, "a refusal that does not name the plugin: %s",
                 e.msg);
        FZ_CHECK(al_variant_count() == before, "a refused plugin left variants registered");
    }
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    return 0;
}
