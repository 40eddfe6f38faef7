/* svg.h - the SVG writer of the hsq tools: the frame and text of every
 * SVG document they write, and the charts of hsq-eval's reports. */
#ifndef HSQ_CMD_SVG_H
#define HSQ_CMD_SVG_H

#include <stdio.h>

/* Text content (or an attribute value), XML-escaped; control characters
 * and bytes that are not valid UTF-8 become '?'. */
void svg_text(FILE *f, const char *s);
/* The <svg> element of a w x h document (with a viewBox when asked), in
 * sans-serif of font_size; svg_end closes it. */
void svg_begin(FILE *f, double w, double h, int font_size, int viewbox);
/* A background of color over the whole document. */
void svg_background(FILE *f, const char *color);
void svg_end(FILE *f);

/* ------------------------------------------------------------- charts */

/* A heatmap of values in [0, 1] (NaN: no data): rows x cols cells,
 * labelled; each cell shows its text. */
void svg_heatmap(FILE *f, const char *title, int rows, const char *const *row_labels, const char *row_axis,
		 int cols, const char *const *col_labels, const char *col_axis, const double *values,
		 const char *const *cell_text);
/* One row per item: an estimate with its interval as a whisker, and a
 * dashed reference line at ref (NaN: none). */
void svg_intervals(FILE *f, const char *title, const char *axis, int n, const char *const *labels,
		   const double *est, const double *lo, const double *hi, double ref);
/* Lines y[s][i] over x[i], one per series (NaN skips a point). */
void svg_lines(FILE *f, const char *title, const char *x_axis, const char *y_axis, int n_x, const double *x,
	       int n_series, const char *const *names, const double *y);
/* Panels of up to 4 a row, each titled: log10 of mean[panel][series][i]
 * over the integers x[i], one line per series in palette color
 * colors[series], its interval [lo, hi] as whiskers (values that are not
 * positive are left out); under them the legend text and the series. */
void svg_log_panels(FILE *f, int n_panels, const char *const *panel_titles, int n_x, const int *x, const char *x_axis,
		    int n_series, const char *const *names, const int *colors, const double *mean, const double *lo,
		    const double *hi, const char *legend);

#endif
