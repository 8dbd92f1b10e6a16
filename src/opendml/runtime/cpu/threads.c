/* odml_parallel (common.h): threads are started per call (a call moves at least thread_grain_bytes per thread, so
 * starting one costs little beside it) and joined before it returns. */
#include "common.h"

#ifndef _WIN32
#include <pthread.h>
#endif

typedef struct { odml_work_fn fn; const void *job; int64_t u0, u1; int part; } part_t;

#ifndef _WIN32
static void *thread_main(void *arg) {
    part_t *w = (part_t *)arg;
    w->fn(w->job, w->u0, w->u1, w->part);
    return NULL;
}
#endif

/* A thread that cannot be started leaves its part to the caller. */
void odml_parallel(odml_work_fn fn, const void *job, int64_t units, int threads) {
    if (units <= 0) return;
    if (threads > units) threads = (int)units;
    if (threads > ODML_MAX_THREADS) threads = ODML_MAX_THREADS;
#ifdef _WIN32
    threads = 1;
#endif
    if (threads <= 1) { fn(job, 0, units, 0); return; }
#ifndef _WIN32
    part_t parts[ODML_MAX_THREADS];
    pthread_t tids[ODML_MAX_THREADS];
    int started[ODML_MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        parts[t].fn = fn; parts[t].job = job; parts[t].part = t;
        /* units * t fits: units <= 2^62 / 64 is not guaranteed, so divide first */
        parts[t].u0 = units / threads * t + units % threads * t / threads;
        parts[t].u1 = units / threads * (t + 1) + units % threads * (t + 1) / threads;
        started[t] = 0;
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, thread_main, &parts[t]) == 0;
    fn(job, parts[0].u0, parts[0].u1, 0);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else fn(job, parts[t].u0, parts[t].u1, t);
    }
#endif
}
