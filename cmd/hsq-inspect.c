/* hsq-inspect - show what a snapshot holds and verify its checksums. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char PROG[] = "hsq-inspect";
static const char USAGE[] = "hsq-inspect [--verify] [--json] [--tokens] [--text [-m MODEL]] FILE.hsq";
static const char DESCRIPTION[] =
	"Print what a snapshot written by hsq-prefill holds: format version, mode, the model\n"
	"that built it, tokens, sections with their sizes, codecs and checksums, and the size\n"
	"of the KV cache against fp16. Needs no model unless --text is given.";

enum { OPT_VERIFY = 256, OPT_JSON, OPT_TOKENS, OPT_TEXT };

static const cli_option options[] = {
	{ "verify", 0, NULL, "check every section checksum (exit 5 naming a damaged one)", OPT_VERIFY },
	{ "json", 0, NULL, "print the same information as one JSON object", OPT_JSON },
	{ "tokens", 0, NULL, "also print the token ids", OPT_TOKENS },
	{ "text", 0, NULL, "also print the tokens as text (needs the model that built it)", OPT_TEXT },
	{ "model", 'm', "FILE", "GGUF model for --text (default: $HSQ_MODEL or the installed default)", 'm' },
	{ 0 },
};

/* Snapshot problems exit 5 (hsq(7)); out of memory and bugs exit 1. */
static int exit_code(hsq_status st)
{
	return st == HSQ_ERR_NOMEM || st == HSQ_ERR_INTERNAL ? EXIT_FAILURE_RUNTIME : EXIT_SNAPSHOT;
}

static const char *mode_name(uint32_t mode)
{
	return mode == HSQ_MODE_FULL ? "full" : "unknown";
}

static const char *codec_name(uint32_t codec)
{
	return codec == 0 ? "raw" : codec == 1 ? "zstd" : "unknown";
}

static const char *checksum_word(int ok)
{
	return ok > 0 ? "ok" : ok == 0 ? "BAD" : "-";
}

/* "19.4 MiB": binary units, three significant digits. */
static const char *human(char *buf, size_t cap, uint64_t bytes)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return buf;
}

static void json_string(FILE *out, const char *s, size_t n)
{
	fputc('"', out);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '\t')
			fputs("\\t", out);
		else if (c == '\r')
			fputs("\\r", out);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static const hsq_snapshot_section_info *find(const hsq_snapshot_info *info, const char *name)
{
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++)
		if (!strcmp(info->sections[i].name, name))
			return &info->sections[i];
	return NULL;
}

/* Detokenizes every token into one malloc'ed UTF-8 string (exits on error). */
static char *detokenize(const hsq_model *model, const hsq_token *toks, size_t n, size_t *len)
{
	size_t cap = 4096, used = 0;
	char *text = malloc(cap);
	hsq_detok state = { 0 };
	for (size_t i = 0; i <= n; i++) {
		char piece[1024];
		size_t got;
		if (i < n) {
			hsq_status st = hsq_detok_push(model, &state, toks[i], piece, sizeof piece, &got);
			if (st)
				cli_die_status(PROG, EXIT_FAILURE_RUNTIME, st);
		} else {
			got = hsq_detok_flush(&state, piece, sizeof piece);
		}
		while (text && used + got + 1 > cap) {
			cap *= 2;
			char *grown = realloc(text, cap);
			if (!grown)
				free(text);
			text = grown;
		}
		if (!text)
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		memcpy(text + used, piece, got);
		used += got;
	}
	text[used] = '\0';
	*len = used;
	return text;
}

static void print_text(const hsq_snapshot_info *info, const hsq_token *toks, size_t n_toks, const char *text,
		       size_t text_len, const char *path, int verified, int show_tokens)
{
	char b1[32], b2[32], b3[32], hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", info->model_identity[i]);
	printf("file:       %s\n", path);
	printf("size:       %s (%llu bytes)\n", human(b1, sizeof b1, info->file_size),
	       (unsigned long long)info->file_size);
	printf("format:     hsq snapshot %u.%u, little-endian\n", info->version >> 16, info->version & 0xffff);
	printf("mode:       %s", mode_name(info->mode));
	if (info->mode != HSQ_MODE_FULL)
		printf(" (%u; written by a newer hsq?)", info->mode);
	printf("\n");
	printf("model:      %s '%s'\n", info->architecture, info->model_name);
	printf("identity:   %.16s (sha256 %s)\n", hex, hex);
	printf("shape:      %d layers, %d kv heads x %d dims, vocabulary %d\n", info->n_layer, info->n_head_kv,
	       info->head_dim, info->n_vocab);
	printf("tokens:     %d\n", info->n_tokens);
	const hsq_snapshot_section_info *kv = find(info, "kv.full");
	if (kv) {
		uint64_t fp16 = info->kv_bytes_fp16;
		printf("kv cache:   %s fp32 (%s at fp16), stored in %s", human(b1, sizeof b1, kv->raw_size),
		       human(b2, sizeof b2, fp16), human(b3, sizeof b3, kv->size));
		if (kv->size)
			printf(": %.3fx the fp16 size, compression %.2f:1 vs fp32", (double)kv->size / (double)fp16,
			       (double)kv->raw_size / (double)kv->size);
		printf("\n");
	}
	printf("sections:   %d%s\n", info->n_sections,
	       info->n_sections > 16 ? " (the first 16 are listed)" : "");
	printf("  %-15s %12s %12s %12s  %-6s %s\n", "name", "offset", "stored", "raw", "codec", "checksum");
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++) {
		const hsq_snapshot_section_info *s = &info->sections[i];
		printf("  %-15s %12llu %12llu %12llu  %-6s %s\n", s->name, (unsigned long long)s->offset,
		       (unsigned long long)s->size, (unsigned long long)s->raw_size, codec_name(s->codec),
		       checksum_word(s->checksum_ok));
	}
	if (!verified)
		printf("checksums:  not verified (use --verify)\n");
	if (show_tokens) {
		printf("token ids:");
		for (size_t i = 0; i < n_toks; i++)
			printf("%s%d", i % 16 ? " " : "\n  ", (int)toks[i]);
		printf("\n");
	}
	if (text) {
		printf("text:\n");
		fwrite(text, 1, text_len, stdout);
		if (!text_len || text[text_len - 1] != '\n')
			printf("\n");
	}
}

static void print_json(const hsq_snapshot_info *info, const hsq_token *toks, size_t n_toks, const char *text,
		       size_t text_len, const char *path, int verified, int show_tokens)
{
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", info->model_identity[i]);
	printf("{\"file\":");
	json_string(stdout, path, strlen(path));
	printf(",\"file_size\":%llu,\"version\":\"%u.%u\",\"mode\":\"%s\",\"mode_id\":%u,",
	       (unsigned long long)info->file_size, info->version >> 16, info->version & 0xffff,
	       mode_name(info->mode), info->mode);
	printf("\"model\":{\"architecture\":");
	json_string(stdout, info->architecture, strlen(info->architecture));
	printf(",\"name\":");
	json_string(stdout, info->model_name, strlen(info->model_name));
	printf(",\"identity\":\"%s\"},", hex);
	printf("\"n_layer\":%d,\"n_head_kv\":%d,\"head_dim\":%d,\"n_vocab\":%d,\"n_tokens\":%d,", info->n_layer,
	       info->n_head_kv, info->head_dim, info->n_vocab, info->n_tokens);
	const hsq_snapshot_section_info *kv = find(info, "kv.full");
	if (kv)
		printf("\"kv\":{\"fp32_bytes\":%llu,\"fp16_bytes\":%llu,\"stored_bytes\":%llu,\"stored_vs_fp16\":%.4f},",
		       (unsigned long long)kv->raw_size, (unsigned long long)info->kv_bytes_fp16,
		       (unsigned long long)kv->size,
		       info->kv_bytes_fp16 ? (double)kv->size / (double)info->kv_bytes_fp16 : 0.0);
	printf("\"n_sections\":%d,\"sections\":[", info->n_sections);
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++) {
		const hsq_snapshot_section_info *s = &info->sections[i];
		printf("%s{\"name\":", i ? "," : "");
		json_string(stdout, s->name, strlen(s->name));
		printf(",\"offset\":%llu,\"stored_size\":%llu,\"raw_size\":%llu,\"codec\":\"%s\",\"checksum\":\"%s\"}",
		       (unsigned long long)s->offset, (unsigned long long)s->size, (unsigned long long)s->raw_size,
		       codec_name(s->codec), s->checksum_ok > 0 ? "ok" : s->checksum_ok == 0 ? "bad" : "unverified");
	}
	printf("],\"verified\":%s", verified ? "true" : "false");
	if (show_tokens) {
		printf(",\"tokens\":[");
		for (size_t i = 0; i < n_toks; i++)
			printf("%s%d", i ? "," : "", (int)toks[i]);
		printf("]");
	}
	if (text) {
		printf(",\"text\":");
		json_string(stdout, text, text_len);
	}
	printf("}\n");
}

int main(int argc, char **argv)
{
	const char *model_arg = NULL;
	int verify = 0, json = 0, show_tokens = 0, show_text = 0, c;
	cli_parser p;
	cli_init(&p, PROG, options);
	while ((c = cli_next(&p, argc, argv, USAGE, DESCRIPTION)) != -1) {
		switch (c) {
		case OPT_VERIFY: verify = 1; break;
		case OPT_JSON: json = 1; break;
		case OPT_TOKENS: show_tokens = 1; break;
		case OPT_TEXT: show_text = 1; break;
		case 'm': model_arg = optarg; break;
		default: cli_usage_error(PROG, "unexpected option");
		}
	}
	cli_free(&p);
	if (optind >= argc)
		cli_usage_error(PROG, "no snapshot given; usage: %s", USAGE);
	if (argc - optind > 1)
		cli_usage_error(PROG, "one snapshot at a time ('%s' is extra)", argv[optind + 1]);
	if (model_arg && !show_text)
		cli_usage_error(PROG, "-m is only used with --text");
	const char *path = argv[optind];

	hsq_snapshot_info info;
	hsq_status st = hsq_snapshot_inspect(path, verify, &info);
	/* A checksum failure still fills info: print it (the bad section shows
	 * as BAD), then fail. */
	if (st && st != HSQ_ERR_CHECKSUM)
		cli_die_status(PROG, exit_code(st), st);
	hsq_status verify_st = st;
	char verify_msg[512] = "";
	if (verify_st)
		snprintf(verify_msg, sizeof verify_msg, "%s", hsq_last_error());

	hsq_token *toks = NULL;
	size_t n_toks = 0, text_len = 0;
	char *text = NULL;
	if ((show_tokens || show_text) && !verify_st) {
		if ((st = hsq_snapshot_read_tokens(path, &toks, &n_toks)))
			cli_die_status(PROG, exit_code(st), st);
	}
	if (show_text && !verify_st) {
		char buf[4096];
		hsq_model *model = cli_load_model(PROG, cli_model_path(PROG, model_arg, buf, sizeof buf));
		hsq_model_info mi;
		hsq_model_get_info(model, &mi);
		if (memcmp(mi.identity, info.model_identity, 32))
			cli_die(PROG, EXIT_SNAPSHOT,
				"%s was built by model '%s' (%s), not by the given model '%s' (%s); pass the model that built it with -m",
				path, info.model_name, info.architecture, mi.name, mi.architecture);
		text = detokenize(model, toks, n_toks, &text_len);
		hsq_model_free(model);
	}
	if (json)
		print_json(&info, toks, n_toks, text, text_len, path, verify && !verify_st, show_tokens && !verify_st);
	else
		print_text(&info, toks, n_toks, text, text_len, path, verify, show_tokens && !verify_st);
	fflush(stdout);
	hsq_free(toks);
	free(text);
	if (verify_st)
		cli_die(PROG, EXIT_SNAPSHOT, "%s", verify_msg);
	return ferror(stdout) ? EXIT_FAILURE_RUNTIME : EXIT_OK;
}
