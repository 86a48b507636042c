/*
 * fuzz_config.c - the experiment-file decoder: YAML text, then the --set
 * edits its "#set k=v" lines carry, then al_config_decode.
 *
 * Properties: no crash, leak or undefined behaviour; a refusal is one
 * line; and a config that decodes writes out (al_config_write_yaml, what
 * config.yaml and the trial hash are made of) as YAML that decodes again
 * to the same text, so a resolved config always loads back as itself.
 */
#include <string.h>

#include "al_config_io.h"
#include "fuzz_common.h"

static char *resolved_yaml(const al_config *c, size_t *n)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    FZ_CHECK(f != NULL, "open_memstream");
    al_config_write_yaml(c, f);
    fclose(f);
    return buf;
}

static void round_trip(const al_config *c, fz_file *out)
{
    size_t n1, n2;
    char *first = resolved_yaml(c, &n1);
    fz_file_put(out, first, n1);
    al_node *root;
    al_config again;
    al_err e;
    FZ_CHECK(al_yaml_load(out->path, &root, &e) == 0, "the resolved config does not parse: "
             "%s\n%s", e.msg, first);
    int rc = al_config_decode(root, &again, &e);
    al_node_free(root);
    FZ_CHECK(rc == 0, "the resolved config does not decode: %s\n%s", e.msg, first);
    char *second = resolved_yaml(&again, &n2);
    FZ_CHECK(n1 == n2 && memcmp(first, second, n1) == 0,
             "the resolved config changes when read back:\n%s\n---\n%s", first, second);
    free(first);
    free(second);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fz_file in, out;
    if (!in.path[0]) fz_file_open(&in, "experiment.yaml"), fz_file_open(&out, "resolved.yaml");
    fz_file_put(&in, data, size);
    char *sets[FZ_MAX_SETS];
    int n_sets = fz_sets(data, size, sets), rc;
    al_node *root;
    al_config c;
    al_err e = {""};
    rc = al_yaml_load(in.path, &root, &e);
    if (rc == 0) {
        for (int i = 0; i < n_sets && rc == 0; i++) rc = al_node_apply_set(root, sets[i], &e);
        if (rc == 0) rc = al_config_decode(root, &c, &e);
        if (rc == 0) round_trip(&c, &out);
        al_node_free(root);
    }
    if (rc != 0) fz_check_message(&e);
    fz_sets_free(sets, n_sets);
    return 0;
}
