/* codec_study.h - internals shared by the study runner and its findings. */
#ifndef HSQ_CODEC_STUDY_H
#define HSQ_CODEC_STUDY_H
#include "hsq_eval.h"

struct hsq_study {
	hsq_study_params p;
	double *samples; /* [stream][regime][codec][bits][metric][seed] */
	double *bpv;     /* [stream][regime][codec][bits][seed]: bits per value, K and V mean */
	double *deff;    /* [stream][regime][seed]: d_eff of the K calibration (0: no SQ) */
};

/* Two-sided 97.5% quantile of Student's t with df degrees of freedom. */
double hsq_t975(double df);
/* Index of kind / regime / bits in the study's arrays, or -1. */
int hsq_study_codec_index(const hsq_study *s, hsq_codec_kind kind);
int hsq_study_regime_index(const hsq_study *s, hsq_regime regime);
int hsq_study_bits_index(const hsq_study *s, int bits);

#endif
