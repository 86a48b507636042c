/*
 * score_pos.c - `attnlab score --by-position`: the mean loss per bucket of
 * window positions, as CSV and a gnuplot picture (al_score.h).
 */
#include <stdio.h>

#include "al_gnuplot.h"
#include "al_score.h"

static int write_csv(const char *dir, const double *pos_sum, long windows, int T, int N,
                     al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/by_position.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fputs("bucket_start,bucket_end,loss,tokens\n", f);
    for (int i = 0; i < N; i++) {
        long lo = (long)i * T / N, hi = (long)(i + 1) * T / N;
        double sum = 0;
        for (long t = lo; t < hi; t++) sum += pos_sum[t];
        fprintf(f, "%ld,%ld,%.6f,%ld\n", lo, hi, sum / ((double)(hi - lo) * windows),
                (hi - lo) * windows);
    }
    return al_commit_atomic(f, tmp, path, e);
}

/* Loss against the bucket's middle position, one point per bucket, and a
 * dashed line at the trained length when the window goes past it. */
static int write_gp(const char *dir, int T, int trained, al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/by_position.gp", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fprintf(f, "# by_position.gp - written by `attnlab score --by-position`; re-run with\n"
            "# `gnuplot by_position.gp` in this directory.\n"
            "if (!exists(\"out_png\")) out_png = \"by_position.png\"\n"
            "if (!exists(\"out_svg\")) out_svg = \"by_position.svg\"\n"
            "set datafile separator \",\"\n"
            "do for [fmt in \"png svg\"] {\n"
            "  if (fmt eq \"png\") {\n"
            "    set terminal pngcairo noenhanced size 800,500 font \",11\"\n"
            "    set output out_png\n"
            "  } else {\n"
            "    set terminal svg noenhanced size 800,500 dynamic font \",11\"\n"
            "    set output out_svg\n  }\n"
            "  set title \"mean next-token loss by position (window of %d tokens)\"\n"
            "  set xlabel \"position in the window\"\n"
            "  set ylabel \"loss (nats per byte)\"\n"
            "  set grid\n"
            "  set key off\n"
            "  %sset arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2\n"
            "  %sset label 1 \"trained length\" at %d, graph 0.95 right offset -0.5,0\n"
            "  plot \"by_position.csv\" every ::1 using (($1 + $2 - 1) / 2.0):3 "
            "with linespoints pt 7\n"
            "}\n", T, trained < T ? "" : "# ", trained, trained, trained < T ? "" : "# ",
            trained);
    return al_commit_atomic(f, tmp, path, e);
}

int al_score_write_by_position(const char *dir, const double *pos_sum, long windows, int T,
                               int N, int trained, al_err *e)
{
    AL_ASSERT(N >= 1 && N <= T && windows >= 1);
    if (al_mkdirs(dir, e) != 0 || write_csv(dir, pos_sum, windows, T, N, e) != 0 ||
        write_gp(dir, T, trained, e) != 0)
        return -1;
    int g = al_gnuplot_run(dir, "by_position");
    if (g == AL_GNUPLOT_FAILED)
        return al_errf(e, "score: gnuplot failed on %s/by_position.gp; see %s/gnuplot.log", dir,
                       dir);
    if (g == AL_GNUPLOT_MISSING)
        fprintf(stderr, "attnlab: score: gnuplot not found: no picture (%s/by_position.gp is "
                "written)\n", dir);
    return 0;
}
