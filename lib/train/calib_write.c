/* calib_write.c - writing hsq calibration files (calib_write_reader,
 * hsq_calibration_write); the format is specified in
 * man/hsq-calibration.5 and named in lib/learn/calib_format.h, and
 * lib/learn/calibration.c reads it.
 *
 * The file is built in memory (a reader is small: see calibration.c) and
 * written atomically, as snapshots are (common/atomic_write.h), the
 * sections first and the header last, so an interrupted file never
 * carries a valid magic. The same network and info text give
 * the same bytes: nothing in the file depends on the time or the host. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic_write.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"
#include "hsq.h"
#include "hsq_train.h"
#include "learn/calib_format.h"
#include "learn/reader_net.h"
#include "train/reader_trainer.h"

/* Copies a string into a NUL-padded field, truncating at a UTF-8 character
 * boundary so it stays NUL-terminated and valid. */
static void put_str(uint8_t *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n > cap - 1) {
		n = cap - 1;
		while (n > 0 && ((uint8_t)src[n] & 0xC0) == 0x80)
			n--;
	}
	memset(dst, 0, cap);
	if (n)
		memcpy(dst, src, n);
}

static void put_entry(uint8_t *e, const char *name, uint64_t offset, uint64_t size, uint32_t flags, uint32_t crc)
{
	memset(e, 0, CAL_ENTRY_SIZE);
	memcpy(e + CAL_E_NAME, name, strlen(name));
	put_u64(e + CAL_E_OFFSET, offset);
	put_u64(e + CAL_E_SIZE, size);
	put_u32(e + CAL_E_FLAGS, flags);
	put_u32(e + CAL_E_CRC, crc);
}

static uint64_t align_up(uint64_t v)
{
	return (v + CAL_ALIGN - 1) / CAL_ALIGN * CAL_ALIGN;
}

/* The net must be what a reader accepts for a model of mi's shape: the
 * same checks as calibration.c, as caller errors. */
static hsq_status check_net(const char *path, const hsq_model_info *mi, const reader_net *net)
{
	if (mi->n_layer < 1 || mi->n_layer > CAL_MAX_LAYERS || mi->n_embd < 1 || mi->n_embd > CAL_MAX_EMBD ||
	    mi->n_head_kv < 1 || mi->n_head_kv > CAL_MAX_HEAD_KV)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"cannot write calibration %s: a model of %d layers, hidden size %d and %d kv heads is outside what the format holds (1..%d, 1..%d, 1..%d)",
				path, mi->n_layer, mi->n_embd, mi->n_head_kv, CAL_MAX_LAYERS, CAL_MAX_EMBD, CAL_MAX_HEAD_KV);
	if (net->n_embd != mi->n_embd || net->n_in != mi->n_embd + READER_POS_FEATURES ||
	    net->n_out != mi->n_layer * mi->n_head_kv || net->tap_layer < 0 || net->tap_layer >= mi->n_layer ||
	    net->n_hidden < 1 || net->n_hidden > CAL_MAX_HIDDEN)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"cannot write calibration %s: the reader (layer %d, hidden size %d, %d inputs, %d hidden units, %d outputs) does not fit the model '%s' (%d layers, hidden size %d, %d kv heads; 1..%d hidden units)",
				path, net->tap_layer, net->n_embd, net->n_in, net->n_hidden, net->n_out,
				mi->name && mi->name[0] ? mi->name : "unnamed", mi->n_layer, mi->n_embd, mi->n_head_kv,
				CAL_MAX_HIDDEN);
	if (!net->w1 || !net->b1 || !net->w2 || !net->b2)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cannot write calibration %s: the reader has no weights", path);
	return HSQ_OK;
}

hsq_status calib_write_reader(const char *path, const hsq_model_info *mi, const reader_net *net, const char *info)
{
	hsq_status st = HSQ_OK;
	atomic_writer w = { .fd = -1 };
	uint8_t *buf = NULL;

	if (!path || !*path || !mi || !net)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "calib_write_reader: %s is missing",
				!path || !*path ? "the path" : !mi ? "the model" : "the reader");
	if ((st = check_net(path, mi, net)))
		return st;
	if (!info)
		info = "";
	size_t info_len = strlen(info), at = 0;
	if (info_len > CAL_MAX_INFO_SIZE)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cannot write calibration %s: the info text is %zu bytes, more than %llu",
				path, info_len, (unsigned long long)CAL_MAX_INFO_SIZE);
	int bad = calib_info_check((const uint8_t *)info, info_len, &at);
	if (bad)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cannot write calibration %s: the info text %s at byte %zu", path,
				bad == 1 ? "is not valid utf-8" : "holds a control character other than tab and newline", at);

	/* Layout: header, table (2 entries), info, reader; each section at a
	 * multiple of CAL_ALIGN, the gaps zero. */
	uint64_t n_w1 = (uint64_t)net->n_hidden * (uint64_t)net->n_in;
	uint64_t n_w2 = (uint64_t)net->n_out * (uint64_t)net->n_hidden;
	uint64_t n_floats = n_w1 + (uint64_t)net->n_hidden + n_w2 + (uint64_t)net->n_out;
	uint64_t reader_size = CAL_READER_HEAD_SIZE + 4 * n_floats;
	const int n_sections = 2;
	uint64_t head_size = CAL_HEADER_SIZE + (uint64_t)n_sections * CAL_ENTRY_SIZE;
	uint64_t info_off = align_up(head_size);
	uint64_t reader_off = align_up(info_off + info_len);
	uint64_t file_size = reader_off + reader_size;
	if (file_size > CAL_MAX_FILE_SIZE)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"cannot write calibration %s: a reader of %llu weights takes %llu bytes, more than the %llu a calibration file may hold",
				path, (unsigned long long)n_floats, (unsigned long long)file_size,
				(unsigned long long)CAL_MAX_FILE_SIZE);
	if (!(buf = calloc(1, (size_t)file_size))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory writing %s (%llu bytes)", path, (unsigned long long)file_size);
		goto done;
	}

	/* reader: head, then w1, b1, w2, b2; every value finite, as a reader
	 * demands. */
	uint8_t *r = buf + reader_off;
	put_u32(r + CAL_R_TAP_LAYER, (uint32_t)net->tap_layer);
	put_u32(r + CAL_R_N_EMBD, (uint32_t)net->n_embd);
	put_u32(r + CAL_R_N_IN, (uint32_t)net->n_in);
	put_u32(r + CAL_R_N_HIDDEN, (uint32_t)net->n_hidden);
	put_u32(r + CAL_R_N_OUT, (uint32_t)net->n_out);
	put_u32(r + CAL_R_N_LAYER, (uint32_t)mi->n_layer);
	put_u32(r + CAL_R_N_HEAD_KV, (uint32_t)mi->n_head_kv);
	put_u32(r + CAL_R_ACTIVATION, CAL_ACT_SILU);
	put_u32(r + CAL_R_POS_FEATURES, CAL_POS_FEATURES);
	put_u32(r + CAL_R_PRIOR, net->prior_obs ? CAL_PRIOR_OBS : CAL_PRIOR_NONE);
	const struct {
		const char *name;
		const float *src;
		uint64_t n;
	} arr[4] = { { "w1", net->w1, n_w1 }, { "b1", net->b1, (uint64_t)net->n_hidden },
		     { "w2", net->w2, n_w2 }, { "b2", net->b2, (uint64_t)net->n_out } };
	uint8_t *q = r + CAL_READER_HEAD_SIZE;
	for (int a = 0; a < 4; a++)
		for (uint64_t i = 0; i < arr[a].n; i++, q += 4) {
			if (!isfinite(arr[a].src[i])) {
				st = hsq_fail(HSQ_ERR_INVALID_ARG,
					      "cannot write calibration %s: reader weight %s[%llu] is not finite (the training diverged?)",
					      path, arr[a].name, (unsigned long long)i);
				goto done;
			}
			put_f32(q, arr[a].src[i]);
		}
	memcpy(buf + info_off, info, info_len);

	/* Header and table. */
	uint8_t *h = buf;
	memcpy(h + CAL_H_MAGIC, CAL_MAGIC, CAL_MAGIC_LEN);
	put_u16(h + CAL_H_VERSION_MAJOR, CAL_VERSION_MAJOR);
	put_u16(h + CAL_H_VERSION_MINOR, CAL_VERSION_MINOR);
	put_u32(h + CAL_H_HEADER_SIZE, CAL_HEADER_SIZE);
	put_u32(h + CAL_H_FLAGS, 0);
	put_u64(h + CAL_H_FILE_SIZE, file_size);
	put_u32(h + CAL_H_SECTION_COUNT, (uint32_t)n_sections);
	put_u32(h + CAL_H_ENTRY_SIZE, CAL_ENTRY_SIZE);
	put_u64(h + CAL_H_TABLE_OFFSET, CAL_HEADER_SIZE);
	memcpy(h + CAL_H_IDENTITY, mi->identity, 32);
	put_str(h + CAL_H_ARCH, CAL_ARCH_LEN, mi->architecture);
	put_str(h + CAL_H_NAME, CAL_NAME_LEN, mi->name);
	put_u32(h + CAL_H_N_LAYER, (uint32_t)mi->n_layer);
	put_u32(h + CAL_H_N_EMBD, (uint32_t)mi->n_embd);
	put_u32(h + CAL_H_N_HEAD_KV, (uint32_t)mi->n_head_kv);
	put_entry(h + CAL_HEADER_SIZE, CAL_SEC_INFO, info_off, info_len, 0, crc32c_update(0, buf + info_off, info_len));
	put_entry(h + CAL_HEADER_SIZE + CAL_ENTRY_SIZE, CAL_SEC_READER, reader_off, reader_size, CAL_SECTION_REQUIRED,
		  crc32c_update(0, r, (size_t)reader_size));
	put_u32(h + CAL_H_CRC, crc32c_update(0, h, (size_t)head_size)); /* the CRC field is still 0 */

	/* Sections first, header and table last. */
	if ((st = atomic_writer_open(&w, path, "calibration", "model.hsqc")) ||
	    (st = atomic_writer_write_at(&w, head_size, buf + head_size, (size_t)(file_size - head_size))) ||
	    (st = atomic_writer_write_at(&w, 0, buf, (size_t)head_size)) || (st = atomic_writer_commit(&w)))
		goto done;
done:
	atomic_writer_abort(&w); /* after a commit only frees; otherwise removes the temporary */
	free(buf);
	return st;
}

hsq_status hsq_calibration_write(const char *path, const hsq_model *model, const hsq_reader_trainer *tr,
				 const char *info)
{
	if (!model || !tr)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_calibration_write: the %s is missing", !model ? "model" : "trainer");
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	return calib_write_reader(path, &mi, &tr->net, info);
}
