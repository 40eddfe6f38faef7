/* error.h - recording the detail of a failure for hsq_last_error(). */
#ifndef HSQ_ERROR_H
#define HSQ_ERROR_H
#include "hsq.h"

/* Formats a lowercase one-line detail into this thread's error buffer and
 * returns status, so callers write: return hsq_fail(HSQ_ERR_IO, "...", ...). */
hsq_status hsq_fail(hsq_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void hsq_clear_error(void);

#endif
