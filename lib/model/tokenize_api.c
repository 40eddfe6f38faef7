/* tokenize_api.c - the public tokenizer calls of hsq.h: tokenize, token
 * bytes, streaming detokenization and the chat template. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/unicode.h"
#include "model/model.h"
#include "model/tokenizer.h"

static const char REPLACEMENT[3] = {(char)0xef, (char)0xbf, (char)0xbd}; /* U+FFFD */

static hsq_status check_model(const hsq_model *model)
{
	if (!model || !model->tok)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "model is NULL or has no tokenizer; load it with hsq_model_load");
	return HSQ_OK;
}

hsq_status hsq_tokenize(const hsq_model *model, const char *text, size_t len, int add_bos, int parse_special,
			hsq_token **tokens, size_t *n_tokens)
{
	hsq_status st = check_model(model);
	if (st)
		return st;
	if (!tokens || !n_tokens)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_tokenize needs somewhere to store the tokens (tokens, n_tokens)");
	return tokenizer_encode(model->tok, text, len, add_bos < 0 ? -1 : add_bos != 0, parse_special != 0, tokens,
				n_tokens);
}

hsq_status hsq_token_bytes(const hsq_model *model, hsq_token token, int special, const char **bytes, size_t *len)
{
	hsq_status st = check_model(model);
	if (st)
		return st;
	if (!bytes || !len)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_token_bytes needs somewhere to store the bytes (bytes, len)");
	return tokenizer_token_bytes(model->tok, token, special, bytes, len);
}

/* Walks buf[0..total) (pending bytes, then the token's) as strict UTF-8.
 * With out == NULL only counts the output; otherwise writes it and returns
 * in *done how many input bytes were consumed (the rest is an unfinished
 * sequence, at most 3 bytes). */
static size_t detok_run(const unsigned char *buf, size_t total, char *out, size_t *done)
{
	size_t o = 0, i = 0;
	while (i < total) {
		size_t len;
		int kind = uni_utf8_check(buf + i, total - i, &len);
		if (kind == UNI_UTF8_INCOMPLETE)
			break; /* maybe the next token completes it */
		if (kind == UNI_UTF8_OK) {
			if (out)
				memcpy(out + o, buf + i, len);
			o += len;
		} else {
			/* Bytes no continuation can repair print as U+FFFD now. */
			if (out)
				memcpy(out + o, REPLACEMENT, sizeof REPLACEMENT);
			o += sizeof REPLACEMENT;
		}
		i += len;
	}
	*done = i;
	return o;
}

hsq_status hsq_detok_push(const hsq_model *model, hsq_detok *state, hsq_token token, char *out, size_t cap,
			  size_t *out_len)
{
	const char *bytes;
	unsigned char stackbuf[256], *buf = stackbuf;
	size_t n, done;
	hsq_status st = check_model(model);
	if (st)
		return st;
	if (!state || !out_len || (!out && cap))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_detok_push needs a state, an output buffer and out_len");
	*out_len = 0;
	if (state->n_pending >= 4)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "detokenizer state holds %zu pending bytes; zero-initialise it",
				state->n_pending);
	/* Control tokens (<|im_end|>, ...) are not text: they print nothing. */
	if ((st = tokenizer_token_bytes(model->tok, token, 0, &bytes, &n)))
		return st;
	size_t total = state->n_pending + n;
	if (total > sizeof stackbuf && !(buf = malloc(total)))
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory detokenizing token %d", (int)token);
	memcpy(buf, state->pending, state->n_pending);
	memcpy(buf + state->n_pending, bytes, n);
	size_t need = detok_run(buf, total, NULL, &done);
	if (need > cap) {
		st = hsq_fail(HSQ_ERR_INVALID_ARG, "output buffer of %zu bytes is too small for token %d (needs %zu)",
			      cap, (int)token, need);
	} else {
		*out_len = detok_run(buf, total, out, &done);
		state->n_pending = total - done;
		memcpy(state->pending, buf + done, state->n_pending);
	}
	if (buf != stackbuf)
		free(buf);
	return st;
}

size_t hsq_detok_flush(hsq_detok *state, char *out, size_t cap)
{
	size_t o = 0;
	if (!state)
		return 0;
	/* What is left is an unfinished sequence (or garbage in a state we did
	 * not fill): one U+FFFD, if the caller left room for it. */
	if (state->n_pending && out && cap >= sizeof REPLACEMENT) {
		memcpy(out, REPLACEMENT, sizeof REPLACEMENT);
		o = sizeof REPLACEMENT;
	}
	state->n_pending = 0;
	return o;
}

/* The default system message of a chatml template: the literal text after
 * "<|im_start|>system" (and its newline) up to "<|im_end|>", if it is plain
 * text rather than an expression. Returns a malloc'ed string or NULL. */
static char *default_system(const char *tmpl)
{
	const char *p = strstr(tmpl, "<|im_start|>system"), *end;
	if (!p)
		return NULL;
	p += strlen("<|im_start|>system");
	if (*p == '\n')
		p++;
	else if (p[0] == '\\' && p[1] == 'n')
		p += 2;
	else
		return NULL;
	if (!(end = strstr(p, "<|im_end|>")))
		return NULL;
	char *s = malloc((size_t)(end - p) + 1);
	size_t o = 0;
	if (!s)
		return NULL;
	for (; p < end; p++) {
		/* An unescaped quote or a brace means the Jinja string ended:
		 * the message is computed, not a default we can copy. */
		if (*p == '\'' || *p == '"' || *p == '{' || *p == '}') {
			free(s);
			return NULL;
		}
		if (*p == '\\' && p + 1 < end) {
			p++;
			s[o++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
			continue;
		}
		s[o++] = *p;
	}
	s[o] = '\0';
	return s;
}

/* The template family of the model: its chat template names the markers;
 * without one, the vocabulary's tokens decide. */
enum chat_kind { CHAT_NONE, CHAT_CHATML, CHAT_GEMMA };

static enum chat_kind chat_kind(const hsq_tokenizer *tok, const char *tmpl)
{
	if (tmpl)
		return strstr(tmpl, "<|im_start|>") ? CHAT_CHATML : strstr(tmpl, "<start_of_turn>") ? CHAT_GEMMA : CHAT_NONE;
	if (tokenizer_find(tok, "<|im_start|>") >= 0 && tokenizer_find(tok, "<|im_end|>") >= 0)
		return CHAT_CHATML;
	if (tokenizer_find(tok, "<start_of_turn>") >= 0 && tokenizer_find(tok, "<end_of_turn>") >= 0)
		return CHAT_GEMMA;
	return CHAT_NONE;
}

/* A malloc'ed copy of s without leading and trailing ASCII white space
 * (llama.cpp's trim()); NULL when out of memory. */
static char *trim_dup(const char *s)
{
	size_t n = strlen(s);
	while (n && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	return strndup(s, n);
}

/* Gemma's turns, as llama.cpp's built-in "gemma" template writes them: no
 * system role, so a system message opens the first user turn; both
 * messages trimmed; "model" for the assistant. BOS is not part of the text:
 * the tokenizer adds it (tokenizer.ggml.add_bos_token). */
static hsq_status chat_gemma(const char *system, const char *user, char **out)
{
	static const char open[] = "<start_of_turn>user\n", close[] = "<end_of_turn>\n<start_of_turn>model\n";
	char *sys = system ? trim_dup(system) : NULL, *usr = trim_dup(user), *s = NULL;
	if ((system && !sys) || !usr)
		goto oom;
	size_t n = strlen(open) + (sys ? strlen(sys) + 2 : 0) + strlen(usr) + strlen(close) + 1;
	if (!(s = malloc(n)))
		goto oom;
	snprintf(s, n, "%s%s%s%s%s", open, sys && *sys ? sys : "", sys && *sys ? "\n\n" : "", usr, close);
	free(sys);
	free(usr);
	*out = s;
	return HSQ_OK;
oom:
	free(sys);
	free(usr);
	return hsq_fail(HSQ_ERR_NOMEM, "out of memory formatting a chat prompt");
}

hsq_status hsq_chat_format(const hsq_model *model, const char *system, const char *user, char **out)
{
	char *dflt = NULL;
	hsq_status st = check_model(model);
	if (st)
		return st;
	if (!user || !out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_chat_format needs a user message and somewhere to put the prompt");
	*out = NULL;

	const char *tmpl = tokenizer_chat_template(model->tok);
	enum chat_kind kind = chat_kind(model->tok, tmpl);
	if (kind == CHAT_NONE)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"the %s model '%s' %s; only chatml and gemma templates are supported for now: pass a raw "
				"prompt",
				model->arch, model->name,
				tmpl ? "has a chat template that is neither chatml nor gemma" : "has no chat template");
	if (kind == CHAT_GEMMA)
		return chat_gemma(system, user, out);
	if (!system && tmpl)
		system = dflt = default_system(tmpl);

	static const char sys_open[] = "<|im_start|>system\n", user_open[] = "<|im_start|>user\n",
			  close[] = "<|im_end|>\n", asst[] = "<|im_start|>assistant\n";
	size_t n = strlen(user_open) + strlen(user) + strlen(close) + strlen(asst) + 1;
	if (system)
		n += strlen(sys_open) + strlen(system) + strlen(close);
	char *s = malloc(n);
	if (!s) {
		free(dflt);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory formatting a chat prompt of %zu bytes", n);
	}
	s[0] = '\0';
	if (system) {
		strcat(s, sys_open);
		strcat(s, system);
		strcat(s, close);
	}
	strcat(s, user_open);
	strcat(s, user);
	strcat(s, close);
	strcat(s, asst);
	free(dflt);
	*out = s;
	return HSQ_OK;
}
