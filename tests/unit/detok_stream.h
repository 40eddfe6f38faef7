/* detok_stream.h - a streaming-detokenizer check shared by the tokenizer
 * tests (test code). */
#ifndef HSQ_TEST_DETOK_STREAM_H
#define HSQ_TEST_DETOK_STREAM_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "hsq.h"
#include "common/unicode.h"

/* Feeds the tokens of text one at a time through hsq_detok_push: every
 * chunk must be whole UTF-8 and the chunks must add up to the text.
 * Returns how many pushes printed nothing (a character split over tokens). */
static inline int detok_stream(const hsq_model *m, const char *text)
{
	hsq_token *ids;
	size_t n, o = 0, len = strlen(text);
	char *acc = malloc(len + 16), chunk[64];
	hsq_detok st = {0};
	int held = 0;
	cr_assert_eq(hsq_tokenize(m, text, len, 0, 1, &ids, &n), HSQ_OK);
	for (size_t i = 0; i < n; i++) {
		size_t got;
		cr_assert_eq(hsq_detok_push(m, &st, ids[i], chunk, sizeof chunk, &got), HSQ_OK, "%s", hsq_last_error());
		for (size_t k = 0; k < got;) {
			size_t cl;
			cr_assert_eq(uni_utf8_check((const uint8_t *)chunk + k, got - k, &cl), UNI_UTF8_OK,
				     "chunk %zu of '%s' is not whole UTF-8", i, text);
			k += cl;
		}
		held += got == 0;
		memcpy(acc + o, chunk, got);
		o += got;
	}
	o += hsq_detok_flush(&st, acc + o, 16);
	cr_expect(o == len && memcmp(acc, text, len) == 0, "streamed '%.*s' != '%s'", (int)o, acc, text);
	free(acc);
	hsq_free(ids);
	return held;
}

#endif
