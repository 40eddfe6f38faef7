/* calibration.h - a calibration file loaded into memory (internal). The
 * normative description of the file is man/hsq-calibration.5; calib_format.h
 * names its constants and offsets. */
#ifndef HSQ_CALIBRATION_H
#define HSQ_CALIBRATION_H

#include "hsq.h"
#include "learn/reader_net.h"

struct hsq_calibration {
	hsq_calibration_info info; /* what hsq_calibration_get_info returns; its
				    * strings point into the fields below */
	char arch[32];             /* NUL-terminated */
	char name[128];            /* NUL-terminated, made printable */
	char *info_text;           /* the info section, NUL-terminated */
	reader_net reader;         /* owns its four weight arrays */
};

#endif
