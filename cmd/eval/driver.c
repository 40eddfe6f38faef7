/* driver.c - runs any subcommand of hsq-eval: options, the model, the
 * output files, the trial log (fresh, resumed or only read), the items in
 * --jobs processes, and the summary (table, files, report). */
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "jobs.h"

static size_t count_options(const cli_option *o)
{
	size_t n = 0;
	while (o[n].long_name)
		n++;
	return n;
}

/* The subcommand's table, then --jobs and the common options of a model
 * run: what --help lists, in that order. Static, so that it is still
 * reachable when --help exits from inside the parser. */
static cli_option *option_table(const eval_sub *s, const eval_common *c)
{
	static cli_option *all;
	size_t own = count_options(s->options), common = c ? count_options(eval_common_options) : 0, n = 0;
	all = calloc(own + 1 + common + 1, sizeof *all);
	if (!all)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	memcpy(all, s->options, own * sizeof *all);
	n = own;
	if (c && s->jobs)
		all[n++] = eval_jobs_option;
	memcpy(all + n, eval_common_options, common * sizeof *all);
	return all;
}

static void parse(const eval_sub *s, eval_common *c, int argc, char **argv)
{
	cli_parser p;
	cli_option *table = option_table(s, c);
	cli_init(&p, EVAL_PROG, table);
	for (int id; (id = cli_next(&p, argc, argv, s->usage, s->description)) != -1;)
		if (!s->option(id, optarg) && !(c && eval_common_option(c, id, optarg)))
			cli_usage_error(EVAL_PROG, "unhandled option"); /* table and switch disagree: a bug */
	cli_free(&p);
	free(table);
	s->args(argc - optind, argv + optind);
	if (c)
		eval_common_finish(c);
}

static int outputs_of(const eval_sub *s, const eval_common *c, eval_output *out)
{
	if (s->outputs)
		return s->outputs(out);
	out[0] = (eval_output){ c->json_path, s->write_json, "--json" };
	out[1] = (eval_output){ c->csv_path, s->write_csv, "--csv" };
	return 2;
}

/* Runs the pending items: all of them here, or (--jobs) each worker its
 * share while this process waits and reads the log back. */
static void run_items(const eval_sub *s, const eval_common *c, eval_runner *R, eval_log *L)
{
	int job = !c ? 0 : c->summarize ? -1 : eval_jobs_fork(c, R, L); /* -1: nothing to run here */
	if (job < 0)
		return;
	const int jobs = c ? c->jobs : 1;
	const size_t n = s->count ? s->count() : 1;
	size_t rank = 0;
	for (size_t i = 0; i < n; i++)
		if ((!s->pending || s->pending(i)) && rank++ % (size_t)jobs == (size_t)job)
			s->run(c ? L : NULL, i);
	if (c)
		eval_jobs_done(c, R, L);
}

int eval_drive(const eval_sub *s, int argc, char **argv)
{
	static eval_runner R;
	eval_runner *r = NULL;
	eval_common *c = s->init();
	parse(s, c, argc, argv);

	/* Every output checked before the model is loaded and the work done:
	 * a bad path fails at once, not after minutes of trials. */
	eval_output out[EVAL_MAX_OUTPUTS];
	const int n_out = outputs_of(s, c, out);
	for (int i = 0; i < n_out; i++)
		if (out[i].path)
			cli_check_output(EVAL_PROG, out[i].opt, out[i].path, EXIT_FAILURE_RUNTIME);
	if (c && c->report_dir)
		cli_check_output_dir(EVAL_PROG, "--report", c->report_dir, EXIT_FAILURE_RUNTIME);
	if (c)
		eval_log_check(c);

	if (c) {
		eval_runner_init(&R, c);
		r = &R;
	}
	char *config = s->setup(r);

	eval_file files[EVAL_MAX_OUTPUTS];
	for (int i = 0; i < n_out; i++)
		eval_file_open(&files[i], out[i].path);
	if (c && c->report_dir)
		eval_report_dir(c->report_dir);

	eval_log L;
	if (c) {
		eval_log_open(&L, c, config, s->check, s->check_user);
		s->resumed(&L);
	}
	run_items(s, c, r, &L);

	s->summarize(c ? &L : NULL);
	if (!s->table_last)
		s->print();
	for (int i = 0; i < n_out; i++)
		if (files[i].f)
			out[i].write(files[i].f);
	for (int i = 0; i < n_out; i++)
		eval_file_commit(&files[i]);
	if (s->table_last)
		s->print();
	if (c && c->report_dir)
		s->report(c->report_dir);
	eval_flush_stdout();
	if (c)
		eval_log_close(&L);
	s->done();
	free(config);
	if (r)
		eval_runner_free(r);
	return EXIT_OK;
}
