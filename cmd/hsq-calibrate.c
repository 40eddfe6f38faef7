/* hsq-calibrate - train the learned parts of the HSQ method for a model
 * on calibration text and write them to a calibration file
 * (hsq-calibration(5)) that hsq-prefill --calibration reads.
 *
 * Today that is the reader. Each text is cut into documents of a context
 * and a continuation; the model runs over both, and the label of a context
 * position for a KV head is the attention the continuation's queries pay
 * it (what a question asked later does), never the attention of the
 * context's own last queries, which the obs-attention reader uses. The
 * reader, a small network over the hidden state of an early layer, is
 * trained to predict those shares; every held-out document also measures
 * how much of the continuation's attention the tokens the reader would
 * flag into L1 capture, against the obs-attention reader's choice. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/atomic.h"
#include "common/cleanup.h"
#include "common/cli.h"
#include "common/json.h"
#include "common/progress.h"
#include "hsq_train.h"

static const char PROG[] = "hsq-calibrate";
static const char USAGE[] = "hsq-calibrate [-m MODEL] -o FILE.hsqc [options] TEXT...";
static const char DESCRIPTION[] =
	"Run the model over calibration text, train the learned reader of the HSQ method on\n"
	"what the queries after each context attend to, and write a calibration file\n"
	"(hsq-calibration(5)) atomically. Deterministic: the same texts, options and seed give\n"
	"the same file, whatever the number of threads.";

enum {
	OPT_LAYER = 256,
	OPT_HIDDEN,
	OPT_CONTEXT,
	OPT_CONTINUATION,
	OPT_MAX_DOCS,
	OPT_HOLDOUT,
	OPT_EPOCHS,
	OPT_BATCH,
	OPT_LR,
	OPT_SEED,
	OPT_JSON,
	OPT_PRIOR,
};

static const cli_option options[] = {
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", 'm' },
	{ "output", 'o', "FILE", "calibration file to write (required)", 'o' },
	{ "layer", 0, "N", "layer whose output the reader reads (default: a quarter of the layers, rounded down)", OPT_LAYER },
	{ "hidden", 0, "N", "width of the reader's hidden layer (default 64)", OPT_HIDDEN },
	{ "prior", 0, "NAME", "obs (default: the network corrects the obs-attention reader's guess) or none", OPT_PRIOR },
	{ "context", 0, "N", "tokens of context in a training document (default 1024)", OPT_CONTEXT },
	{ "continuation", 0, "N", "tokens after it whose queries give the labels (default 64)", OPT_CONTINUATION },
	{ "max-docs", 0, "N", "most documents cut from the texts, spread over them (default 128)", OPT_MAX_DOCS },
	{ "holdout", 0, "F", "share of the documents held out for validation, 0..0.5 (default 0.125)", OPT_HOLDOUT },
	{ "epochs", 0, "N", "passes over the training documents (default 40)", OPT_EPOCHS },
	{ "batch", 0, "N", "documents per AdamW step (default 4)", OPT_BATCH },
	{ "lr", 0, "X", "AdamW learning rate (default 0.001)", OPT_LR },
	{ "seed", 0, "S", "seed of the initial weights and the order of the documents (default 1)", OPT_SEED },
	{ "threads", 't', "N", "CPU threads (default: all cores); the file does not depend on it", 't' },
	{ "json", 0, "FILE", "write the training curves and final metrics as JSON to FILE", OPT_JSON },
	{ "quiet", 'q', NULL, "no progress on standard error", 'q' },
	{ 0 },
};

typedef struct calib_options {
	int layer, hidden, context, continuation, max_docs, epochs, batch, threads;
	int prior_obs; /* 1: the scores add ln of the obs-attention reader's share */
	double holdout, lr;
	long seed;
} calib_options;

/* One text given on the command line. */
typedef struct text {
	const char *path;
	size_t bytes;
	uint8_t sha256[32];
	hsq_token *tokens;
	size_t n_tokens;
} text;

/* One document: its rows and labels (hsq_reader_doc), and the
 * obs-attention reader's mass for the held-out comparison. */
typedef struct doc {
	int text, start;    /* cut from texts[text] at token start */
	int validation;     /* 1: held out */
	float *in;          /* [n][n_in] */
	float *target;      /* [n_out][n] */
	float *obs_mass;    /* [n_out][n] what the context's last 32 queries paid */
	float *prior;       /* [n_out][n] ln(obs share + 1e-6), or NULL */
	uint8_t *cand;      /* [n] */
	uint8_t *head_on;   /* [n_out] */
} doc;

#define OBS_QUERIES 32 /* the obs-attention reader's default window */
#define QUERY_CHUNK 64 /* HSQ_OBS_MAX: queries a context keeps */

static void hex(const uint8_t *b, int n, char *out)
{
	for (int i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* The documents: every text cut into non-overlapping windows of context +
 * continuation tokens; at most max_docs of them, spread evenly over all;
 * every k-th held out. */
static doc *cut_documents(const text *texts, int n_texts, const calib_options *o, int *n_docs)
{
	size_t len = (size_t)o->context + (size_t)o->continuation, total = 0;
	for (int i = 0; i < n_texts; i++)
		total += texts[i].n_tokens / len;
	if (total == 0)
		cli_die(PROG, EXIT_INPUT,
			"the texts hold no document of %zu tokens (--context %d + --continuation %d); give longer texts or lower --context",
			len, o->context, o->continuation);
	int n = total < (size_t)o->max_docs ? (int)total : o->max_docs;
	doc *d = calloc((size_t)n, sizeof *d);
	if (!d)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	int every = o->holdout > 0 ? (int)lround(1.0 / o->holdout) : 0;
	for (int k = 0; k < n; k++) {
		size_t want = (size_t)((double)k * (double)total / n), seen = 0;
		for (int i = 0; i < n_texts; i++) {
			size_t here = texts[i].n_tokens / len;
			if (want < seen + here) {
				d[k].text = i;
				d[k].start = (int)((want - seen) * len);
				break;
			}
			seen += here;
		}
		d[k].validation = every && k % every == every - 1;
	}
	*n_docs = n;
	return d;
}

/* Runs the model over one document and fills its rows and labels. */
static void collect(const hsq_model *model, const text *t, doc *d, const calib_options *o, float *hidden,
		    float *mass)
{
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	int C = o->context, E = mi.n_embd, n_in = E + HSQ_READER_POS_FEATURES, n_out = mi.n_layer * mi.n_head_kv;
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = o->context + o->continuation;
	cp.n_threads = o->threads;
	hsq_context *ctx;
	hsq_status st;
	const hsq_token *tok = t->tokens + d->start;
	if ((st = hsq_context_new(model, &cp, &ctx)) || (st = hsq_context_keep_hidden(ctx, o->layer)) ||
	    (st = hsq_context_eval(ctx, tok, (size_t)C, NULL, 0)) || (st = hsq_context_hidden(ctx, 0, C, hidden)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	d->in = malloc((size_t)C * n_in * sizeof *d->in);
	d->target = calloc((size_t)n_out * C, sizeof *d->target);
	d->obs_mass = malloc((size_t)n_out * C * sizeof *d->obs_mass);
	d->cand = malloc((size_t)C);
	d->head_on = malloc((size_t)n_out);
	if (!d->in || !d->target || !d->obs_mass || !d->cand || !d->head_on)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory collecting document %d of %s", d->start, t->path);
	for (int p = 0; p < C; p++)
		hsq_reader_features(hidden + (size_t)p * E, E, p, C, d->in + (size_t)p * n_in);
	if ((st = hsq_context_attention_mass(ctx, C - OBS_QUERIES, OBS_QUERIES, C, d->obs_mass)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	for (int q = 0; q < o->continuation; q += QUERY_CHUNK) {
		int nq = o->continuation - q < QUERY_CHUNK ? o->continuation - q : QUERY_CHUNK;
		if ((st = hsq_context_eval(ctx, tok + C + q, (size_t)nq, NULL, 0)) ||
		    (st = hsq_context_attention_mass(ctx, C + q, nq, C, mass)))
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		for (size_t i = 0; i < (size_t)n_out * C; i++)
			d->target[i] += mass[i];
	}
	hsq_context_free(ctx);
	/* candidates: what the reader chooses among (hsq_tier_default_params:
	 * the sinks and the recent window are in L1 whatever it says) */
	hsq_tier_params tp = hsq_tier_default_params();
	for (int p = 0; p < C; p++)
		d->cand[p] = p >= tp.sinks && p < C - tp.window;
	if (o->prior_obs) {
		if (!(d->prior = malloc((size_t)n_out * C * sizeof *d->prior)))
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		hsq_reader_obs_prior(d->obs_mass, C, n_out, tp.sinks, C - tp.window, d->prior);
	}
	for (int j = 0; j < n_out; j++) {
		float *row = d->target + (size_t)j * C;
		double sum = 0;
		for (int p = 0; p < C; p++)
			sum += d->cand[p] ? row[p] : 0.0;
		d->head_on[j] = hsq_model_layer_window(model, j / mi.n_head_kv) == 0 && sum > 0;
		for (int p = 0; p < C; p++)
			row[p] = d->cand[p] && sum > 0 ? (float)(row[p] / sum) : 0.0f;
	}
}

static hsq_reader_doc as_reader_doc(const doc *d, int C)
{
	return (hsq_reader_doc){
		.n = C, .in = d->in, .target = d->target, .cand = d->cand, .head_on = d->head_on, .prior = d->prior
	};
}

/* Share of the label mass on the k candidates with the highest key. */
typedef struct ranked {
	float key;
	int p;
} ranked;

static int by_key_desc(const void *a, const void *b)
{
	const ranked *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return (x->p > y->p) - (x->p < y->p);
}

static double captured(const float *key, size_t key_stride, const float *target, const uint8_t *cand, int C, int k,
		       ranked *tmp)
{
	int m = 0;
	for (int p = 0; p < C; p++)
		if (cand[p])
			tmp[m++] = (ranked){ key[(size_t)p * key_stride], p };
	qsort(tmp, (size_t)m, sizeof *tmp, by_key_desc);
	double s = 0;
	for (int i = 0; i < k && i < m; i++)
		s += target[tmp[i].p];
	return s;
}

/* The held-out comparison: mean over documents and trained heads of the
 * continuation's attention captured by the l1_fraction of candidates the
 * reader flags (the learned scores, or the obs-attention mass). */
static void flagged_capture(const hsq_reader_trainer *tr, const doc *docs, int n_docs, int C, int n_out, double *learned,
		   double *obs, int *pairs)
{
	float *scores = malloc((size_t)C * n_out * sizeof *scores);
	ranked *tmp = malloc((size_t)C * sizeof *tmp);
	if (!scores || !tmp)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	double sl = 0, so = 0;
	int n = 0;
	float l1_fraction = hsq_tier_default_params().l1_fraction;
	for (int i = 0; i < n_docs; i++) {
		const doc *d = &docs[i];
		if (!d->validation)
			continue;
		hsq_reader_doc rd = as_reader_doc(d, C);
		hsq_status st = hsq_reader_trainer_scores(tr, &rd, scores);
		if (st)
			cli_die_status(PROG, EXIT_FAILURE_RUNTIME, st);
		if (d->prior) /* the reader's guess: the network's scores on top of the prior */
			for (int p = 0; p < C; p++)
				for (int j = 0; j < n_out; j++)
					scores[(size_t)p * n_out + j] += d->prior[(size_t)j * C + p];
		int n_cand = 0;
		for (int p = 0; p < C; p++)
			n_cand += d->cand[p];
		int k = (int)(l1_fraction * n_cand);
		k = k > 0 ? k : 1;
		for (int j = 0; j < n_out; j++) {
			if (!d->head_on[j])
				continue;
			const float *target = d->target + (size_t)j * C;
			sl += captured(scores + j, (size_t)n_out, target, d->cand, C, k, tmp);
			so += captured(d->obs_mass + (size_t)j * C, 1, target, d->cand, C, k, tmp);
			n++;
		}
	}
	*learned = n ? sl / n : NAN;
	*obs = n ? so / n : NAN;
	*pairs = n;
	free(scores);
	free(tmp);
}

/* A deterministic shuffle of the training documents for one epoch. */
static uint64_t next_random(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double peak_rss_mib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) ? NAN : ru.ru_maxrss / 1024.0;
}

typedef struct epoch_log {
	double train, validation, seconds;
} epoch_log;

int main(int argc, char **argv)
{
	const char *model_arg = NULL, *out_path = NULL, *json_path = NULL;
	int quiet = 0;
	calib_options o = { .layer = -1, .hidden = 64, .prior_obs = 1, .context = 1024, .continuation = 64, .max_docs = 128,
			    .epochs = 40, .batch = 4, .threads = 0, .holdout = 0.125, .lr = 1e-3, .seed = 1 };
	cli_stdout_checked();
	cli_parser p;
	cli_init(&p, PROG, options);
	for (int c; (c = cli_next(&p, argc, argv, USAGE, DESCRIPTION)) != -1;) {
		switch (c) {
		case 'm': model_arg = optarg; break;
		case 'o': out_path = optarg; break;
		case OPT_LAYER: o.layer = (int)cli_long(PROG, "--layer", optarg, 0, 4096); break;
		case OPT_HIDDEN: o.hidden = (int)cli_long(PROG, "--hidden", optarg, 1, 4096); break;
		case OPT_CONTEXT: o.context = (int)cli_long(PROG, "--context", optarg, 1, 1 << 20); break;
		case OPT_CONTINUATION: o.continuation = (int)cli_long(PROG, "--continuation", optarg, 1, 4096); break;
		case OPT_MAX_DOCS: o.max_docs = (int)cli_long(PROG, "--max-docs", optarg, 2, 1 << 20); break;
		case OPT_HOLDOUT: o.holdout = cli_double(PROG, "--holdout", optarg, 0, 0.5); break;
		case OPT_EPOCHS: o.epochs = (int)cli_long(PROG, "--epochs", optarg, 1, 100000); break;
		case OPT_BATCH: o.batch = (int)cli_long(PROG, "--batch", optarg, 1, 1 << 20); break;
		case OPT_LR: o.lr = cli_double(PROG, "--lr", optarg, 1e-8, 1); break;
		case OPT_SEED: o.seed = cli_long(PROG, "--seed", optarg, 0, 0x7fffffffffffffffL); break;
		case 't': o.threads = (int)cli_long(PROG, "-t", optarg, 1, 256); break;
		case OPT_JSON: json_path = optarg; break;
		case OPT_PRIOR:
			if (!strcmp(optarg, "obs") || !strcmp(optarg, "none"))
				o.prior_obs = !strcmp(optarg, "obs");
			else
				cli_usage_error(PROG, "--prior '%s' is unknown; use obs or none", optarg);
			break;
		case 'q': quiet = 1; break;
		default: break;
		}
	}
	cli_free(&p);
	int n_texts = argc - optind;
	if (!out_path)
		cli_usage_error(PROG, "no output file: pass -o FILE.hsqc");
	if (n_texts < 1)
		cli_usage_error(PROG, "no calibration text: name one or more text files after the options");
	cli_check_output(PROG, "-o", out_path, EXIT_FAILURE_RUNTIME);
	atomic_file json_out = { 0 };
	if (json_path) {
		cli_check_output(PROG, "--json", json_path, EXIT_FAILURE_RUNTIME);
		int e = atomic_open(&json_out, json_path);
		if (e)
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write --json %s: %s", json_path, strerror(e));
	}
	double t_start = cli_now();

	char path_buf[4096];
	hsq_model *model = cli_load_model(PROG, cli_model_path(PROG, model_arg, path_buf, sizeof path_buf));
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	if (o.layer < 0)
		o.layer = mi.n_layer / 4;
	if (o.layer >= mi.n_layer)
		cli_usage_error(PROG, "--layer %d is out of range; the model has layers 0..%d", o.layer, mi.n_layer - 1);
	hsq_tier_params tp = hsq_tier_default_params();
	if (o.context < 2 * (tp.sinks + tp.window))
		cli_usage_error(PROG, "--context %d leaves too few positions to choose among; use at least %d", o.context,
				2 * (tp.sinks + tp.window));
	if (o.context + o.continuation > mi.n_ctx_train)
		cli_usage_error(PROG, "--context %d + --continuation %d is longer than the model's context of %d tokens",
				o.context, o.continuation, mi.n_ctx_train);

	/* the texts */
	text *texts = calloc((size_t)n_texts, sizeof *texts);
	if (!texts)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int i = 0; i < n_texts; i++) {
		text *t = &texts[i];
		t->path = argv[optind + i];
		char *s = cli_read_all(PROG, t->path, &t->bytes);
		if (strlen(s) != t->bytes)
			cli_die(PROG, EXIT_INPUT, "%s contains a NUL byte at offset %zu; is it text?", t->path, strlen(s));
		hsq_sha256(s, t->bytes, t->sha256);
		hsq_status st = hsq_tokenize(model, s, t->bytes, -1, 0, &t->tokens, &t->n_tokens);
		if (st)
			cli_die_status(PROG, cli_exit_for(st, EXIT_INPUT), st);
		free(s);
	}
	int n_docs, C = o.context, n_out = mi.n_layer * mi.n_head_kv, n_val = 0, n_train;
	doc *docs = cut_documents(texts, n_texts, &o, &n_docs);
	for (int i = 0; i < n_docs; i++)
		n_val += docs[i].validation;
	n_train = n_docs - n_val;
	if (n_train < 1)
		cli_die(PROG, EXIT_INPUT, "all %d documents are held out; give more text or lower --holdout", n_docs);

	/* collection */
	float *hidden = malloc((size_t)C * mi.n_embd * sizeof *hidden);
	float *mass = malloc((size_t)n_out * C * sizeof *mass);
	if (!hidden || !mass)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	if (!quiet)
		fprintf(stderr, "%s: %d documents of %d + %d tokens from %d text%s (%d held out); reading layer %d\n", PROG,
			n_docs, o.context, o.continuation, n_texts, n_texts == 1 ? "" : "s", n_val, o.layer);
	progress bar;
	progress_start(&bar, PROG, "documents", (size_t)n_docs, quiet);
	double t0 = cli_now();
	for (int i = 0; i < n_docs; i++) {
		collect(model, &texts[docs[i].text], &docs[i], &o, hidden, mass);
		progress_update(&bar, (size_t)i + 1);
	}
	progress_end(&bar);
	double t_collect = cli_now() - t0;
	free(hidden);
	free(mass);
	if (!quiet)
		fprintf(stderr, "%s: collected in %.1f s\n", PROG, t_collect);

	/* training */
	hsq_reader_doc *train = malloc((size_t)n_train * sizeof *train), *val = malloc((size_t)(n_val + 1) * sizeof *val);
	int *order = malloc((size_t)n_train * sizeof *order);
	epoch_log *curve = calloc((size_t)o.epochs, sizeof *curve);
	if (!train || !val || !order || !curve)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int i = 0, a = 0, b = 0; i < n_docs; i++) {
		if (docs[i].validation)
			val[b++] = as_reader_doc(&docs[i], C);
		else
			train[a++] = as_reader_doc(&docs[i], C);
	}
	hsq_adamw_params opt = hsq_adamw_default_params();
	opt.lr = (float)o.lr;
	hsq_reader_trainer *tr;
	hsq_status st;
	if ((st = hsq_reader_trainer_new(&mi, o.layer, o.hidden, (uint64_t)o.seed, &opt, &tr)) ||
	    (st = hsq_reader_trainer_set_prior(tr, o.prior_obs)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	hsq_reader_doc *batch = malloc((size_t)o.batch * sizeof *batch);
	if (!batch)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	uint64_t rng = (uint64_t)o.seed ^ 0x6873712d63616cULL;
	double t_train = cli_now(), best = INFINITY;
	int best_epoch = o.epochs;
	for (int e = 0; e < o.epochs; e++) {
		for (int i = 0; i < n_train; i++)
			order[i] = i;
		for (int i = n_train - 1; i > 0; i--) {
			int j = (int)(next_random(&rng) % (uint64_t)(i + 1)), tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		double sum = 0;
		int steps = 0;
		for (int i = 0; i < n_train; i += o.batch) {
			int m = n_train - i < o.batch ? n_train - i : o.batch;
			for (int k = 0; k < m; k++)
				batch[k] = train[order[i + k]];
			double loss;
			if ((st = hsq_reader_trainer_step(tr, batch, m, o.threads, &loss)))
				cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
			sum += loss;
			steps++;
		}
		curve[e].train = sum / steps;
		curve[e].validation = NAN;
		if (n_val && (st = hsq_reader_trainer_loss(tr, val, n_val, o.threads, &curve[e].validation)))
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		curve[e].seconds = cli_now() - t_train;
		/* the weights of the epoch with the lowest held-out loss are the
		 * ones written: later epochs fit the training documents better
		 * and the held-out ones worse */
		if (n_val && curve[e].validation < best) {
			best = curve[e].validation;
			best_epoch = e + 1;
			if ((st = hsq_reader_trainer_keep(tr)))
				cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		}
		if (!quiet) {
			double left = curve[e].seconds / (e + 1) * (o.epochs - e - 1);
			fprintf(stderr, "%s: epoch %d/%d: train loss %.5f, validation loss %.5f, %.0f s left\n", PROG, e + 1,
				o.epochs, curve[e].train, curve[e].validation, left);
		}
	}
	double t_trained = cli_now() - t_train;
	if (n_val && (st = hsq_reader_trainer_restore(tr)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	const epoch_log *fin = &curve[best_epoch - 1];
	double cap_learned = NAN, cap_obs = NAN;
	int pairs = 0;
	flagged_capture(tr, docs, n_docs, C, n_out, &cap_learned, &cap_obs, &pairs);

	/* the loss the obs-attention reader's guess would have (its mass as a
	 * distribution over the candidates), on the held-out documents */
	double obs_loss = 0;
	int obs_n = 0;
	for (int i = 0; i < n_docs; i++) {
		const doc *d = &docs[i];
		if (!d->validation)
			continue;
		for (int j = 0; j < n_out; j++) {
			if (!d->head_on[j])
				continue;
			const float *om = d->obs_mass + (size_t)j * C, *tg = d->target + (size_t)j * C;
			double z = 0, ce = 0;
			for (int q = 0; q < C; q++)
				z += d->cand[q] ? om[q] + 1e-9 : 0;
			for (int q = 0; q < C; q++)
				if (d->cand[q] && tg[q] > 0)
					ce -= tg[q] * log((om[q] + 1e-9) / z);
			obs_loss += ce;
			obs_n++;
		}
	}
	obs_loss = obs_n ? obs_loss / obs_n : NAN;

	/* the file: nothing in it depends on the threads or the clock */
	sbuf info = { 0 };
	char h[65];
	hex(mi.identity, 32, h);
	sb_printf(&info, "created_by: hsq-calibrate %s\n", hsq_version());
	sb_printf(&info, "model: %s (%s), identity %s\n", mi.name[0] ? mi.name : "unnamed", mi.architecture, h);
	for (int i = 0; i < n_texts; i++) {
		hex(texts[i].sha256, 32, h);
		sb_printf(&info, "text: %s sha256 %s, %zu bytes, %zu tokens\n", base_name(texts[i].path), h, texts[i].bytes,
			  texts[i].n_tokens);
	}
	sb_printf(&info,
		  "options: --layer %d --hidden %d --prior %s --context %d --continuation %d --max-docs %d --holdout %g --epochs %d --batch %d --lr %g --seed %ld\n",
		  o.layer, o.hidden, o.prior_obs ? "obs" : "none", o.context, o.continuation, o.max_docs, o.holdout, o.epochs,
		  o.batch, o.lr, o.seed);
	sb_printf(&info, "documents: %d for training, %d held out\n", n_train, n_val);
	sb_printf(&info, "reader: %d trained numbers; labels: the attention of %d continuation queries\n",
		  hsq_reader_trainer_n_params(tr), o.continuation);
	if (n_val)
		sb_printf(&info, "epoch: %d of %d (the lowest held-out loss)\n", best_epoch, o.epochs);
	sb_printf(&info, "loss.train: %.6f\n", fin->train);
	if (n_val) {
		sb_printf(&info, "loss.validation: %.6f (obs-attention's mass as the guess: %.6f)\n",
			  fin->validation, obs_loss);
		sb_printf(&info,
			  "captured.validation: %.4f learned, %.4f obs-attention (the continuation's attention on the %g of candidates each flags, mean over %d document heads)\n",
			  cap_learned, cap_obs, (double)tp.l1_fraction, pairs);
	}
	cleanup_add_snapshot(out_path);
	if ((st = hsq_calibration_write(out_path, model, tr, info.s)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	double t_total = cli_now() - t_start;
	if (!quiet) {
		fprintf(stderr, "%s: trained in %.1f s, keeping epoch %d; ", PROG, t_trained, best_epoch);
		if (n_val)
			fprintf(stderr,
				"held out: loss %.4f (obs-attention %.4f), attention captured by the flagged tokens %.4f (obs-attention %.4f); ",
				fin->validation, obs_loss, cap_learned, cap_obs);
		fprintf(stderr, "wrote %s in %.1f s in all, peak memory %.0f MiB\n", out_path, t_total, peak_rss_mib());
	}

	if (json_path) {
		FILE *f = json_out.f;
		fprintf(f, "{\"tool\":\"hsq-calibrate\",\"version\":");
		json_fstr(f, hsq_version(), JSON_ESC_UNICODE);
		fprintf(f, ",\"output\":");
		json_fstr(f, out_path, JSON_ESC_UNICODE);
		fprintf(f, ",\"model\":");
		json_fstr(f, mi.name, JSON_ESC_UNICODE);
		fprintf(f, ",\"texts\":[");
		for (int i = 0; i < n_texts; i++) {
			hex(texts[i].sha256, 32, h);
			fprintf(f, "%s{\"path\":", i ? "," : "");
			json_fstr(f, texts[i].path, JSON_ESC_UNICODE);
			fprintf(f, ",\"sha256\":\"%s\",\"bytes\":%zu,\"tokens\":%zu}", h, texts[i].bytes, texts[i].n_tokens);
		}
		fprintf(f,
			"],\"config\":{\"layer\":%d,\"hidden\":%d,\"prior\":\"%s\",\"context\":%d,\"continuation\":%d,\"max_docs\":%d,\"holdout\":%g,\"epochs\":%d,\"batch\":%d,\"lr\":%g,\"seed\":%ld,\"threads\":%d}",
			o.layer, o.hidden, o.prior_obs ? "obs" : "none", o.context, o.continuation, o.max_docs, o.holdout,
			o.epochs, o.batch, o.lr, o.seed, o.threads);
		fprintf(f, ",\"documents\":{\"train\":%d,\"validation\":%d},\"params\":%d,\"curve\":[", n_train, n_val,
			hsq_reader_trainer_n_params(tr));
		for (int e = 0; e < o.epochs; e++) {
			fprintf(f, "%s{\"epoch\":%d,\"train_loss\":", e ? "," : "", e + 1);
			json_fnum6(f, curve[e].train);
			fprintf(f, ",\"validation_loss\":");
			json_fnum6(f, curve[e].validation);
			fprintf(f, ",\"seconds\":");
			json_fnum6(f, curve[e].seconds);
			fprintf(f, "}");
		}
		fprintf(f, "],\"final\":{\"epoch\":%d,\"train_loss\":", best_epoch);
		json_fnum6(f, fin->train);
		fprintf(f, ",\"validation_loss\":");
		json_fnum6(f, fin->validation);
		fprintf(f, ",\"validation_loss_obs_attention\":");
		json_fnum6(f, obs_loss);
		fprintf(f, ",\"captured_learned\":");
		json_fnum6(f, cap_learned);
		fprintf(f, ",\"captured_obs_attention\":");
		json_fnum6(f, cap_obs);
		fprintf(f, ",\"captured_pairs\":%d},\"time\":{\"collect_s\":", pairs);
		json_fnum6(f, t_collect);
		fprintf(f, ",\"train_s\":");
		json_fnum6(f, t_trained);
		fprintf(f, ",\"total_s\":");
		json_fnum6(f, t_total);
		fprintf(f, "},\"peak_rss_mib\":");
		json_fnum6(f, peak_rss_mib());
		fprintf(f, "}\n");
		int e = atomic_commit(&json_out, 1);
		if (e)
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write --json %s: %s", json_path, strerror(e));
	}

	for (int i = 0; i < n_docs; i++) {
		free(docs[i].in);
		free(docs[i].target);
		free(docs[i].obs_mass);
		free(docs[i].prior);
		free(docs[i].cand);
		free(docs[i].head_on);
	}
	for (int i = 0; i < n_texts; i++)
		hsq_free(texts[i].tokens);
	free(texts);
	free(docs);
	free(train);
	free(val);
	free(order);
	free(curve);
	free(batch);
	sb_free(&info);
	hsq_reader_trainer_free(tr);
	hsq_model_free(model);
	return EXIT_OK;
}
