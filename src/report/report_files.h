/*
 * report_files.h - the files a report wrote (DIR/.report_files), so that
 * the next one removes those it no longer writes (report_files.c). Not a
 * public interface.
 */
#ifndef AL_REPORT_FILES_H
#define AL_REPORT_FILES_H

#include "al_util.h"

typedef struct al_report_files al_report_files;

al_report_files *al_report_files_new(void);
void al_report_files_free(al_report_files *F);
/* name, a file of the results directory, written by this report; a
 * gnuplot script (.gp) brings its .png and .svg. NULL F: nothing. */
void al_report_files_add(al_report_files *F, const char *name);
/* Removes from dir each name the last report listed and this one did not
 * (*removed: how many), then lists this report's names, atomically. -1
 * with e when the list cannot be written. */
int al_report_files_prune(const al_report_files *F, const char *dir, int *removed, al_err *e);

#endif
