/*
 * util.c - errors, RNG, atomic writes, timing and the progress line.
 */
#include "al_util.h"
#include "al_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int al_errf(al_err *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        /* Messages quote values from files (a key, a path, a plugin's
         * words): control characters would break the one line. */
        for (unsigned char *p = (unsigned char *)e->msg; *p; p++)
            if (*p < 0x20 || *p == 0x7f) *p = '?';
    }
    return -1;
}

_Noreturn void al_assert_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "attnlab: internal error: %s:%d: assertion '%s' failed\n",
            file, line, what);
    abort();
}

void *al_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "attnlab: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

void *al_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "attnlab: out of memory allocating %zu x %zu bytes\n", n, size);
        abort();
    }
    return p;
}

/* ---------------------------------------------------------------- RNG */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void al_rng_seed(al_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t al_rng_u64(al_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t al_rng_below(al_rng *r, uint64_t n)
{
    AL_ASSERT(n > 0);
    /* Rejection sampling keeps the draw exactly uniform. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = al_rng_u64(r); while (x >= lim);
    return x % n;
}

double al_rng_uniform(al_rng *r) { return (al_rng_u64(r) >> 11) * 0x1.0p-53; }

double al_rng_normal(al_rng *r)
{
    /* Box-Muller, one value per call: simple and reproducible. */
    double u1 = al_rng_uniform(r), u2 = al_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---------------------------------------------------------------- faults */

/* AL_FAULT=POINT:SUFFIX[@N][!stop]: see al_util.h. Parsed once. */
static struct {
    int state;            /* 0 not parsed, 1 armed, -1 off */
    char point[16], suffix[256];
    long nth, seen;
    int stop;
} fault;

static void fault_parse(void)
{
    const char *v = getenv("AL_FAULT");
    const char *colon = v ? strchr(v, ':') : NULL;
    fault.state = -1;
    if (!colon || (size_t)(colon - v) >= sizeof fault.point) return;
    memcpy(fault.point, v, (size_t)(colon - v));
    snprintf(fault.suffix, sizeof fault.suffix, "%s", colon + 1);
    char *bang = strchr(fault.suffix, '!'), *at = strchr(fault.suffix, '@');
    if (bang) fault.stop = strcmp(bang, "!stop") == 0, *bang = 0;
    fault.nth = at ? atol(at + 1) : 1;
    if (at) *at = 0;
    fault.state = fault.nth >= 1 && fault.suffix[0] ? 1 : -1;
}

void al_fault_point(const char *point, const char *path)
{
    if (!fault.state) fault_parse();
    if (fault.state < 0 || strcmp(point, fault.point) != 0) return;
    size_t n = strlen(path), k = strlen(fault.suffix);
    if (n < k || strcmp(path + n - k, fault.suffix) != 0) return;
    if (++fault.seen == fault.nth) raise(fault.stop ? SIGSTOP : SIGKILL);
}

/* ---------------------------------------------------------------- files */

FILE *al_open_atomic(const char *path, char *tmp, size_t tmplen, al_err *e)
{
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    al_guard_tmp_begin(tmp);   /* before it exists: a signal now removes it */
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        al_guard_tmp_end(tmp);
        al_errf(e, "%s: cannot write: %s", path, strerror(errno));   /* the file meant */
    } else {
        al_fault_point("write", path);
    }
    return f;
}

int al_commit_atomic(FILE *f, const char *tmp, const char *path, al_err *e)
{
    int bad = fflush(f) != 0 || ferror(f);
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        int err = errno;
        unlink(tmp);
        al_guard_tmp_end(tmp);
        return al_errf(e, "%s: write failed: %s", path, strerror(err));
    }
    al_fault_point("rename", path);
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        al_guard_tmp_end(tmp);
        return al_errf(e, "%s: cannot rename into place: %s", path, strerror(err));
    }
    al_guard_tmp_end(tmp);
    al_fault_point("renamed", path);
    return 0;
}

int al_write_atomic(const char *path, const void *data, size_t n, al_err *e)
{
    char tmp[4200];
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    if (n && fwrite(data, 1, n, f) != n) {
        int err = errno;
        fclose(f);
        unlink(tmp);
        al_guard_tmp_end(tmp);
        return al_errf(e, "%s: write failed: %s", path, strerror(err));
    }
    return al_commit_atomic(f, tmp, path, e);
}

const char *al_file_kind(unsigned mode)
{
    mode_t m = (mode_t)mode;
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int al_check_regular(const char *path, al_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0) return al_errf(e, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode)) return 0;
    if (S_ISDIR(st.st_mode)) return al_errf(e, "%s: is a directory, not a file", path);
    return al_errf(e, "%s: is %s, not a regular file", path, al_file_kind(st.st_mode));
}

/* Open for reading what must be a regular file: O_NONBLOCK so that a FIFO
 * is refused instead of waiting forever for a writer. */
static FILE *open_regular(const char *path, al_err *e)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return al_errf(e, "%s: cannot open: %s", path, strerror(errno)), NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        mode_t m = st.st_mode;
        close(fd);
        if (dir) return al_errf(e, "%s: is a directory, not a file", path), NULL;
        return al_errf(e, "%s: is %s, not a regular file", path, al_file_kind(m)), NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd), al_errf(e, "%s: cannot open: %s", path, strerror(errno));
    return f;
}

int al_read_file_max(const char *path, size_t max, char **out, size_t *n, al_err *e)
{
    FILE *f = open_regular(path, e);
    if (!f) return -1;
    struct stat st;
    if (max && fstat(fileno(f), &st) == 0 && (uintmax_t)st.st_size > max) {
        fclose(f);
        return al_errf(e, "%s: too large (%jd bytes, at most %zu)", path, (intmax_t)st.st_size, max);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = al_malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len < 2) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return al_errf(e, "%s: out of memory", path); }
            buf = nb;
        }
    }
    int bad = ferror(f), err = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return al_errf(e, "%s: read error: %s", path, strerror(err));
    }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return 0;
}

int al_read_file(const char *path, char **out, size_t *n, al_err *e)
{
    return al_read_file_max(path, 0, out, n, e);
}

int al_check_out_dir(const char *path, al_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
        return al_errf(e, "%s: exists and is not a directory; choose another --out", path);
    return 0;
}

/* An absolute path without "." and ".." parts or doubled slashes, in place
 * (lexically: the folders it is joined from went through realpath). */
static void path_normalize(char *p)
{
    char *out = p, *seg = p;
    size_t len = 0;
    while (*seg) {
        while (*seg == '/') seg++;
        size_t n = strcspn(seg, "/");
        if (!n) break;
        if (n == 1 && seg[0] == '.') {
        } else if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--;   /* the slash before the part dropped */
        } else {
            out[len++] = '/';
            memmove(out + len, seg, n);
            len += n;
        }
        seg += n;
    }
    if (!len) out[len++] = '/';
    out[len] = 0;
}

int al_path_from(char *out, size_t n, const char *from, const char *path)
{
    char dir[PATH_MAX], abs[PATH_MAX], joined[2 * PATH_MAX + 2];
    const char *slash = from && strcmp(from, "--set") != 0 ? strrchr(from, '/') : NULL;
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else {
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == from) snprintf(dir, sizeof dir, "/");
        else snprintf(dir, sizeof dir, "%.*s", (int)(slash - from), from);
        /* the folder of a file just read exists; if it went, the working
         * directory's view of it */
        const char *d = realpath(dir, abs) ? abs : dir;
        char cwd[PATH_MAX];
        if (d[0] != '/' && getcwd(cwd, sizeof cwd))
            snprintf(joined, sizeof joined, "%s/%s/%s", cwd, d, path);
        else snprintf(joined, sizeof joined, "%s/%s", d, path);
    }
    path_normalize(joined);
    int len = snprintf(out, n, "%s", joined);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int al_path_relative(char *out, size_t n, const char *dir, const char *path)
{
    char d[PATH_MAX];
    int len;
    if (path[0] != '/' || !realpath(dir, d)) {
        len = snprintf(out, n, "%s", path);
        return len < 0 || (size_t)len >= n ? -1 : 0;
    }
    /* the parts the two share, then one ".." per part of d left */
    size_t common = 0;
    for (size_t i = 0;; i++) {
        int end_d = d[i] == 0 || d[i] == '/', end_p = path[i] == 0 || path[i] == '/';
        if (end_d && end_p) common = i;
        if (!d[i] || !path[i] || d[i] != path[i]) break;
    }
    if (strcmp(d, "/") == 0) {
        len = snprintf(out, n, "%s", path[1] ? path + 1 : ".");
        return len < 0 || (size_t)len >= n ? -1 : 0;
    }
    size_t o = 0;
    out[0] = 0;
    for (const char *q = d + common; *q; q++)
        if (*q == '/') {
            len = snprintf(out + o, n - o, "../");
            if (len < 0 || (size_t)len >= n - o) return -1;
            o += (size_t)len;
        }
    const char *rest = path + common + (path[common] == '/');
    len = snprintf(out + o, n - o, "%s", rest[0] || o ? rest : ".");
    if (len < 0 || (size_t)len >= n - o) return -1;
    if (o && !rest[0]) out[o - 1] = 0;   /* "../" alone: ".." */
    return 0;
}

int al_mkdirs(const char *path, al_err *e)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) return al_errf(e, "%s: path too long", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return al_errf(e, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return al_errf(e, "%s: not a directory", path);
    return 0;
}

/* ---------------------------------------------------------------- time */

double al_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- threads */

/* Set once, at MPI start-up, before any thread count is resolved: a fact
 * of the launch, like the rank, not a setting that a run leaves behind. */
static int threads_local_size = 1;

int al_threads_resolve(long requested, long cores, int local_size)
{
    if (requested > 0) return requested > INT_MAX ? INT_MAX : (int)requested;
    long per_rank = cores / (local_size > 1 ? local_size : 1);
    return per_rank > 1 ? (int)(per_rank > INT_MAX ? INT_MAX : per_rank) : 1;
}

int al_threads_for(long requested)
{
    return al_threads_resolve(requested, sysconf(_SC_NPROCESSORS_ONLN), threads_local_size);
}

void al_threads_set_local_size(int local_size)
{
    threads_local_size = local_size > 1 ? local_size : 1;
}

/* ---------------------------------------------------------------- progress */

static int progress_open;

int al_stderr_is_tty(void) { return isatty(STDERR_FILENO); }

void al_progress_line(const char *fmt, ...)
{
    if (!al_stderr_is_tty()) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[K%s", buf);
    fflush(stderr);
    progress_open = 1;
}

void al_progress_end(void)
{
    if (progress_open) fputc('\n', stderr);
    progress_open = 0;
}

/* ---------------------------------------------------------------- words */

int al_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    int row[128];
    if (n >= 128 || m >= 128) return 99;
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* ------------------------------------------------------------ signals */

/* The temp files of the atomic writes in progress (a handful at most:
 * one per open al_open_atomic), and the line the handler prints. Written
 * before the handler can need them, read only by it. */
#define MAX_TMP 8
static char tmps[MAX_TMP][AL_ERR_LEN];
static volatile sig_atomic_t tmp_used[MAX_TMP];
static char hint[AL_ERR_LEN] = "run the command again to continue";

void al_guard_tmp_begin(const char *tmp)
{
    for (int i = 0; i < MAX_TMP; i++) {
        if (tmp_used[i]) continue;
        snprintf(tmps[i], sizeof tmps[i], "%s", tmp);
        tmp_used[i] = 1;   /* after the name: the handler never reads half a name */
        return;
    }
}

void al_guard_tmp_end(const char *tmp)
{
    for (int i = 0; i < MAX_TMP; i++)
        if (tmp_used[i] && strcmp(tmps[i], tmp) == 0) {
            tmp_used[i] = 0;
            return;
        }
}

void al_signals_hint(const char *fmt, ...)
{
    char buf[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    sigset_t all, old;   /* the handler must never read a half-written hint */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    memcpy(hint, buf, sizeof hint);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void put(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

/* The thread that installed the handlers: the one that writes the run's
 * files. A process-directed signal may land on any thread (a pool or
 * OpenBLAS worker); handled there, the main thread would go on meanwhile,
 * open its next temp file after the handler's sweep and print after its
 * last line, so _exit would leave that file behind. */
static pthread_t main_thread;

/* Only async-signal-safe calls: pthread_self, pthread_kill, unlink, write,
 * _exit. On another thread the signal is handed to the main thread, which
 * stops where it stands. The temp file goes; its target is the previous
 * complete file or the new one (rename is atomic), which is all a resume
 * reads. The lock goes with the process. */
static void on_signal(int sig)
{
    if (!pthread_equal(pthread_self(), main_thread)) {
        pthread_kill(main_thread, sig);
        return;
    }
    for (int i = 0; i < MAX_TMP; i++)
        if (tmp_used[i]) unlink(tmps[i]);
    put(sig == SIGINT ? "attnlab: interrupted (SIGINT); " : "attnlab: terminated (SIGTERM); ");
    put(hint);
    put("\n");
    _exit(128 + sig);
}

void al_signals_install(void)
{
    struct sigaction sa;
    main_thread = pthread_self();
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);   /* one handler at a time: SIGTERM during SIGINT's waits */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN);
}
