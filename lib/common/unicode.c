/* unicode.c - lenient decoding, White_Space, collapsed classes and strict
 * UTF-8 checking for the tokenizer (see unicode.h for why llama.cpp's
 * behaviour is copied rather than improved upon). */
#include <utf8proc.h>

#include "common/unicode.h"

uint32_t uni_decode_lenient(const uint8_t *s, size_t n, size_t *adv)
{
	uint8_t b0 = s[0];
	size_t need;
	uint32_t cpt;

	/* Same lead-byte ladder as llama.cpp's unicode_cpt_from_utf8. */
	if (!(b0 & 0x80)) {
		*adv = 1;
		return b0;
	}
	if (!(b0 & 0x40))
		goto invalid;
	if (!(b0 & 0x20)) {
		need = 2;
		cpt = b0 & 0x1f;
	} else if (!(b0 & 0x10)) {
		need = 3;
		cpt = b0 & 0x0f;
	} else if (!(b0 & 0x08)) {
		need = 4;
		cpt = b0 & 0x07;
	} else {
		goto invalid;
	}
	if (n < need)
		goto invalid;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto invalid;
		cpt = (cpt << 6) | (s[i] & 0x3f);
	}
	*adv = need;
	return cpt;
invalid:
	/* llama.cpp swallows one byte and substitutes U+FFFD. */
	*adv = 1;
	return 0xFFFD;
}

size_t uni_encode(uint32_t cpt, uint8_t out[4])
{
	if (cpt <= 0x7f) {
		out[0] = (uint8_t)cpt;
		return 1;
	}
	if (cpt <= 0x7ff) {
		out[0] = (uint8_t)(0xc0 | (cpt >> 6));
		out[1] = (uint8_t)(0x80 | (cpt & 0x3f));
		return 2;
	}
	if (cpt > 0x10ffff)
		cpt = 0xFFFD; /* llama.cpp throws here; we stay total */
	if (cpt <= 0xffff) {
		out[0] = (uint8_t)(0xe0 | (cpt >> 12));
		out[1] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3f));
		out[2] = (uint8_t)(0x80 | (cpt & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | (cpt >> 18));
	out[1] = (uint8_t)(0x80 | ((cpt >> 12) & 0x3f));
	out[2] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3f));
	out[3] = (uint8_t)(0x80 | (cpt & 0x3f));
	return 4;
}

int uni_is_whitespace(uint32_t cpt)
{
	/* The Unicode White_Space property, as llama.cpp's
	 * unicode_set_whitespace. Note U+180E is not in it although PCRE2's
	 * \s (via \h) matches it, which is one reason the regexes never see
	 * raw Unicode. */
	if (cpt <= 0x20)
		return (cpt >= 0x09 && cpt <= 0x0d) || cpt == 0x20;
	if (cpt < 0x85)
		return 0;
	switch (cpt) {
	case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
		return 1;
	default:
		return cpt >= 0x2000 && cpt <= 0x200a;
	}
}

uint8_t uni_collapse(uint32_t cpt)
{
	if (cpt < 0x80)
		return (uint8_t)cpt;
	if (uni_is_whitespace(cpt))
		return UNI_COL_WHITESPACE;
	if (cpt > 0x10ffff)
		return UNI_COL_OTHER;
	/* Unicode 15.1 additions missing from utf8proc 2.8 (Unicode 15.0):
	 * CJK Extension I is Lo; the ideographic description characters
	 * U+2FFC..U+2FFF and the CJK stroke U+31EF are So. */
	if (cpt >= 0x2ebf0 && cpt <= 0x2ee5d)
		return UNI_COL_LETTER;
	if ((cpt >= 0x2ffc && cpt <= 0x2fff) || cpt == 0x31ef)
		return UNI_COL_SYMBOL;
	switch (utf8proc_category((utf8proc_int32_t)cpt)) {
	case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
	case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
		return UNI_COL_LETTER;
	case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
		return UNI_COL_NUMBER;
	case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
		return UNI_COL_MARK;
	case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
	case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
	case UTF8PROC_CATEGORY_PO:
		return UNI_COL_PUNCT;
	case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
	case UTF8PROC_CATEGORY_SO:
		return UNI_COL_SYMBOL;
	default:
		return UNI_COL_OTHER;
	}
}

int uni_utf8_check(const uint8_t *s, size_t n, size_t *len)
{
	uint8_t b0 = s[0];
	size_t need;
	uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */

	if (b0 < 0x80) {
		*len = 1;
		return UNI_UTF8_OK;
	}
	if (b0 >= 0xc2 && b0 <= 0xdf) {
		need = 2;
	} else if (b0 >= 0xe0 && b0 <= 0xef) {
		need = 3;
		if (b0 == 0xe0)
			lo = 0xa0; /* overlong */
		else if (b0 == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (b0 >= 0xf0 && b0 <= 0xf4) {
		need = 4;
		if (b0 == 0xf0)
			lo = 0x90; /* overlong */
		else if (b0 == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	} else {
		*len = 1;
		return UNI_UTF8_INVALID;
	}
	for (size_t i = 1; i < need; i++) {
		if (i >= n) {
			*len = n;
			return UNI_UTF8_INCOMPLETE;
		}
		uint8_t b = s[i];
		uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
		if (b < l || b > h) {
			*len = i;
			return UNI_UTF8_INVALID;
		}
	}
	*len = need;
	return UNI_UTF8_OK;
}
