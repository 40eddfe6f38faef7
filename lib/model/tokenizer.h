/* tokenizer.h - tokenizers built from GGUF metadata (internal).
 *
 * Byte-level BPE (tokenizer.ggml.model = "gpt2") with the pre-tokenizer
 * named by tokenizer.ggml.pre, and SentencePiece-style BPE over scores with
 * byte fallback ("llama", e.g. gemma3; tokenizer_spm.c); special tokens,
 * BOS/EOS handling, shared by both. */
#ifndef HSQ_TOKENIZER_H
#define HSQ_TOKENIZER_H

#include <stddef.h>

#include "model/gguf.h"
#include "hsq.h"

typedef struct hsq_tokenizer hsq_tokenizer;

/* Builds the tokenizer from the file's tokenizer.ggml.* keys. Refuses
 * unknown tokenizer models and pre-tokenizers with HSQ_ERR_UNSUPPORTED,
 * naming the value. */
hsq_status tokenizer_load(const gguf_file *f, hsq_tokenizer **out);
void tokenizer_free(hsq_tokenizer *tok);

int tokenizer_n_vocab(const hsq_tokenizer *tok);
hsq_token tokenizer_bos(const hsq_tokenizer *tok); /* -1 if none */
hsq_token tokenizer_eos(const hsq_tokenizer *tok); /* -1 if none */
int tokenizer_add_bos(const hsq_tokenizer *tok);   /* tokenizer.ggml.add_bos_token */
/* 1 if the token ends generation (EOS, EOT such as <|im_end|>). */
int tokenizer_is_eog(const hsq_tokenizer *tok, hsq_token t);

/* Same contracts as hsq_tokenize / hsq_token_bytes in hsq.h. */
hsq_status tokenizer_encode(const hsq_tokenizer *tok, const char *text, size_t len,
			    int add_bos, int parse_special, hsq_token **out, size_t *n_out);
hsq_status tokenizer_token_bytes(const hsq_tokenizer *tok, hsq_token t, int special,
				 const char **bytes, size_t *len);
/* The GGUF's tokenizer.chat_template (NUL-terminated), or NULL if absent. */
const char *tokenizer_chat_template(const hsq_tokenizer *tok);
/* Looks up a token by its exact text (e.g. "<|im_start|>"); -1 if absent. */
hsq_token tokenizer_find(const hsq_tokenizer *tok, const char *text);

#endif
