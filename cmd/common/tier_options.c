/* tier_options.c - the options of the KV tiers, read once for every tool. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tier_options.h"

void tier_options_init(tier_options *t)
{
	memset(t, 0, sizeof *t);
	t->params = hsq_tier_default_params();
	t->budget = HSQ_BUDGET_DEFAULT;
	t->retrieval_heads = HSQ_RETRIEVAL_DEFAULT;
}

int tier_parse_budget(const char *prog, const char *value)
{
	if (!strcmp(value, "all"))
		return HSQ_BUDGET_ALL;
	if (!strcmp(value, "default"))
		return HSQ_BUDGET_DEFAULT;
	return (int)cli_long(prog, "--budget", value, 0, 1 << 24);
}

const char *tier_budget_name(int budget, char *buf, size_t cap)
{
	if (budget == HSQ_BUDGET_DEFAULT)
		return "default";
	if (budget == HSQ_BUDGET_ALL)
		return "all";
	snprintf(buf, cap, "%d", budget);
	return buf;
}

/* --residual-heads: 'default', 'all' or a head count. */
static int residual_heads(const char *prog, const char *value)
{
	if (!strcmp(value, "default"))
		return HSQ_RESIDUAL_DEFAULT;
	if (!strcmp(value, "all"))
		return HSQ_RESIDUAL_ALL;
	return (int)cli_long(prog, "--residual-heads", value, 0, 1 << 20);
}

/* --key-rounding: 'query' or 'nearest'. */
static hsq_key_rounding key_rounding(const char *prog, const char *value)
{
	if (!strcmp(value, "query"))
		return HSQ_KEY_ROUNDING_QUERY;
	if (!strcmp(value, "nearest"))
		return HSQ_KEY_ROUNDING_NEAREST;
	cli_usage_error(prog, "--key-rounding '%s' is unknown; use query or nearest", value);
}

/* A compression option into p; 0 for another id. */
static int compression_option(hsq_tier_params *p, const char *prog, int id, const char *value)
{
	switch (id) {
	case TIER_OPT_SINKS: p->sinks = (int)cli_long(prog, "--sinks", value, 0, 1 << 20); return 1;
	case TIER_OPT_WINDOW: p->window = (int)cli_long(prog, "--window", value, 1, 1 << 20); return 1;
	case TIER_OPT_L1_FRACTION: p->l1_fraction = (float)cli_double(prog, "--l1-fraction", value, 0, 1); return 1;
	case TIER_OPT_GROUP_SIZE:
		p->group_size = (int)cli_long(prog, "--group-size", value, 8, 16);
		if (p->group_size != 8 && p->group_size != 16)
			cli_usage_error(prog, "--group-size %s is not supported; use 8 or 16", value);
		return 1;
	case TIER_OPT_MEDIUM_FRACTION:
		p->medium_fraction = (float)cli_double(prog, "--medium-fraction", value, 0, 1);
		return 1;
	case TIER_OPT_OBS_WINDOW: p->obs_window = (int)cli_long(prog, "--obs-window", value, 1, HSQ_OBS_MAX); return 1;
	case TIER_OPT_READER:
		if (!strcmp(value, "obs-attention"))
			p->reader = HSQ_READER_OBS_ATTENTION;
		else if (!strcmp(value, "key-norm"))
			p->reader = HSQ_READER_KEY_NORM;
		else if (!strcmp(value, "learned"))
			p->reader = HSQ_READER_LEARNED;
		else
			cli_usage_error(prog, "--reader '%s' is unknown; use obs-attention, key-norm or learned", value);
		return 1;
	case TIER_OPT_COMPRESSOR:
		if (!strcmp(value, "mean"))
			p->compressor = HSQ_COMPRESSOR_MEAN;
		else if (!strcmp(value, "obs-weighted"))
			p->compressor = HSQ_COMPRESSOR_OBS_WEIGHTED;
		else
			cli_usage_error(prog, "--compressor '%s' is unknown; use obs-weighted or mean", value);
		return 1;
	case TIER_OPT_KEEP: p->keep = (int)cli_long(prog, "--keep", value, 1, 1 << 24); return 1;
	case TIER_OPT_RESIDUAL_HEADS: p->residual_heads = residual_heads(prog, value); return 1;
	case TIER_OPT_KEY_ROUNDING: p->key_rounding = key_rounding(prog, value); return 1;
	case TIER_OPT_SEED:
		p->seed = (uint64_t)cli_long(prog, "--seed", value, 0, 0x7fffffffffffffffL);
		return 1;
	default: return 0;
	}
}

int tier_option(tier_options *t, const char *prog, int id, const char *value)
{
	switch (id) {
	case TIER_OPT_BUDGET:
		t->budget = tier_parse_budget(prog, value);
		t->budget_given = 1;
		return 1;
	case TIER_OPT_RETRIEVAL_HEADS:
		t->retrieval_heads = !strcmp(value, "default") ? HSQ_RETRIEVAL_DEFAULT
							       : (int)cli_long(prog, "--retrieval-heads", value, 0, 1 << 20);
		t->retrieval_given = 1;
		return 1;
	default:
		if (!compression_option(&t->params, prog, id, value))
			return 0;
		t->n_params++;
		t->reader_given |= id == TIER_OPT_READER;
		return 1;
	}
}
