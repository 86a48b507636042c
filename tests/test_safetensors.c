/*
 * test_safetensors.c - the container: a round trip keeps names, dtypes,
 * shapes, bytes and metadata, the layout is the public one, and every kind
 * of malformed file is a one-line error naming the file.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "al_safetensors.h"
#include "al_test.h"

/* A file of an 8-byte length, the given header text and n data bytes. */
static char *raw_file(const char *dir, const char *name, const char *header,
                      const void *data, size_t n)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t h = strlen(header);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(h >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(header, 1, h, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

START_TEST(round_trip_keeps_tensors_and_metadata)
{
    char *dir = al_test_tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    float a[6] = {1, -2, 3.5f, 4, 5, 6};
    double d[2] = {0.25, -1e300};
    uint64_t u[3] = {1, UINT64_MAX, 42};
    al_st_out t[] = {{"a.weight", AL_ST_F32, 2, {2, 3}, a},
                     {"empty", AL_ST_F32, 2, {0, 7}, NULL},
                     {"d", AL_ST_F64, 1, {2}, d},
                     {"u", AL_ST_U64, 1, {3}, u}};
    const char *meta[] = {"k", "v", "json", "{\"x\": [1, 2]}\n"};
    al_err e;
    ck_assert_msg(al_st_write(path, t, 4, meta, 2, &e) == 0, "%s", e.msg);
    al_st_file f;
    ck_assert_msg(al_st_read(path, &f, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(f.n, 4);
    ck_assert_int_eq(f.data_start % 8, 0);   /* header padded: data 8-aligned */
    ck_assert_uint_eq(f.size, f.data_start + sizeof a + sizeof d + sizeof u);
    const al_st_tensor *x = al_st_find(&f, "a.weight");
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(x->dtype, AL_ST_F32);
    ck_assert_int_eq(x->ndim, 2);
    ck_assert_int_eq(x->shape[0], 2);
    ck_assert_int_eq(x->shape[1], 3);
    ck_assert_int_eq(x->begin, 0);           /* written in the given order */
    ck_assert_mem_eq(x->data, a, sizeof a);
    ck_assert_int_eq(al_st_find(&f, "empty")->numel, 0);
    ck_assert_mem_eq(al_st_find(&f, "d")->data, d, sizeof d);
    ck_assert_mem_eq(al_st_find(&f, "u")->data, u, sizeof u);
    ck_assert_str_eq(al_st_meta(&f, "k"), "v");
    ck_assert_str_eq(al_st_meta(&f, "json"), "{\"x\": [1, 2]}\n");
    ck_assert_ptr_null(al_st_meta(&f, "nope"));
    ck_assert_ptr_null(al_st_find(&f, "nope"));
    /* the header is plain JSON after the 8-byte little-endian length */
    ck_assert_int_eq(f.buf[8], '{');
    ck_assert_ptr_nonnull(strstr(f.buf + 8, "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                                            "\"data_offsets\":[0,24]}"));
    al_st_free(&f);
    free(dir);
}
END_TEST

static void expect_error(const char *dir, const char *header, const void *data, size_t n,
                         const char *want)
{
    char *path = raw_file(dir, "bad.safetensors", header, data, n);
    al_st_file f;
    al_err e;
    ck_assert_msg(al_st_read(path, &f, &e) != 0, "accepted: %s", header);
    ck_assert_msg(strstr(e.msg, path) == e.msg, "no path in: %s", e.msg);
    ck_assert_msg(strstr(e.msg, want), "'%s' not in: %s", want, e.msg);
    ck_assert_msg(!strchr(e.msg, '\n'), "not one line: %s", e.msg);
    ck_assert_ptr_null(f.buf);
    free(path);
}

START_TEST(malformed_files_are_one_line_errors)
{
    char *dir = al_test_tmpdir();
    float z[4] = {0};
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect_error(dir, "{", z, 0, "not valid JSON");
    expect_error(dir, "[1, 2]", z, 0, "must be a JSON object");
    expect_error(dir, "{\"a\":1}", z, 0, "entry must be an object");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", z, 8, "exactly");
    expect_error(dir, "{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", z, 8,
                 "unknown dtype");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", z, 8,
                 "bad size");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", z, 8,
                 "needs 12");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", z, 8,
                 "begin <= end");
    expect_error(dir, ok, z, 4, "cover 8 bytes");          /* truncated data */
    expect_error(dir, ok, z, 12, "cover 8 bytes");         /* trailing bytes */
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 z, 8, "overlapping or non-contiguous");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", z, 8,
                 "starts at byte 4");
    expect_error(dir, "{\"__metadata__\":{\"k\":1}}", z, 0, "must be a string");
    expect_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                 z, 8, "duplicate");
    expect_error(dir, "{\"a\\n\\u0001\":{\"dtype\":\"F32\"}}", z, 0, "'a?" "?'"); /* printable */
    free(dir);
}
END_TEST

START_TEST(short_and_missing_files_are_errors)
{
    char *dir = al_test_tmpdir(), path[4200];
    al_st_file f;
    al_err e;
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    ck_assert_int_ne(al_st_read(path, &f, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "cannot open"));
    char *p = al_test_write(dir, "short", "abc");
    ck_assert_int_ne(al_st_read(p, &f, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "fewer than the 8-byte header length"));
    free(p);
    p = al_test_write(dir, "text", "model: {n_layer: 2}\n");
    ck_assert_int_ne(al_st_read(p, &f, &e), 0);
    ck_assert_msg(strstr(e.msg, "not a safetensors file"), "%s", e.msg);
    free(p);
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", dir);
    ck_assert_int_ne(al_st_write(path, NULL, 0, NULL, 0, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "cannot write"));
    free(dir);
}
END_TEST

Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_test(tc, round_trip_keeps_tensors_and_metadata);
    tcase_add_test(tc, malformed_files_are_one_line_errors);
    tcase_add_test(tc, short_and_missing_files_are_errors);
    suite_add_tcase(s, tc);
    return s;
}
