/* threadpool.h - a fixed pool of worker threads running parallel-for loops
 * (internal). The calling thread takes part, so n_threads = 1 is serial. */
#ifndef HSQ_THREADPOOL_H
#define HSQ_THREADPOOL_H

#include "hsq.h"

typedef struct hsq_pool hsq_pool;

/* fn(arg, task, thread) is called once for every task in 0..n_tasks-1;
 * thread (0..n_threads-1, 0 = the caller) tells which per-thread scratch
 * the task may use. */
typedef void (*pool_fn)(void *arg, int task, int thread);

hsq_status pool_new(int n_threads, hsq_pool **out);
void pool_free(hsq_pool *pool);
int pool_threads(const hsq_pool *pool);
/* Runs all tasks and returns when every one has finished. */
void pool_run(hsq_pool *pool, int n_tasks, pool_fn fn, void *arg);

#endif
