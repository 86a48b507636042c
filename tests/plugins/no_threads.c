/*
 * no_threads.c - LD_PRELOAD'ed by test_limits.c: pthread_create fails with
 * EAGAIN (as under RLIMIT_NPROC, which does not bind root) once
 * AL_TEST_THREADS_ALLOWED threads have started. A failure to start threads
 * must be an error naming its cause, never an assert or a hang.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *t, const pthread_attr_t *a,
                                                          void *(*fn)(void *), void *arg)
{
    static atomic_int made;
    const char *allowed = getenv("AL_TEST_THREADS_ALLOWED");
    if (allowed && atomic_fetch_add(&made, 1) >= atoi(allowed)) return EAGAIN;
    create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    return real ? real(t, a, fn, arg) : ENOSYS;
}
