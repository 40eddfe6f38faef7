/* unicode.h - the few Unicode facts the tokenizer needs (internal).
 *
 * Everything here mirrors llama.cpp's unicode.cpp, because token ids must
 * match llama.cpp exactly: its lenient UTF-8 decoder, its whitespace set, and
 * its "collapsed" one-byte-per-codepoint representation on which the
 * pre-tokenizer regexes run. */
#ifndef HSQ_UNICODE_H
#define HSQ_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Collapsed classes of non-ASCII codepoints (ASCII stays itself). The byte
 * values are llama.cpp's, so its regex rewriting carries over unchanged. */
enum {
	UNI_COL_WHITESPACE = 0x0B, /* any non-ASCII White_Space: \s matches VT */
	UNI_COL_OTHER = 0xD0,      /* separators that are not White_Space, controls, unassigned */
	UNI_COL_NUMBER = 0xD1,     /* \p{N} */
	UNI_COL_LETTER = 0xD2,     /* \p{L} */
	UNI_COL_PUNCT = 0xD3,      /* \p{P} */
	UNI_COL_MARK = 0xD4,       /* \p{M} */
	UNI_COL_SYMBOL = 0xD5,     /* \p{S} */
};

/* Decodes one codepoint at s[0..n) (n >= 1) the way llama.cpp does: lead and
 * continuation bits are checked, nothing else (overlong forms, surrogates
 * and values up to 0x1FFFFF pass). An invalid lead or a missing continuation
 * byte yields U+FFFD and consumes one byte. *adv receives the bytes used. */
uint32_t uni_decode_lenient(const uint8_t *s, size_t n, size_t *adv);

/* Encodes cpt (<= 0x10FFFF; surrogates encode as three bytes like
 * llama.cpp) into out; returns the length (1-4). Larger values, which
 * llama.cpp cannot encode either, become U+FFFD. */
size_t uni_encode(uint32_t cpt, uint8_t out[4]);

/* 1 if cpt has the Unicode White_Space property (llama.cpp's set). */
int uni_is_whitespace(uint32_t cpt);

/* The collapsed byte for cpt: cpt itself below 128, else a UNI_COL_* class.
 * General categories come from utf8proc (Unicode 15.0) patched to the
 * Unicode 15.1 table llama.cpp was generated from. */
uint8_t uni_collapse(uint32_t cpt);

/* Classifies the bytes at s[0..n) (n >= 1) as strict UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF):
 *   UNI_UTF8_OK          a whole codepoint of *len bytes starts at s;
 *   UNI_UTF8_INCOMPLETE  all n bytes are a valid but unfinished prefix;
 *   UNI_UTF8_INVALID     ill-formed; *len (>= 1) is the maximal subpart that
 *                        one U+FFFD replaces (Unicode's recommended practice). */
enum { UNI_UTF8_OK = 0, UNI_UTF8_INCOMPLETE = 1, UNI_UTF8_INVALID = 2 };
int uni_utf8_check(const uint8_t *s, size_t n, size_t *len);

#endif
