/* error.c - status names and the per-thread error detail. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"

static _Thread_local char last_error[512];

const char *hsq_strerror(hsq_status status)
{
	switch (status) {
	case HSQ_OK: return "success";
	case HSQ_ERR_NOMEM: return "out of memory";
	case HSQ_ERR_IO: return "input/output error";
	case HSQ_ERR_FORMAT: return "malformed file";
	case HSQ_ERR_TRUNCATED: return "truncated file";
	case HSQ_ERR_UNSUPPORTED: return "unsupported";
	case HSQ_ERR_INVALID_ARG: return "invalid argument";
	case HSQ_ERR_CONTEXT_FULL: return "context full";
	case HSQ_ERR_MODEL_MISMATCH: return "model mismatch";
	case HSQ_ERR_CHECKSUM: return "checksum mismatch";
	case HSQ_ERR_EMPTY_INPUT: return "empty input";
	case HSQ_ERR_INTERNAL: return "internal error";
	}
	return "unknown status";
}

const char *hsq_last_error(void)
{
	return last_error;
}

const char *hsq_version(void)
{
	return HSQ_VERSION_STRING;
}

hsq_status hsq_fail(hsq_status status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	return status;
}

void hsq_clear_error(void)
{
	last_error[0] = '\0';
}

void hsq_free(void *ptr)
{
	free(ptr);
}
