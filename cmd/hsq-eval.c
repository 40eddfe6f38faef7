/* hsq-eval - evaluation tools for hsq: a dispatcher over subcommands, each
 * run by one driver (cmd/eval/driver.c). `codecs` runs the controlled KV
 * codec study; `needle`, `ppl`, `agree` and `bench` run a model with each
 * KV method on the same tokens. */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "eval/driver.h"

static const char PROG[] = "hsq-eval";

static const eval_sub *const subcommands[] = { &eval_codecs, &eval_needle, &eval_ppl, &eval_agree, &eval_bench };
#define N_SUBCOMMANDS (sizeof subcommands / sizeof *subcommands)

static void main_help(FILE *out)
{
	fprintf(out, "usage: hsq-eval SUBCOMMAND [options]\n"
		     "       hsq-eval SUBCOMMAND --help\n"
		     "Evaluate hsq's components.\n\nsubcommands:\n");
	for (size_t i = 0; i < N_SUBCOMMANDS; i++)
		fprintf(out, "  %-10s %s\n", subcommands[i]->name, subcommands[i]->summary);
	fprintf(out, "\noptions:\n  -h, --help    show this help and exit\n"
		     "  --version     print the version and exit\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		cli_usage_error(PROG, "missing subcommand (codecs, needle, ppl, agree or bench)");
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
		main_help(stdout);
		return EXIT_OK;
	}
	if (!strcmp(name, "--version")) {
		printf("%s %s\n", PROG, hsq_version());
		return EXIT_OK;
	}
	for (size_t i = 0; i < N_SUBCOMMANDS; i++)
		if (!strcmp(name, subcommands[i]->name))
			return eval_drive(subcommands[i], argc - 1, argv + 1);
	if (name[0] == '-')
		cli_usage_error(PROG, "option '%s' before the subcommand; options follow it", name);
	cli_usage_error(PROG, "unknown subcommand '%s' (codecs, needle, ppl, agree or bench)", name);
}
