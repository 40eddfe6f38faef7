/* tier_options.h - the options of the KV tiers, declared once for every
 * tool: how a context is compressed (hsq-prefill; hsq-eval's
 * --residual-heads and --key-rounding) and how an hsq context routes its
 * decoding (hsq-decode and hsq-eval: --budget, --retrieval-heads). Each
 * is an entry for an option table, so that a tool lists the ones it takes
 * where its --help shows them, with the same help text in every tool; one
 * parser reads them all. */
#ifndef HSQ_CMD_TIER_OPTIONS_H
#define HSQ_CMD_TIER_OPTIONS_H

#include <stddef.h>

#include "hsq.h"

/* Option ids (cli_option.id), apart from every tool's own. */
enum {
	TIER_OPT_SINKS = 400,
	TIER_OPT_WINDOW,
	TIER_OPT_L1_FRACTION,
	TIER_OPT_GROUP_SIZE,
	TIER_OPT_MEDIUM_FRACTION,
	TIER_OPT_OBS_WINDOW,
	TIER_OPT_READER,
	TIER_OPT_COMPRESSOR,
	TIER_OPT_KEEP,
	TIER_OPT_RESIDUAL_HEADS,
	TIER_OPT_KEY_ROUNDING,
	TIER_OPT_SEED,
	TIER_OPT_BUDGET,
	TIER_OPT_RETRIEVAL_HEADS,
};

/* ------------------------------------------------ compression (prefill) */

#define TIER_OPTION_SINKS { "sinks", 0, "N", "hsq: first tokens kept in L1 (default 4)", TIER_OPT_SINKS }
#define TIER_OPTION_WINDOW { "window", 0, "N", "hsq: most recent tokens kept in L1 (default 64)", TIER_OPT_WINDOW }
#define TIER_OPTION_L1_FRACTION                                                                                \
	{ "l1-fraction", 0, "F", "hsq: share of other tokens the reader flags into L1, 0..1 (default 0.03)",        \
	  TIER_OPT_L1_FRACTION }
#define TIER_OPTION_GROUP_SIZE { "group-size", 0, "N", "hsq: tokens per L2 group, 8 or 16 (default 16)", TIER_OPT_GROUP_SIZE }
#define TIER_OPTION_MEDIUM_FRACTION                                                                            \
	{ "medium-fraction", 0, "F", "hsq: share of 16-token blocks split into medium groups of 8 (default 0.25)",  \
	  TIER_OPT_MEDIUM_FRACTION }
#define TIER_OPTION_OBS_WINDOW                                                                                 \
	{ "obs-window", 0, "N", "reader: last tokens whose queries it observes, 1..64 (default 32)", TIER_OPT_OBS_WINDOW }
#define TIER_OPTION_READER                                                                                     \
	{ "reader", 0, "NAME", "obs-attention (default), key-norm, or learned (--calibration's; its default)",      \
	  TIER_OPT_READER }
#define TIER_OPTION_COMPRESSOR { "compressor", 0, "NAME", "obs-weighted (default) or mean", TIER_OPT_COMPRESSOR }
#define TIER_OPTION_KEEP                                                                                       \
	{ "keep", 0, "N", "streaming/snapkv: tokens kept per head (default: the bytes of hsq's fast tier)", TIER_OPT_KEEP }
#define TIER_OPTION_RESIDUAL_HEADS                                                                             \
	{ "residual-heads", 0, "N",                                                                                \
	  "hsq: heads whose keys get a residual code (about 8 bits); 'default' (the retrieval heads), 'all', 0 = none", \
	  TIER_OPT_RESIDUAL_HEADS }
#define TIER_OPTION_KEY_ROUNDING                                                                               \
	{ "key-rounding", 0, "HOW",                                                                                \
	  "4-bit key codes: query (default: the levels whose error the observation queries see least) or nearest",  \
	  TIER_OPT_KEY_ROUNDING }
#define TIER_OPTION_SEED { "seed", 0, "N", "TurboQuant rotation seed (default 310635462657)", TIER_OPT_SEED }

/* Every compression option, in hsq-prefill's order. */
#define TIER_COMPRESSION_OPTIONS                                                                               \
	TIER_OPTION_SINKS, TIER_OPTION_WINDOW, TIER_OPTION_L1_FRACTION, TIER_OPTION_GROUP_SIZE,                    \
		TIER_OPTION_MEDIUM_FRACTION, TIER_OPTION_OBS_WINDOW, TIER_OPTION_READER, TIER_OPTION_COMPRESSOR,       \
		TIER_OPTION_KEEP, TIER_OPTION_RESIDUAL_HEADS, TIER_OPTION_KEY_ROUNDING, TIER_OPTION_SEED

/* ------------------------------------------------------ routing (decode) */

#define TIER_OPTION_BUDGET                                                                                     \
	{ "budget", 0, "N",                                                                                        \
	  "hsq snapshots: tokens per KV head fetched from L3 each step; 0 = none, 'all', 'default' (n/4, >= 256)",  \
	  TIER_OPT_BUDGET }
#define TIER_OPTION_RETRIEVAL_HEADS                                                                            \
	{ "retrieval-heads", 0, "N",                                                                               \
	  "hsq snapshots: the N heads with the highest induction score fetch every group; 'default' (one in six)",  \
	  TIER_OPT_RETRIEVAL_HEADS }

/* Both routing options, in hsq-decode's order. */
#define TIER_ROUTING_OPTIONS TIER_OPTION_BUDGET, TIER_OPTION_RETRIEVAL_HEADS

/* ---------------------------------------------------------- the values */

typedef struct tier_options {
	hsq_tier_params params; /* the library's defaults, changed by the compression options given */
	int n_params;           /* compression options given */
	int reader_given;       /* --reader was given */
	int budget;             /* HSQ_BUDGET_DEFAULT, HSQ_BUDGET_ALL or tokens per KV head */
	int budget_given;
	int retrieval_heads;    /* HSQ_RETRIEVAL_DEFAULT or a head count */
	int retrieval_given;
} tier_options;

void tier_options_init(tier_options *t);
/* Reads option id (a TIER_OPT_ id) with its value and returns 1, or
 * returns 0 for another id. A bad value exits 2 naming the option. */
int tier_option(tier_options *t, const char *prog, int id, const char *value);
/* --budget: 'all', 'default' or a token count, 0..2^24 (exits 2 otherwise). */
int tier_parse_budget(const char *prog, const char *value);
/* A budget as --budget reads it: "default", "all" or the number in buf. */
const char *tier_budget_name(int budget, char *buf, size_t cap);

#endif
