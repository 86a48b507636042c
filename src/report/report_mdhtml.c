/*
 * report_mdhtml.c - report.md's markdown subset as HTML, for index.html.
 * See report_mdhtml.h for the subset. Nothing of the text reaches the page
 * unescaped: a character is either markup this file writes or escaped.
 */
#include "report_mdhtml.h"

#include <ctype.h>
#include <string.h>

/* ------------------------------------------------------------ escaping */

void al_html_text(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(s[i], f);
        }
    }
}

void al_html_path(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || strchr("-._~/", c)) fputc(c, f);
        else fprintf(f, "%%%02X", c);
    }
}

void al_html_slug(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    int gap = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 128 && isalnum(c)) {
            if (gap && o) out[o++] = '-';
            out[o++] = (char)tolower(c);
            gap = 0;
        } else {
            gap = 1;
        }
    }
    out[o] = 0;
    if (!o) snprintf(out, cap, "section");
}

/* ------------------------------------------------------------ inline */

enum { MARK_STRONG = 1, MARK_EM = 2 };

typedef struct inl {
    FILE *f;
    int stack[16], depth;
} inl;

static const char *find(const char *s, size_t n, const char *what)
{
    size_t k = strlen(what);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, what, k) == 0) return s + i;
    return NULL;
}

static void mark(inl *t, int m, int open)
{
    static const char *const tag[] = {"", "strong", "em"};
    fprintf(t->f, open ? "<%s>" : "</%s>", tag[m]);
}

/* A link goes only to a relative path (no scheme) or to http(s). */
static int safe_url(const char *u, size_t n)
{
    if (n >= 7 && strncmp(u, "http://", 7) == 0) return 1;
    if (n >= 8 && strncmp(u, "https://", 8) == 0) return 1;
    for (size_t i = 0; i < n && u[i] != '/' && u[i] != '#' && u[i] != '?'; i++)
        if (u[i] == ':') return 0;
    return n > 0;
}

/* "[text](url)" at s (or "![alt](url)" when pic): written as a link and
 * its length returned, or 0 when s does not hold one. */
static size_t link(inl *t, const char *s, size_t n, int pic)
{
    const char *close = memchr(s, ']', n);
    if (!close || (size_t)(close - s) + 1 >= n || close[1] != '(') return 0;
    const char *url = close + 2, *end = memchr(url, ')', n - (size_t)(url - s));
    if (!end || !safe_url(url, (size_t)(end - url))) return 0;
    fputs(pic ? "<a class=\"al-pic\" href=\"" : "<a href=\"", t->f);
    if (url[0] == 'h' && (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0))
        al_html_text(t->f, url, (size_t)(end - url));
    else al_html_path(t->f, url, (size_t)(end - url));
    fputs("\">", t->f);
    if (pic) fputs("picture: ", t->f);
    al_md_inline(t->f, s + 1, (size_t)(close - s - 1));
    fputs("</a>", t->f);
    return (size_t)(end - s) + 1;
}

/* A run of '*' at s[i]: opens or closes emphasis by the flanking rule
 * (opens before a non-space after a space or punctuation, when a closer
 * follows; closes after a non-space), else it is a literal star. Returns
 * the bytes used. */
static size_t star(inl *t, const char *s, size_t n, size_t i)
{
    size_t k = i + 1 < n && s[i + 1] == '*' ? 2 : 1;
    int m = k == 2 ? MARK_STRONG : MARK_EM;
    unsigned char prev = i ? (unsigned char)s[i - 1] : ' ';
    unsigned char next = i + k < n ? (unsigned char)s[i + k] : ' ';
    if (t->depth && t->stack[t->depth - 1] == m && !isspace(prev)) {
        mark(t, m, 0);
        t->depth--;
        return k;
    }
    if (!isspace(next) && (isspace(prev) || ispunct(prev)) && t->depth < 16 &&
        find(s + i + k, n - i - k, k == 2 ? "**" : "*")) {
        mark(t, m, 1);
        t->stack[t->depth++] = m;
        return k;
    }
    al_html_text(t->f, s + i, k);
    return k;
}

void al_md_inline(FILE *f, const char *s, size_t n)
{
    inl t = {.f = f};
    for (size_t i = 0; i < n;) {
        char c = s[i];
        const char *end;
        size_t used = 0;
        if (c == '\\' && i + 1 < n && ispunct((unsigned char)s[i + 1])) {
            al_html_text(f, s + i + 1, 1);
            used = 2;
        } else if (c == '`' && (end = memchr(s + i + 1, '`', n - i - 1))) {
            fputs("<code>", f);
            al_html_text(f, s + i + 1, (size_t)(end - s - i - 1));
            fputs("</code>", f);
            used = (size_t)(end - s - i) + 1;
        } else if (c == '!' && i + 1 < n && s[i + 1] == '[') {
            used = link(&t, s + i + 1, n - i - 1, 1);
            used += used ? 1 : 0;
        } else if (c == '[') {
            used = link(&t, s + i, n - i, 0);
        } else if (c == '*') {
            used = star(&t, s, n, i);
        }
        if (!used) al_html_text(f, s + i, used = 1);
        i += used;
    }
    while (t.depth) mark(&t, t.stack[--t.depth], 0);
}

/* ------------------------------------------------------------ blocks */

typedef struct line {
    const char *s;
    size_t n;
} line;

static line line_at(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return (line){p, nl ? (size_t)(nl - p) : (size_t)(end - p)};
}

static int starts(line l, const char *with)
{
    size_t k = strlen(with);
    return l.n >= k && memcmp(l.s, with, k) == 0;
}

static int blank(line l)
{
    for (size_t i = 0; i < l.n; i++)
        if (!isspace((unsigned char)l.s[i])) return 0;
    return 1;
}

/* "## Title": the level (1-4), else 0. */
static int heading(line l)
{
    size_t k = 0;
    while (k < l.n && l.s[k] == '#') k++;
    return k >= 1 && k <= 4 && k < l.n && l.s[k] == ' ' ? (int)k : 0;
}

/* A line that begins a block of its own (ends a paragraph). */
static int block_start(line l)
{
    return heading(l) || starts(l, "|") || starts(l, "```") || starts(l, "- ");
}

/* "| --- | ---: |": a table's rule under its heading row. */
static int table_rule(line l)
{
    for (size_t i = 0; i < l.n; i++)
        if (!strchr("|-: ", l.s[i])) return 0;
    return memchr(l.s, '-', l.n) != NULL;
}

/* The cells of a table line, split at each '|' outside `code` and not
 * escaped, each trimmed, written as <tag>...</tag>. */
static void table_cells(FILE *f, line l, const char *tag)
{
    size_t i = 1, from = 1;   /* after the leading '|' */
    int code = 0;
    for (; i < l.n; i++) {
        if (l.s[i] == '\\') {
            i++;
            continue;
        }
        if (l.s[i] == '`') code = !code;
        if (l.s[i] != '|' || code) continue;
        size_t a = from, b = i;
        while (a < b && l.s[a] == ' ') a++;
        while (b > a && l.s[b - 1] == ' ') b--;
        fprintf(f, "<%s>", tag);
        al_md_inline(f, l.s + a, b - a);
        fprintf(f, "</%s>", tag);
        from = i + 1;
    }
}

/* The table whose first line is at p: written (when tables) and its end
 * returned. */
static const char *table(FILE *f, const char *p, const char *end, int tables)
{
    line l = line_at(p, end);
    line second = p + l.n < end ? line_at(p + l.n + 1, end) : (line){end, 0};
    int head = second.s < end && starts(second, "|") && table_rule(second);
    if (tables) fputs("<table class=\"al-md\">\n", f);
    for (int r = 0; p < end && starts(l = line_at(p, end), "|"); r++) {
        p += l.n + (p + l.n < end);
        if (!tables || (head && r == 1)) continue;
        fputs(head && r == 0 ? "<thead><tr>" : "<tr>", f);
        table_cells(f, l, head && r == 0 ? "th" : "td");
        fputs(head && r == 0 ? "</tr></thead>\n" : "</tr>\n", f);
    }
    if (tables) fputs("</table>\n", f);
    return p;
}

static const char *fence(FILE *f, const char *p, const char *end)
{
    line l = line_at(p, end);
    p += l.n + (p + l.n < end);
    fputs("<pre><code>", f);
    while (p < end && !starts(l = line_at(p, end), "```")) {
        al_html_text(f, l.s, l.n);
        fputc('\n', f);
        p += l.n + (p + l.n < end);
    }
    fputs("</code></pre>\n", f);
    return p < end ? p + l.n + (p + l.n < end) : p;
}

static const char *list(FILE *f, const char *p, const char *end)
{
    line l;
    fputs("<ul>\n", f);
    while (p < end && starts(l = line_at(p, end), "- ")) {
        fputs("<li>", f);
        al_md_inline(f, l.s + 2, l.n - 2);
        fputs("</li>\n", f);
        p += l.n + (p + l.n < end);
    }
    fputs("</ul>\n", f);
    return p;
}

static const char *para(FILE *f, const char *p, const char *end)
{
    const char *from = p;
    line l;
    while (p < end && !blank(l = line_at(p, end)) && (p == from || !block_start(l)))
        p += l.n + (p + l.n < end);
    size_t n = (size_t)(p - from);
    while (n && from[n - 1] == '\n') n--;
    fputs("<p>", f);
    al_md_inline(f, from, n);
    fputs("</p>\n", f);
    return p;
}

static const char *title(FILE *f, line l, int level)
{
    char id[96];
    const char *s = l.s + level + 1;
    size_t n = l.n - (size_t)level - 1;
    al_html_slug(id, sizeof id, s, n);
    fprintf(f, "<h%d id=\"%s\">", level, id);
    al_md_inline(f, s, n);
    fprintf(f, "</h%d>\n", level);
    return l.s + l.n;
}

void al_md_blocks(FILE *f, const char *md, size_t n, int tables)
{
    const char *p = md, *end = md + n;
    while (p < end) {
        line l = line_at(p, end);
        int h = heading(l);
        if (blank(l)) p += l.n + 1;
        else if (h) p = title(f, l, h);
        else if (starts(l, "```")) p = fence(f, p, end);
        else if (starts(l, "|")) p = table(f, p, end, tables);
        else if (starts(l, "- ")) p = list(f, p, end);
        else p = para(f, p, end);
    }
}
