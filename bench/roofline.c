/* roofline.c - how fast can a decode step be on this machine, and how
 * close does hsq come?
 *
 * usage: roofline [--threads N] [--log FILE.jsonl] [--kv-bytes 2|4]
 *                 [--lengths LIST] [--array-mib M] [--reps R]
 *                 [--bandwidth GB/S] [MODEL]
 *
 * A decode step of a small model reads every weight once and the KV cache
 * once, and does about two FLOPs per weight byte or less: it is bound by
 * memory bandwidth, not compute. So the limit is bandwidth / bytes read.
 *
 * 1. Bandwidth, GB/s (1e9 B/s): a STREAM-like triad a[i] = b[i] + s*c[i]
 *    and a read-only pass (the sum of the same three arrays: the access
 *    pattern of a decode step, which reads and hardly writes), each with 1
 *    thread and with N threads. Each thread takes a contiguous slice and
 *    touches it first, so its pages are its own. The arrays are far larger
 *    than the last-level cache; the best of R repetitions counts. Bytes are
 *    counted as STREAM does: triad 3 arrays, read 3 arrays, per pass. The
 *    limit is the read bandwidth at N threads (--bandwidth gives it
 *    instead, and skips the measurement).
 *
 * 2. Bytes per decode step at context n, per method:
 *    weights  every tensor a step reads: each layer's seven matrices and
 *             its norms, the output norm and matrix, and one embedding
 *             row (sizes as stored: rows x row_bytes from the model);
 *    full     per layer 2 x n_held x n_head_kv x head_dim x KVBYTES, with
 *             n_held the layer's sliding window when it has one smaller
 *             than n, else n (KVBYTES: --kv-bytes, default 2, the fp16
 *             cache the engine holds; 4 for an fp32 cache);
 *    quant    fast_bytes from the hsq-eval bench log: the L1 codes;
 *    hsq      fast_bytes (L1 + L2 codes) + the L3 bytes fetched, modelled
 *             as archive_bytes x (r + (1 - r) x min(1, budget / n)): a
 *             share r of the KV heads are retrieval heads, which fetch
 *             every group, and the others fetch up to the budget of
 *             hsq_default_budget(n) tokens (or the log's --budget). r is
 *             the log's retrieval head count, by default
 *             hsq_default_retrieval_heads of the global layers' KV heads
 *             (as lib/kv/tiers.c picks them; fewer are marked when fewer
 *             heads score above 0, so r is an upper bound), over the
 *             global layers' KV heads, the only ones with an archive (a
 *             sliding layer keeps its window in L1);
 *    others   (streaming, snapkv) fast_bytes.
 *    Every tiered method also reads its full-precision tail (fp16): the
 *    tokens decoded since compression, min(D, window) / 2 on average over
 *    the log's D steps (quant and hsq fold them into the tiers once a
 *    window is full; streaming and snapkv keep all D, so D / 2). With a
 *    log, full's n is the mean context over the decode steps, n + D / 2;
 *    the tiers' bytes are the log's, at n.
 *    These are the encoded bytes a kernel reading the codes touches. The
 *    CPU attention of this commit reads fp16 decoded copies of L1, L2 and
 *    the fetched groups instead (lib/kv/tiers.h), four times the bytes of
 *    4-bit codes: its fraction of this limit is lower than the same code
 *    reading codes would get.
 *
 * 3. Compute per step (informational): 2 x weight parameters for the
 *    matmuls, plus 4 x n_attended x n_head x head_dim per layer for the
 *    attention (scores and values). hsq attends to l1_fraction x n L1
 *    tokens, n / group_size summaries, the fetched tokens and the tail;
 *    streaming and snapkv are scaled from quant by their fast bytes.
 *
 * 4. Per length and method of the log: bytes per step (MB, 1e6 B), the
 *    limit in tokens/s (bandwidth / bytes), the decode tokens/s the log
 *    measured, and the achieved fraction of the limit. Without --log, the
 *    bandwidth and the full method's bytes and limit at --lengths.
 *
 * The log is read with a small scanner for the fixed shape hsq-eval
 * writes (cmd/eval/runner.c, bench.c), not cmd/eval's JSON reader, which
 * is not part of the libraries the benchmarks link. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "hsq.h"
#include "model/model.h"

#define PROG "roofline"
#define MAX_LENGTHS 32
#define MAX_METHODS 8

static const char USAGE[] =
	"usage: roofline [--threads N] [--log FILE.jsonl] [--kv-bytes 2|4] [--lengths LIST]\n"
	"                [--array-mib M] [--reps R] [--bandwidth GB/S] [MODEL]\n"
	"  --threads N      threads of the multi-threaded bandwidth runs (default: the log's, else all cores)\n"
	"  --log FILE       an `hsq-eval bench --log` file: per length and method, bytes, limit and achieved\n"
	"  --kv-bytes B     bytes per element of the full KV cache: 2 (fp16, default) or 4 (fp32)\n"
	"  --lengths LIST   comma-separated context lengths without --log (default 2048,8192,32768)\n"
	"  --array-mib M    size of each of the three bandwidth arrays (default 256)\n"
	"  --reps R         repetitions per bandwidth kernel, best counts (default 5)\n"
	"  --bandwidth G    the limit in GB/s, instead of measuring it\n"
	"  MODEL            a GGUF file (default: hsq's default model path)\n";

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n%s", USAGE);
	va_end(ap);
	exit(2);
}

/* ------------------------------------------------------------ bandwidth */

typedef float v8f __attribute__((vector_size(32)));

enum { K_TRIAD, K_READ, N_KERNELS };

/* The read passes' sums end here, so the compiler cannot drop the reads. */
static volatile double bw_sink;

typedef struct bw_thread {
	pthread_t id;
	struct bw_run *run;
	int index;             /* 0 times the passes */
	size_t lo, n;          /* this thread's slice of each array, floats (a multiple of 8) */
	double sum;            /* the read passes' result, kept so they are computed */
} bw_thread;

typedef struct bw_run {
	float *a, *b, *c;      /* [n_floats] each, 64-byte aligned */
	int reps;
	pthread_barrier_t sync; /* the threads, before and after each pass */
	double best[N_KERNELS]; /* shortest pass of each kernel, seconds */
} bw_run;

static void triad(float *restrict a, const float *restrict b, const float *restrict c, size_t n)
{
	const v8f s = { 3, 3, 3, 3, 3, 3, 3, 3 };
	v8f *va = (v8f *)a;
	const v8f *vb = (const v8f *)b, *vc = (const v8f *)c;
	for (size_t i = 0; i < n / 8; i++)
		va[i] = vb[i] + s * vc[i];
}

/* Four independent accumulators: one would wait on the add's latency and
 * measure that instead of memory. */
static double read_sum(const float *x, size_t n)
{
	const v8f *v = (const v8f *)x;
	v8f s0 = { 0 }, s1 = { 0 }, s2 = { 0 }, s3 = { 0 };
	size_t i = 0;
	for (; i + 4 <= n / 8; i += 4) {
		s0 += v[i];
		s1 += v[i + 1];
		s2 += v[i + 2];
		s3 += v[i + 3];
	}
	for (; i < n / 8; i++)
		s0 += v[i];
	v8f s = s0 + s1 + s2 + s3;
	double t = 0;
	for (int k = 0; k < 8; k++)
		t += s[k];
	return t;
}

/* Every pass starts and ends at a barrier of the worker threads, and
 * thread 0, one of them, times it: a timing thread of its own would
 * compete for the cores and wake late, and a late start reads as a
 * shorter pass. */
static void *bw_worker(void *arg)
{
	bw_thread *T = arg;
	bw_run *R = T->run;
	float *a = R->a + T->lo, *b = R->b + T->lo, *c = R->c + T->lo;
	/* first touch: the pages of this slice are placed for this thread */
	for (size_t i = 0; i < T->n; i++) {
		a[i] = 1.0f;
		b[i] = 2.0f;
		c[i] = 0.5f;
	}
	for (int k = 0; k < N_KERNELS; k++) {
		for (int r = 0; r < R->reps; r++) {
			pthread_barrier_wait(&R->sync);
			double t0 = bench_now();
			if (k == K_TRIAD)
				triad(a, b, c, T->n);
			else
				T->sum += read_sum(a, T->n) + read_sum(b, T->n) + read_sum(c, T->n);
			pthread_barrier_wait(&R->sync);
			double dt = bench_now() - t0;
			if (T->index == 0 && dt < R->best[k])
				R->best[k] = dt;
		}
	}
	return NULL;
}

/* Best GB/s of each kernel with `threads` threads over three arrays of
 * n_floats. */
static int bandwidth(int threads, size_t n_floats, int reps, double gbs[N_KERNELS])
{
	bw_run R = { .reps = reps, .best = { INFINITY, INFINITY } };
	size_t bytes = n_floats * sizeof(float);
	R.a = aligned_alloc(64, bytes);
	R.b = aligned_alloc(64, bytes);
	R.c = aligned_alloc(64, bytes);
	bw_thread *T = calloc((size_t)threads, sizeof *T);
	if (!R.a || !R.b || !R.c || !T) {
		fprintf(stderr, PROG ": out of memory for three arrays of %zu MiB; lower --array-mib\n", bytes >> 20);
		return -1;
	}
	pthread_barrier_init(&R.sync, NULL, (unsigned)threads);
	/* slices in whole cache lines (16 floats), the last takes the rest */
	size_t per = n_floats / (size_t)threads / 16 * 16;
	for (int t = 0; t < threads; t++) {
		T[t].run = &R;
		T[t].index = t;
		T[t].lo = (size_t)t * per;
		T[t].n = t + 1 < threads ? per : n_floats - T[t].lo;
		if (pthread_create(&T[t].id, NULL, bw_worker, &T[t])) {
			fprintf(stderr, PROG ": cannot start bandwidth thread %d of %d\n", t + 1, threads);
			exit(1);
		}
	}
	for (int t = 0; t < threads; t++) {
		pthread_join(T[t].id, NULL);
		bw_sink += T[t].sum;
	}
	for (int k = 0; k < N_KERNELS; k++)
		gbs[k] = 3.0 * (double)bytes / R.best[k] / 1e9;
	pthread_barrier_destroy(&R.sync);
	free(T);
	free(R.a);
	free(R.b);
	free(R.c);
	return 0;
}

/* The last-level cache in bytes, from sysfs (0 if unknown). */
static long llc_bytes(void)
{
	long best = 0;
	for (int i = 0; i < 8; i++) {
		char path[96];
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		long v = 0;
		char unit = 0;
		if (fscanf(f, "%ld%c", &v, &unit) >= 1)
			v *= unit == 'K' ? 1024 : unit == 'M' ? 1048576 : 1;
		fclose(f);
		best = v > best ? v : best;
	}
	return best;
}

/* ------------------------------------------------------------ the model */

/* What one decode step of the model reads and computes, apart from the KV. */
typedef struct step_cost {
	double matrices;      /* bytes of the layers' matrices */
	double norms;         /* bytes of every norm vector (fp32 in memory) */
	double output;        /* bytes of the output matrix */
	double embd_row;      /* bytes of one embedding row */
	double params;        /* weight parameters of the matmuls (layers + output) */
	double kv_per_token;  /* K + V elements per token, summed over layers */
} step_cost;

static double weight_bytes(const hsq_weight *w)
{
	return (double)w->rows * (double)w->row_bytes;
}

static double weight_params(const hsq_weight *w)
{
	return (double)w->rows * (double)w->cols;
}

static step_cost model_cost(const hsq_model *m)
{
	const hsq_model_info *mi = &m->info;
	step_cost c = { 0 };
	for (int l = 0; l < mi->n_layer; l++) {
		const hsq_layer *L = &m->layers[l];
		const hsq_weight *w[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
		for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
			c.matrices += weight_bytes(w[i]);
			c.params += weight_params(w[i]);
		}
		int norms_embd = 2 + (L->post_attn_norm != NULL) + (L->post_ffn_norm != NULL);
		int norms_head = (L->q_norm != NULL) + (L->k_norm != NULL);
		c.norms += 4.0 * (norms_embd * mi->n_embd + norms_head * mi->head_dim);
	}
	c.norms += 4.0 * mi->n_embd; /* output norm */
	c.output = weight_bytes(&m->output);
	c.params += weight_params(&m->output);
	c.embd_row = (double)m->tok_embd.row_bytes;
	c.kv_per_token = 2.0 * mi->n_layer * mi->n_head_kv * mi->head_dim;
	return c;
}

static double weights_total(const step_cost *c)
{
	return c->matrices + c->norms + c->output + c->embd_row;
}

/* Positions layer l holds at context n (tokens). */
static double held(const hsq_model *m, int l, double n)
{
	int w = m->layers[l].window;
	return w && w < n ? w : n;
}

/* Full cache bytes read at context n. */
static double full_kv_bytes(const hsq_model *m, double n, int kv_bytes)
{
	const hsq_model_info *mi = &m->info;
	double b = 0;
	for (int l = 0; l < mi->n_layer; l++)
		b += 2.0 * held(m, l, n) * mi->n_head_kv * mi->head_dim * kv_bytes;
	return b;
}

/* Attention FLOPs over n_att(l) positions per layer: 4 x n_att x n_head x
 * head_dim (q.k and the weighted sum of v, a multiply and an add each). */
static double attn_flops(const hsq_model *m, double n_global, double n)
{
	const hsq_model_info *mi = &m->info;
	double f = 0;
	for (int l = 0; l < mi->n_layer; l++)
		f += 4.0 * (m->layers[l].window ? held(m, l, n) : n_global) * mi->n_head * mi->head_dim;
	return f;
}

/* ------------------------------------------------------------------ log */

typedef struct method_rec {
	char name[16];
	double decode_tok_s;   /* measured */
	double fast_bytes;     /* L1 + L2 codes (full: the cache at fp16) */
	double archive_bytes;  /* L3 codes, uncompressed */
} method_rec;

typedef struct length_rec {
	int length;            /* tokens in the context before decoding */
	int n_methods;
	method_rec m[MAX_METHODS];
} length_rec;

typedef struct bench_log {
	char sha256[65];       /* the model identity, hex */
	int decode;            /* decode steps timed per method */
	int threads;           /* hsq-eval's -t (0: all cores) */
	int budget;            /* tokens per KV head, or HSQ_BUDGET_DEFAULT / HSQ_BUDGET_ALL */
	int retrieval;         /* retrieval heads, or HSQ_RETRIEVAL_DEFAULT */
	int window, group_size;
	double l1_fraction;
	int n_len;
	length_rec len[MAX_LENGTHS];
} bench_log;

/* The value after "key": within [s, end), or NULL. Keys are matched with
 * their quotes, so "window" does not match "obs_window". */
static const char *json_at(const char *s, const char *end, const char *key)
{
	char pat[64];
	int n = snprintf(pat, sizeof pat, "\"%s\":", key);
	for (const char *p = s; p && p + n <= end; p++) {
		p = memchr(p, '"', (size_t)(end - p));
		if (!p || p + n > end)
			return NULL;
		if (!memcmp(p, pat, (size_t)n))
			return p + n;
	}
	return NULL;
}

static int json_num(const char *s, const char *end, const char *key, double *out)
{
	const char *p = json_at(s, end, key);
	if (!p)
		return 0;
	char *e;
	errno = 0;
	*out = strtod(p, &e);
	return e != p && errno == 0;
}

/* A string value into buf (no escapes: hsq-eval writes none here). */
static int json_str(const char *s, const char *end, const char *key, char *buf, size_t cap)
{
	const char *p = json_at(s, end, key);
	if (!p || *p != '"')
		return 0;
	const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
	if (!q || (size_t)(q - p - 1) >= cap)
		return 0;
	memcpy(buf, p + 1, (size_t)(q - p - 1));
	buf[q - p - 1] = '\0';
	return 1;
}

static _Noreturn void log_error(const char *path, long line, const char *what)
{
	fprintf(stderr, PROG ": %s:%ld: %s; is it an `hsq-eval bench --log` file?\n", path, line, what);
	exit(1);
}

/* Reads the config line and every "length" record of an hsq-eval bench log. */
static void read_log(const char *path, bench_log *B)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, PROG ": cannot read %s: %s\n", path, strerror(errno));
		exit(1);
	}
	memset(B, 0, sizeof *B);
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	long no = 0;
	int have_config = 0;
	while ((got = getline(&line, &cap, f)) > 0) {
		const char *s = line, *end = line + got;
		char buf[64];
		double v;
		no++;
		if (json_at(s, end, "hsq_eval_log")) {
			if (!json_str(s, end, "subcommand", buf, sizeof buf) || strcmp(buf, "bench"))
				log_error(path, no, "the log is not from hsq-eval bench");
			if (!json_str(s, end, "model_sha256", B->sha256, sizeof B->sha256))
				log_error(path, no, "no \"model_sha256\" in the config");
			B->decode = json_num(s, end, "decode", &v) ? (int)v : 0;
			B->threads = json_num(s, end, "threads", &v) ? (int)v : 0;
			if (!json_str(s, end, "budget", buf, sizeof buf))
				log_error(path, no, "no \"budget\" in the config");
			B->budget = !strcmp(buf, "default") ? HSQ_BUDGET_DEFAULT
				    : !strcmp(buf, "all")   ? HSQ_BUDGET_ALL
							    : atoi(buf);
			B->retrieval = json_str(s, end, "retrieval_heads", buf, sizeof buf) && strcmp(buf, "default")
					       ? atoi(buf)
					       : HSQ_RETRIEVAL_DEFAULT;
			const char *t = json_at(s, end, "tiers");
			if (!t || !json_num(t, end, "window", &v))
				log_error(path, no, "no \"tiers\" with a \"window\" in the config");
			B->window = (int)v;
			B->group_size = json_num(t, end, "group_size", &v) ? (int)v : 16;
			B->l1_fraction = json_num(t, end, "l1_fraction", &v) ? v : 0;
			if (B->decode < 1)
				log_error(path, no, "no \"decode\" step count in the config");
			have_config = 1;
			continue;
		}
		if (!json_str(s, end, "record", buf, sizeof buf) || strcmp(buf, "length"))
			continue;
		if (!have_config)
			log_error(path, no, "a length record before the config line");
		if (B->n_len == MAX_LENGTHS)
			log_error(path, no, "more than 32 lengths");
		length_rec *L = &B->len[B->n_len];
		if (!json_num(s, end, "length", &v) || v < 1)
			log_error(path, no, "no \"length\"");
		L->length = (int)v;
		const char *p = json_at(s, end, "methods");
		if (!p || *p != '{')
			log_error(path, no, "no \"methods\" object");
		/* "name":{flat object}, ... */
		for (p++; p < end && *p != '}';) {
			if (*p == ',' || *p == ' ') {
				p++;
				continue;
			}
			const char *q = *p == '"' ? memchr(p + 1, '"', (size_t)(end - p - 1)) : NULL;
			const char *close = q && q[1] == ':' && q[2] == '{' ? memchr(q, '}', (size_t)(end - q)) : NULL;
			if (!close || (size_t)(q - p - 1) >= sizeof L->m[0].name)
				log_error(path, no, "a malformed method in \"methods\"");
			if (L->n_methods == MAX_METHODS)
				log_error(path, no, "more than 8 methods");
			method_rec *M = &L->m[L->n_methods++];
			memcpy(M->name, p + 1, (size_t)(q - p - 1));
			M->name[q - p - 1] = '\0';
			if (!json_num(q, close, "decode_tok_s", &M->decode_tok_s) ||
			    !json_num(q, close, "fast_bytes", &M->fast_bytes) ||
			    !json_num(q, close, "archive_bytes", &M->archive_bytes))
				log_error(path, no, "a method without decode_tok_s, fast_bytes and archive_bytes");
			p = close + 1;
		}
		B->n_len++;
	}
	free(line);
	fclose(f);
	if (!have_config)
		log_error(path, no, "no config line (with \"hsq_eval_log\")");
	if (!B->n_len)
		log_error(path, no, "no \"length\" records (did the run finish a length?)");
}

/* ----------------------------------------------------------------- main */

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
	char *e;
	errno = 0;
	long v = strtol(s, &e, 10);
	if (e == s || *e || errno || v < lo || v > hi)
		usage_error("%s '%s' is not a whole number in %d..%d", opt, s, lo, hi);
	return (int)v;
}

static int parse_lengths(const char *s, int *out)
{
	int n = 0;
	char *copy = strdup(s), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == MAX_LENGTHS)
			usage_error("--lengths '%s' has more than 32 lengths", s);
		out[n++] = parse_int("--lengths", tok, 1, 1 << 24);
	}
	free(copy);
	if (!n)
		usage_error("--lengths '%s' names no length", s);
	return n;
}

static const method_rec *find_method(const length_rec *L, const char *name)
{
	for (int i = 0; i < L->n_methods; i++)
		if (!strcmp(L->m[i].name, name))
			return &L->m[i];
	return NULL;
}

int main(int argc, char **argv)
{
	enum { O_LOG = 256, O_KV, O_LENGTHS, O_MIB, O_REPS, O_BW, O_HELP };
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },   { "log", required_argument, NULL, O_LOG },
		{ "kv-bytes", required_argument, NULL, O_KV }, { "lengths", required_argument, NULL, O_LENGTHS },
		{ "array-mib", required_argument, NULL, O_MIB }, { "reps", required_argument, NULL, O_REPS },
		{ "bandwidth", required_argument, NULL, O_BW }, { "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	int threads = 0, kv_bytes = 2, mib = 256, reps = 5, n_len = 3;
	int lengths[MAX_LENGTHS] = { 2048, 8192, 32768 };
	const char *log_path = NULL;
	double given_bw = 0;
	int c;
	while ((c = getopt_long(argc, argv, "t:", opts, NULL)) != -1) {
		switch (c) {
		case 't': threads = parse_int("--threads", optarg, 1, 1024); break;
		case O_LOG: log_path = optarg; break;
		case O_KV:
			kv_bytes = parse_int("--kv-bytes", optarg, 2, 4);
			if (kv_bytes == 3)
				usage_error("--kv-bytes '%s' is not 2 (fp16) or 4 (fp32)", optarg);
			break;
		case O_LENGTHS: n_len = parse_lengths(optarg, lengths); break;
		case O_MIB: mib = parse_int("--array-mib", optarg, 1, 1 << 16); break;
		case O_REPS: reps = parse_int("--reps", optarg, 1, 1000); break;
		case O_BW: {
			char *e;
			given_bw = strtod(optarg, &e);
			if (e == optarg || *e || !(given_bw > 0 && given_bw < 1e6))
				usage_error("--bandwidth '%s' is not a positive GB/s", optarg);
			break;
		}
		case O_HELP: fputs(USAGE, stdout); return 0;
		default: fprintf(stderr, "%s", USAGE); return 2;
		}
	}
	if (argc - optind > 1)
		usage_error("one MODEL only ('%s' is extra)", argv[optind + 1]);
	char model_path[4096];
	if (optind < argc) {
		snprintf(model_path, sizeof model_path, "%s", argv[optind]);
	} else if (hsq_default_model_path(model_path, sizeof model_path)) {
		usage_error("no MODEL given and no default model found (run 'make model')");
	}

	bench_log *B = NULL;
	if (log_path) {
		B = malloc(sizeof *B);
		if (!B) {
			fprintf(stderr, PROG ": out of memory\n");
			return 1;
		}
		read_log(log_path, B);
	}
	hsq_model *model;
	if (hsq_model_load(model_path, &model)) {
		fprintf(stderr, PROG ": %s: %s\n", model_path, hsq_last_error());
		return 1;
	}
	const hsq_model_info *mi = &model->info;
	if (B) {
		char hex[65];
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", mi->identity[i]);
		if (strcmp(hex, B->sha256)) {
			fprintf(stderr, PROG ": %s was written for the model with sha256 %.12s..., not %s (%.12s...)\n",
				log_path, B->sha256, model_path, hex);
			return 1;
		}
	}
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (!threads)
		threads = B && B->threads > 0 ? B->threads : cores > 0 ? (int)cores : 1;

	const char *base = strrchr(model_path, '/');
	printf("roofline: %s (%s): %s, %d layers, %d query / %d KV heads x %d, n_embd %d, n_ff %d, vocab %d\n",
	       *mi->name ? mi->name : "?", base ? base + 1 : model_path, mi->architecture, mi->n_layer, mi->n_head,
	       mi->n_head_kv, mi->head_dim, mi->n_embd, mi->n_ff, mi->n_vocab);

	/* 1. bandwidth */
	double limit_gbs = given_bw;
	if (!given_bw) {
		size_t n_floats = (size_t)mib * 1048576 / sizeof(float) / 16 * 16;
		double bw1[N_KERNELS], bwn[N_KERNELS];
		if (bandwidth(1, n_floats, reps, bw1) < 0 || (threads > 1 && bandwidth(threads, n_floats, reps, bwn) < 0))
			return 1;
		if (threads == 1)
			memcpy(bwn, bw1, sizeof bwn);
		long llc = llc_bytes();
		printf("\nmemory bandwidth, GB/s (1e9 B/s): three arrays of %d MiB (last-level cache %ld MiB), best of %d\n",
		       mib, llc >> 20, reps);
		if (llc && 3L * mib * 1048576 < 4 * llc)
			printf("  note: the arrays are less than 4x the last-level cache; raise --array-mib\n");
		printf("  %-26s %10s %8d threads\n", "kernel", "1 thread", threads);
		printf("  %-26s %10.1f %16.1f\n", "triad a = b + s*c", bw1[K_TRIAD], bwn[K_TRIAD]);
		printf("  %-26s %10.1f %16.1f\n", "read (sum of the arrays)", bw1[K_READ], bwn[K_READ]);
		printf("  (STREAM counting: 3 arrays of bytes per pass for both)\n");
		limit_gbs = bwn[K_READ];
		printf("limit: the read bandwidth at %d thread%s, %.1f GB/s (a decode step reads, and hardly writes)\n",
		       threads, threads == 1 ? "" : "s", limit_gbs);
	} else {
		printf("\nlimit: %.1f GB/s (--bandwidth, not measured)\n", limit_gbs);
	}

	/* 2-3. the model's bytes and compute per step */
	step_cost sc = model_cost(model);
	double wbytes = weights_total(&sc);
	int tied = model->output.data == model->tok_embd.data;
	printf("\nweights read per decode step: %.2f MB = matrices %.2f + output %.2f%s + norms %.3f + one embedding "
	       "row %.4f\n",
	       wbytes / 1e6, sc.matrices / 1e6, sc.output / 1e6, tied ? " (tied to the embedding)" : "", sc.norms / 1e6,
	       sc.embd_row / 1e6);
	printf("matmul compute per step: %.1f M parameters, %.3f GFLOP (2 per parameter)\n", sc.params / 1e6,
	       2 * sc.params / 1e9);
	int n_global = 0;
	for (int l = 0; l < mi->n_layer; l++)
		n_global += !model->layers[l].window;

	if (!B) {
		printf("\nfull KV: per layer 2 x n_held x %d KV heads x %d x %d B (%s; --kv-bytes), n_held = n or the "
		       "layer's sliding window\n",
		       mi->n_head_kv, mi->head_dim, kv_bytes, kv_bytes == 2 ? "fp16" : "fp32");
		printf("\n%8s %-8s %10s %9s %10s %8s %12s\n", "length", "method", "weights MB", "KV MB", "total MB",
		       "GFLOP", "limit tok/s");
		for (int i = 0; i < n_len; i++) {
			double n = lengths[i], kv = full_kv_bytes(model, n, kv_bytes), tot = wbytes + kv;
			double gf = (2 * sc.params + attn_flops(model, n, n)) / 1e9;
			printf("%8d %-8s %10.2f %9.2f %10.2f %8.3f %12.1f%s\n", lengths[i], "full", wbytes / 1e6, kv / 1e6,
			       tot / 1e6, gf, limit_gbs * 1e9 / tot,
			       lengths[i] > mi->n_ctx_train ? "  (beyond the model's context)" : "");
		}
		hsq_model_free(model);
		return 0;
	}

	/* 4. per length and method of the log */
	/* Only global layers have an archive (a sliding layer keeps its window
	 * in L1), so the retrieval share is of the global layers' heads. */
	const double D = B->decode;
	const int global_heads = n_global * mi->n_head_kv;
	int r_heads = B->retrieval == HSQ_RETRIEVAL_DEFAULT ? hsq_default_retrieval_heads(global_heads) : B->retrieval;
	r_heads = r_heads > global_heads ? global_heads : r_heads;
	const double r = global_heads ? (double)r_heads / global_heads : 0;
	const double tail_bytes_per_token = sc.kv_per_token * 2; /* fp16 */
	char budget_name[32];
	if (B->budget == HSQ_BUDGET_DEFAULT)
		snprintf(budget_name, sizeof budget_name, "hsq_default_budget(n)");
	else if (B->budget == HSQ_BUDGET_ALL)
		snprintf(budget_name, sizeof budget_name, "all");
	else
		snprintf(budget_name, sizeof budget_name, "%d", B->budget);
	printf("\nKV bytes per step, from %s (%d decode steps; MB = 1e6 B):\n", log_path, B->decode);
	printf("  full    per layer 2 x n_held x %d KV heads x %d x %d B (%s, --kv-bytes), n_held = n + D/2 = n + %g "
	       "(or the sliding window)\n",
	       mi->n_head_kv, mi->head_dim, kv_bytes, kv_bytes == 2 ? "fp16" : "fp32", D / 2);
	printf("  quant   fast_bytes (L1 codes) + tail\n");
	printf("  hsq     fast_bytes (L1 + L2 codes) + tail + archive_bytes x (r + (1 - r) x min(1, budget / n)),\n"
	       "          r = %d of the %d global layers' KV heads are retrieval heads (%s; at most:\n"
	       "          only heads scoring above 0 are marked), budget = %s\n",
	       r_heads, global_heads,
	       B->retrieval == HSQ_RETRIEVAL_DEFAULT ? "the default, one in six" : "the log's --retrieval-heads",
	       budget_name);
	printf("  others  fast_bytes + tail\n");
	printf("  tail    fp16 tokens decoded since compression, mean over the steps: min(D, window %d) / 2 for quant "
	       "and hsq, D / 2 for others\n",
	       B->window);
	printf("  encoded sizes: the CPU attention of this build reads fp16 decoded copies of L1, L2 and the fetched\n"
	       "  groups, four times the bytes of their codes\n");
	printf("\n%8s %-9s %10s %9s %9s %8s %12s %15s %9s\n", "length", "method", "weights MB", "KV MB", "total MB",
	       "GFLOP", "limit tok/s", "measured tok/s", "achieved");
	for (int li = 0; li < B->n_len; li++) {
		const length_rec *L = &B->len[li];
		const double n = L->length;
		const method_rec *quant = find_method(L, "quant");
		for (int k = 0; k < L->n_methods; k++) {
			const method_rec *M = &L->m[k];
			double kv, n_att;
			int is_full = !strcmp(M->name, "full"), is_hsq = !strcmp(M->name, "hsq");
			int folds = is_hsq || !strcmp(M->name, "quant");
			double tail = (folds ? (D < B->window ? D : B->window) : D) / 2;
			if (is_full) {
				kv = full_kv_bytes(model, n + D / 2, kv_bytes);
				n_att = n + D / 2;
			} else if (is_hsq) {
				double budget = B->budget == HSQ_BUDGET_DEFAULT ? hsq_default_budget(L->length)
						: B->budget == HSQ_BUDGET_ALL	? n
										: B->budget;
				double share = budget <= 0 ? 0 : r + (1 - r) * (budget < n ? budget / n : 1);
				kv = M->fast_bytes + M->archive_bytes * share + tail * tail_bytes_per_token;
				n_att = B->l1_fraction * n + n / B->group_size + share * n + tail;
			} else {
				kv = M->fast_bytes + tail * tail_bytes_per_token;
				n_att = quant && quant->fast_bytes > 0 ? n * M->fast_bytes / quant->fast_bytes : n;
				n_att += tail;
			}
			double tot = wbytes + kv, lim = limit_gbs * 1e9 / tot;
			double gf = (2 * sc.params + attn_flops(model, n_att, n + D / 2)) / 1e9;
			printf("%8d %-9s %10.2f %9.2f %9.2f %8.3f %12.1f %15.1f %8.1f%%\n", L->length, M->name, wbytes / 1e6,
			       kv / 1e6, tot / 1e6, gf, lim, M->decode_tok_s, 100 * M->decode_tok_s / lim);
		}
	}
	printf("\nlimit tok/s = %.1f GB/s / total bytes; achieved = measured / limit. GFLOP: matmuls + attention over "
	       "the positions each method attends.\n",
	       limit_gbs);
	free(B);
	hsq_model_free(model);
	return 0;
}
