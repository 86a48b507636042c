/*
 * report_mdhtml.h - the markdown report.md is written in, as HTML
 * (report_mdhtml.c), so that index.html shows report.md's sections in its
 * words. The subset report.md uses: headings (#, ##, ###), paragraphs,
 * "- " lists, tables (| a | b | with a rule line), ``` fences, and inline
 * **bold**, *emphasis*, `code`, [text](link), ![alt](picture) and
 * backslash escapes. Every character of the text is escaped; a link goes
 * out only to a relative path or http(s) (a picture becomes a link to its
 * file, so that the page fetches nothing). Not a public interface.
 */
#ifndef AL_REPORT_MDHTML_H
#define AL_REPORT_MDHTML_H

#include <stddef.h>
#include <stdio.h>

/* s[0..n) as HTML text or a quoted attribute's value: & < > " ' escaped. */
void al_html_text(FILE *f, const char *s, size_t n);
/* A relative path as an attribute value: bytes other than A-Z a-z 0-9
 * - . _ ~ / percent-encoded. */
void al_html_path(FILE *f, const char *s, size_t n);
/* An id for a heading: lower-case letters and digits, '-' between words
 * ("Pareto front: x" -> "pareto-front-x"), at most cap-1 bytes. */
void al_html_slug(char *out, size_t cap, const char *s, size_t n);
/* One line of markdown inline text as HTML. */
void al_md_inline(FILE *f, const char *s, size_t n);
/* Blocks of markdown as HTML; tables = 0 leaves the tables out (a page
 * that shows its own). Headings get ids by al_html_slug. */
void al_md_blocks(FILE *f, const char *md, size_t n, int tables);

#endif
