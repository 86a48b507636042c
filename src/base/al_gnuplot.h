/*
 * al_gnuplot.h - running gnuplot, the external program that draws every
 * picture (the report's and `attnlab attention`'s).
 *
 * A script DIR/BASE.gp writes its pictures to the gnuplot variables out_png
 * and out_svg when they are set (else BASE.png, BASE.svg): they are set to
 * temporary names, and the pictures are renamed into place only when
 * gnuplot succeeded, so a picture on disk is always a whole one. gnuplot
 * runs in DIR, as $AL_GNUPLOT when set (else "gnuplot" on the PATH), its
 * messages appended to DIR/gnuplot.log.
 */
#ifndef AL_GNUPLOT_H
#define AL_GNUPLOT_H

enum al_gnuplot_result { AL_GNUPLOT_DRAWN = 0, AL_GNUPLOT_MISSING = 1, AL_GNUPLOT_FAILED = 2 };

/* Runs gnuplot on DIR/base.gp; returns an enum al_gnuplot_result. */
int al_gnuplot_run(const char *dir, const char *base);

#endif
