/* threadpool.c - pthread workers woken per parallel region.
 *
 * A region bumps `generation`; workers spin briefly on it (a decode step
 * opens hundreds of short regions, and a futex wake costs more than the
 * work) and then sleep on a condition variable. Tasks are handed out with
 * an atomic counter, so uneven tasks balance themselves. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/threadpool.h"

/* Spin this many pause rounds, then yield the core this many times, then
 * sleep. Yielding matters when the machine is oversubscribed: a spinning
 * waiter must not starve the very thread it is waiting for. */
#define SPIN_ROUNDS 4000
#define YIELD_ROUNDS 200

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

typedef struct worker_arg {
	struct hsq_pool *pool;
	int thread; /* 1..n_threads-1 */
} worker_arg;

struct hsq_pool {
	int n_threads;          /* including the caller */
	pthread_t *workers;     /* [n_threads - 1] */
	worker_arg *args;       /* [n_threads - 1] */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	atomic_uint generation; /* bumped per region */
	atomic_int next_task;   /* next task index to hand out */
	atomic_int n_busy;      /* workers still inside the current region */
	int n_tasks;
	pool_fn fn;
	void *arg;
	int stop;
};

static void drain(hsq_pool *p, int thread)
{
	for (;;) {
		int t = atomic_fetch_add(&p->next_task, 1);
		if (t >= p->n_tasks)
			return;
		p->fn(p->arg, t, thread);
	}
}


static void *worker_main(void *arg)
{
	hsq_pool *p = ((worker_arg *)arg)->pool;
	int thread = ((worker_arg *)arg)->thread;
	unsigned seen = 0;
	for (;;) {
		unsigned g;
		int spins = 0;
		while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
		       spins < SPIN_ROUNDS + YIELD_ROUNDS) {
			if (spins++ < SPIN_ROUNDS)
				cpu_relax();
			else
				sched_yield();
		}
		if (g == seen) {
			pthread_mutex_lock(&p->lock);
			while ((g = atomic_load(&p->generation)) == seen && !p->stop)
				pthread_cond_wait(&p->wake, &p->lock);
			pthread_mutex_unlock(&p->lock);
		}
		if (p->stop)
			return NULL;
		seen = g;
		drain(p, thread);
		atomic_fetch_sub_explicit(&p->n_busy, 1, memory_order_release);
	}
}

hsq_status pool_new(int n_threads, hsq_pool **out)
{
	hsq_pool *p = calloc(1, sizeof *p);
	*out = NULL;
	if (!p)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory creating %d threads", n_threads);
	if (n_threads < 1)
		n_threads = 1;
	p->n_threads = n_threads;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	p->workers = calloc((size_t)n_threads, sizeof *p->workers);
	p->args = calloc((size_t)n_threads, sizeof *p->args);
	if (!p->workers || !p->args) {
		pool_free(p);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory creating %d threads", n_threads);
	}
	for (int i = 0; i < n_threads - 1; i++) {
		p->args[i] = (worker_arg){ p, i + 1 };
		if (pthread_create(&p->workers[i], NULL, worker_main, &p->args[i])) {
			p->n_threads = i + 1; /* pool_free joins the ones that started */
			pool_free(p);
			return hsq_fail(HSQ_ERR_NOMEM, "cannot start thread %d of %d; try fewer threads", i + 2, n_threads);
		}
	}
	*out = p;
	return HSQ_OK;
}

void pool_free(hsq_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	atomic_fetch_add(&p->generation, 1);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; p->workers && i < p->n_threads - 1; i++)
		pthread_join(p->workers[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->wake);
	free(p->workers);
	free(p->args);
	free(p);
}

int pool_threads(const hsq_pool *p)
{
	return p->n_threads;
}

void pool_run(hsq_pool *p, int n_tasks, pool_fn fn, void *arg)
{
	if (p->n_threads == 1 || n_tasks == 1) {
		for (int t = 0; t < n_tasks; t++)
			fn(arg, t, 0);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	p->n_tasks = n_tasks;
	atomic_store(&p->next_task, 0);
	atomic_store(&p->n_busy, p->n_threads - 1);
	pthread_mutex_lock(&p->lock);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	drain(p, 0);
	for (int spins = 0; atomic_load_explicit(&p->n_busy, memory_order_acquire) > 0; spins++) {
		if (spins < SPIN_ROUNDS)
			cpu_relax();
		else
			sched_yield();
	}
}
