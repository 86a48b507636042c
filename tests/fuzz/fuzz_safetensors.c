/*
 * fuzz_safetensors.c - the safetensors reader as attnlab uses it. The first
 * byte of an input picks what the rest is:
 *   even: a model checkpoint: al_st_read, then al_checkpoint_load (the
 *         config in its metadata rebuilt through the registry, every tensor
 *         checked against the model it describes);
 *   odd:  a train_state.safetensors, resumed (al_checkpoint_resume) beside
 *         a valid model.safetensors of a fixed tiny run.
 *
 * Properties: no crash, leak or undefined behaviour; a refusal is one
 * line; a file that reads has tensors whose data lie inside the file and
 * tile its data section.
 *
 * Seeds: AL_FUZZ_WRITE_SEEDS=DIR fuzz_safetensors writes a checkpoint of
 * every built-in variant and the fixed run's train state into DIR (what
 * tests/fuzz/corpus/safetensors holds).
 */
#include <ftw.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "fuzz_common.h"

static const char run_yaml[] =
    "data: {source: text, path: /nonexistent/attnlab-fuzz.txt}\n"
    "model: {n_layer: 1, d_model: 8, n_head: 2, seq_len: 8, mlp_ratio: 1.0, vocab_size: 16,\n"
    "        attention: {variant: gqa, n_kv_head: 1}}\n"
    "train: {steps: 10, batch_size: 1, warmup_steps: 1, checkpoint_every: 5}\n";

/* The fixed run: its config, model and optimizer, saved in dir. */
static struct {
    char dir[64], state[128];
    al_run_inputs inputs;   /* of the fixed data bytes below */
    al_config c;
    al_model m;
    al_adamw o;
} run;

/* The config of yaml with the ';'-separated --set assignments of sets. */
static void build_config(al_config *c, const char *yaml, const char *sets)
{
    al_node *root;
    al_err e;
    char buf[256];
    FZ_CHECK(al_yaml_parse("fuzz-run.yaml", yaml, &root, &e) == 0, "%s", e.msg);
    snprintf(buf, sizeof buf, "%s", sets ? sets : "");
    for (char *save, *a = strtok_r(buf, ";", &save); a; a = strtok_r(NULL, ";", &save))
        FZ_CHECK(al_node_apply_set(root, a, &e) == 0, "%s", e.msg);
    FZ_CHECK(al_config_decode(root, c, &e) == 0, "%s", e.msg);
    al_node_free(root);
}

static void save_run(const char *dir)
{
    al_err e;
    double rows[2 * AL_METRIC_COLS] = {0, NAN, 2.8, NAN, 1e-3, 0, 0.1,
                                       5, 2.7, 2.75, NAN, 8e-4, 1000, 0.2};
    al_train_state s = {5, {{1, 2, 3, 4}}, 40, 0.05, 0.2, 5.5, 2, 2.7, 2, rows, run.inputs, ""};
    run.o.step = 5;
    FZ_CHECK(al_checkpoint_save_run(dir, &run.c, &run.m, &run.o, &s, &e) == 0, "%s", e.msg);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    return remove(path);
}

static void remove_run(void)
{
    nftw(run.dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Seed files: 0x00 + a checkpoint of each built-in variant, 0x01 + the
 * fixed run's train state. */
static void write_seeds(const char *dir)
{
    static const char *const attn[] = {
        "model.attention={variant: mha}", "model.attention={variant: mqa}",
        "model.attention={variant: gqa, n_kv_head: 1}",
        "model.attention={variant: mla, d_latent: 4, d_rope: 2}",
        "model.attention={variant: mla, d_latent: 4, d_rope: 2, d_q_latent: 4};"
        "model.kv_dtype=bf16", NULL};
    char path[4200], *text;
    size_t n;
    al_err e;
    for (int i = 0; attn[i]; i++) {
        al_config c;
        al_model m;
        build_config(&c, run_yaml, attn[i]);
        FZ_CHECK(al_model_init(&m, &c.model, &e) == 0, "%s", e.msg);
        al_model_init_weights(&m, 7);
        snprintf(path, sizeof path, "%s/model-%s.raw", run.dir, m.cfg.variant);
        FZ_CHECK(al_checkpoint_save(path, &m, 3, &e) == 0, "%s", e.msg);
        al_model_free(&m);
        FZ_CHECK(al_read_file(path, &text, &n, &e) == 0, "%s", e.msg);
        snprintf(path, sizeof path, "%s/model-%d", dir, i);
        FILE *f = fopen(path, "wb");
        FZ_CHECK(f && fputc(0, f) == 0 && fwrite(text, 1, n, f) == n && !fclose(f), "%s", path);
        free(text);
    }
    FZ_CHECK(al_read_file(run.state, &text, &n, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/train-state", dir);
    FILE *f = fopen(path, "wb");
    FZ_CHECK(f && fputc(1, f) == 1 && fwrite(text, 1, n, f) == n && !fclose(f), "%s", path);
    free(text);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    al_err e;
    snprintf(run.dir, sizeof run.dir, "%s/attnlab-fuzz-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    FZ_CHECK(mkdtemp(run.dir) != NULL, "mkdtemp %s", run.dir);
    atexit(remove_run);
    snprintf(run.state, sizeof run.state, "%s/%s", run.dir, AL_TRAIN_STATE_FILE);
    build_config(&run.c, run_yaml, NULL);
    FZ_CHECK(al_run_inputs_of(&run.inputs, &run.c, run_yaml, sizeof run_yaml, &e) == 0, "%s",
             e.msg);
    FZ_CHECK(al_model_init(&run.m, &run.c.model, &e) == 0, "%s", e.msg);
    al_model_init_weights(&run.m, 1);
    al_adamw_init(&run.o, run.m.n_params, 0.9, 0.99, 0.1);
    save_run(run.dir);
    if (getenv("AL_FUZZ_WRITE_SEEDS")) write_seeds(getenv("AL_FUZZ_WRITE_SEEDS"));
    return 0;
}

/* What a successful read promises: every tensor's bytes inside the file,
 * the regions tiling the data section. */
static void check_file(const al_st_file *f)
{
    size_t data = f->size - f->data_start, covered = 0;
    unsigned sum = 0;
    FZ_CHECK(f->data_start >= 8 && f->data_start <= f->size, "data_start %zu", f->data_start);
    for (int i = 0; i < f->n; i++) {
        const al_st_tensor *t = &f->t[i];
        FZ_CHECK(t->begin <= t->end && t->end <= data, "tensor %d outside the data", i);
        FZ_CHECK(t->end - t->begin == t->numel * al_st_dtype_size(t->dtype), "tensor %d size", i);
        FZ_CHECK(t->data == (const unsigned char *)f->buf + f->data_start + t->begin, "tensor %d", i);
        for (size_t b = t->begin; b < t->end; b++) sum += t->data[b - t->begin];
        covered += t->end - t->begin;
    }
    FZ_CHECK(covered == data, "tensors cover %zu of %zu bytes", covered, data);
    (void)sum;
}

static void model_file(fz_file *in)
{
    al_st_file f;
    al_model m;
    al_err e = {""};
    long step;
    if (al_st_read(in->path, &f, &e) == 0) {
        check_file(&f);
        al_st_free(&f);
    } else {
        fz_check_message(&e);
    }
    if (al_checkpoint_load(in->path, &m, &step, &e) == 0) {
        FZ_CHECK(m.n_params > 0 && step >= 0, "a loaded model without parameters");
        al_model_free(&m);
    } else {
        fz_check_message(&e);
    }
}

static void state_file(const uint8_t *data, size_t size)
{
    FILE *f = fopen(run.state, "wb");
    FZ_CHECK(f && (size == 0 || fwrite(data, 1, size, f) == size) && fclose(f) == 0, "%s",
             run.state);
    al_train_state s;
    al_err e = {""};
    if (al_checkpoint_resume(run.dir, &run.c, &run.inputs, &run.m, &run.o, &s, &e) == 0) {
        FZ_CHECK(s.step == 5 && s.n_rows >= 0, "resumed at step %ld with %d rows", s.step,
                 s.n_rows);
        free(s.rows);
    } else {
        fz_check_message(&e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fz_file in;
    if (size == 0) return 0;
    if (data[0] & 1) {
        state_file(data + 1, size - 1);
        return 0;
    }
    if (!in.path[0]) fz_file_open(&in, "model.safetensors");
    fz_file_put(&in, data + 1, size - 1);
    model_file(&in);
    return 0;
}
