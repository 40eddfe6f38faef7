/* tokenizer_spm.h - the SentencePiece-style tokenizer (tokenizer.ggml.model
 * = "llama": llama, gemma, ...) and llama.cpp's detokenizer (internal).
 *
 * tokenizer.c owns the vocabulary (token texts, attributes, special tokens,
 * EOG set, decoded pieces) and the special-token partition for both
 * tokenizer models; this file adds what only SPM needs (scores, <0xXX> byte
 * tokens, the space prefix) and the score-driven bigram merging that turns a
 * fragment of raw text into tokens. */
#ifndef HSQ_TOKENIZER_SPM_H
#define HSQ_TOKENIZER_SPM_H

#include <stddef.h>

#include "model/gguf.h"
#include "hsq.h"
#include "model/tokenizer.h"

typedef struct spm_vocab spm_vocab;

/* ---- provided by tokenizer.c for the code here */

/* The token whose text is exactly s[0..n), or -1. */
hsq_token tokenizer_lookup(const hsq_tokenizer *tok, const char *s, size_t n);
/* The SPM data of an SPM tokenizer, NULL for byte-level BPE. */
const spm_vocab *tokenizer_spm(const hsq_tokenizer *tok);
int tokenizer_add_eos(const hsq_tokenizer *tok); /* tokenizer.ggml.add_eos_token */
int tokenizer_clean_spaces(const hsq_tokenizer *tok); /* see bpe_clean_spaces */

/* ---- SPM */

/* Reads scores (float32 or int32, one per token, already length-checked by
 * the caller), tokenizer.ggml.add_space_prefix (default true, as llama.cpp)
 * and finds the byte-fallback tokens. tok must have its tokens loaded. */
hsq_status spm_load(const gguf_file *f, const hsq_tokenizer *tok, spm_vocab **out);
void spm_free(spm_vocab *v);

/* Tokenizes one raw-text fragment (what the special-token partition left
 * between special tokens) the way llama.cpp's llm_tokenizer_spm_session
 * does, appending to (*out)[*n_out..], growing *out (capacity *cap, >= 1) as
 * needed. prev_special: the fragment starts the text or follows a special
 * token, where llama.cpp adds the space prefix (if the vocabulary asks for
 * it). */
hsq_status spm_encode(const spm_vocab *v, const hsq_tokenizer *tok, const char *text, size_t len, int prev_special,
		      hsq_token **out, size_t *n_out, size_t *cap);

/* Rewrites every U+2581 in s[0..n) as a space, in place; returns the new
 * length (a NORMAL token's piece, llama_unescape_whitespace). */
size_t spm_unescape(char *s, size_t n);

/* ---- both tokenizer models */

/* llama.cpp's clean_spaces for a byte-level BPE vocabulary with
 * tokenizer.ggml.pre = pre ("" if absent): 1 unless llama.cpp turns it off
 * for that pre-tokenizer. */
int bpe_clean_spaces(const char *pre);

/* llama.cpp's llama_detokenize: the text of tokens[0..n) in a malloc'ed,
 * NUL-terminated *out of *len bytes. remove_special drops a leading BOS and
 * a trailing EOS where the model adds them; unparse_special prints control
 * tokens' text. SPM vocabularies with a space prefix lose the first leading
 * space (unless a removed BOS came first); byte-level BPE vocabularies with
 * clean_spaces get llama.cpp's clean-up of " ," " ." " 's" and the like. */
hsq_status tokenizer_detokenize(const hsq_tokenizer *tok, const hsq_token *tokens, size_t n, int remove_special,
				int unparse_special, char **out, size_t *len);

#endif
