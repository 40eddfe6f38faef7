/* gen_hsqc.c - writes the seed corpus of fuzz_hsqc: three small
 * calibration files (hsq-calibration(5)) from hand-made readers with
 * deterministic weights, written by the real writer (calib_write_reader,
 * lib/train/calib_write.c). Each is under 8 KiB:
 *   tiny.hsqc     1 layer, hidden size 4, 1 KV head, 2 hidden units
 *   gqa.hsqc      2 layers, hidden size 8, 2 KV heads, 4 hidden units, a
 *                 multi-line UTF-8 info text
 *   no-info.hsqc  3 layers, hidden size 16, 1 KV head, 8 hidden units,
 *                 reading layer 2, an empty info text
 *
 *   cc -Iinclude -Ilib tests/fuzz/gen_hsqc.c build/libhsq-train.a build/libhsq.a \
 *      -lzstd -lpcre2-8 -lutf8proc -lm -lpthread -o gen_hsqc
 *   ./gen_hsqc tests/fuzz/corpus/hsqc */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsq.h"
#include "learn/reader_net.h"
#include "train/reader_trainer.h"

static float next(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static int write_one(const char *dir, const char *file, int n_layer, int n_embd, int n_head_kv, int tap,
		     int n_hidden, const char *info)
{
	hsq_model_info mi;
	memset(&mi, 0, sizeof mi);
	mi.architecture = "llama";
	mi.name = file;
	mi.n_layer = n_layer;
	mi.n_embd = n_embd;
	mi.n_head_kv = n_head_kv;
	for (int i = 0; i < 32; i++)
		mi.identity[i] = (uint8_t)(17 * i + n_embd);
	reader_net net = { .tap_layer = tap, .n_embd = n_embd, .n_in = n_embd + READER_POS_FEATURES,
			   .n_hidden = n_hidden, .n_out = n_layer * n_head_kv };
	size_t n1 = (size_t)net.n_hidden * net.n_in, n2 = (size_t)net.n_out * net.n_hidden;
	net.w1 = malloc(sizeof(float) * n1);
	net.b1 = malloc(sizeof(float) * (size_t)net.n_hidden);
	net.w2 = malloc(sizeof(float) * n2);
	net.b2 = malloc(sizeof(float) * (size_t)net.n_out);
	int ok = net.w1 && net.b1 && net.w2 && net.b2;
	uint32_t s = 7u + (uint32_t)n_embd;
	for (size_t i = 0; ok && i < n1; i++)
		net.w1[i] = next(&s);
	for (int i = 0; ok && i < net.n_hidden; i++)
		net.b1[i] = 0.1f * next(&s);
	for (size_t i = 0; ok && i < n2; i++)
		net.w2[i] = next(&s);
	for (int i = 0; ok && i < net.n_out; i++)
		net.b2[i] = 0.0f;
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (ok && calib_write_reader(path, &mi, &net, info) != HSQ_OK) {
		fprintf(stderr, "gen_hsqc: %s: %s\n", path, hsq_last_error());
		ok = 0;
	}
	free(net.w1);
	free(net.b1);
	free(net.w2);
	free(net.b2);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	return write_one(dir, "tiny.hsqc", 1, 4, 1, 0, 2, "seed: 1\n") |
	       write_one(dir, "gqa.hsqc", 2, 8, 2, 1, 4,
			 "tool: hsq-calibrate 0.1.0\ntexts: 2 (caf\xc3\xa9.txt, \xe6\x97\xa5\xe6\x9c\xac.txt)\n"
			 "options:\t--hidden 4\nloss: 1.25 -> 0.75\n") |
	       write_one(dir, "no-info.hsqc", 3, 16, 1, 2, 8, "");
}
