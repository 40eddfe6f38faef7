/* report.c - hand-written SVG plots for hsq-eval's reports: a heatmap
 * (needle success over depth x length), intervals against a reference
 * (perplexity ratio to full), and lines (decode speed over context). No
 * library: plain SVG 1.1 that any browser renders, with the numbers also
 * in the Markdown next to them. */
#include <math.h>
#include <string.h>

#include "eval.h"

static const char *const palette[] = { "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02" };
#define N_PALETTE (sizeof palette / sizeof *palette)

/* Text content, XML-escaped. */
static void put_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

static void svg_open(FILE *f, double w, double h, const char *title)
{
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		w, h, w, h);
	fprintf(f, "<text x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"bold\" text-anchor=\"middle\">", w / 2);
	put_text(f, title);
	fprintf(f, "</text>\n");
}

static void label(FILE *f, double x, double y, const char *anchor, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
	put_text(f, s);
	fprintf(f, "</text>\n");
}

/* Red (0) - yellow (0.5) - green (1). */
static void heat_color(double v, char out[8])
{
	static const double stops[3][3] = { { 215, 48, 39 }, { 254, 224, 139 }, { 26, 152, 80 } };
	if (isnan(v)) {
		strcpy(out, "#dddddd");
		return;
	}
	v = v < 0 ? 0 : v > 1 ? 1 : v;
	int s = v < 0.5 ? 0 : 1;
	double t = (v - 0.5 * s) * 2;
	int rgb[3];
	for (int k = 0; k < 3; k++)
		rgb[k] = (int)lround(stops[s][k] + t * (stops[s + 1][k] - stops[s][k]));
	snprintf(out, 8, "#%02x%02x%02x", rgb[0] & 255, rgb[1] & 255, rgb[2] & 255);
}

void svg_heatmap(FILE *f, const char *title, int rows, const char *const *row_labels, const char *row_axis,
		 int cols, const char *const *col_labels, const char *col_axis, const double *values,
		 const char *const *cell_text)
{
	const double cw = 72, ch = 36, ml = 90, mt = 44, mb = 56;
	double w = ml + cols * cw + 20, h = mt + rows * ch + mb;
	svg_open(f, w < 320 ? 320 : w, h, title);
	for (int r = 0; r < rows; r++) {
		double y = mt + r * ch;
		label(f, ml - 8, y + ch / 2 + 4, "end", row_labels[r]);
		for (int c = 0; c < cols; c++) {
			char col[8];
			double v = values[r * cols + c];
			heat_color(v, col);
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\"/>\n",
				ml + c * cw, y, cw, ch, col);
			label(f, ml + c * cw + cw / 2, y + ch / 2 + 4, "middle", cell_text[r * cols + c]);
		}
	}
	for (int c = 0; c < cols; c++)
		label(f, ml + c * cw + cw / 2, mt + rows * ch + 16, "middle", col_labels[c]);
	label(f, ml + cols * cw / 2, mt + rows * ch + 38, "middle", col_axis);
	fprintf(f, "<text x=\"14\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 14 %.1f)\">", mt + rows * ch / 2,
		mt + rows * ch / 2);
	put_text(f, row_axis);
	fprintf(f, "</text>\n</svg>\n");
}

/* A round step for about n ticks over span. */
static double tick_step(double span, int n)
{
	double raw = span / n, mag = pow(10, floor(log10(raw))), r = raw / mag;
	return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

void svg_intervals(FILE *f, const char *title, const char *axis, int n, const char *const *labels,
		   const double *est, const double *lo, const double *hi, double ref)
{
	const double ml = 110, mr = 30, mt = 40, rh = 30, mb = 50, pw = 420;
	double a = isfinite(ref) ? ref : INFINITY, b = isfinite(ref) ? ref : -INFINITY;
	for (int i = 0; i < n; i++) {
		double v[3] = { est[i], lo[i], hi[i] };
		for (int k = 0; k < 3; k++)
			if (isfinite(v[k])) {
				a = fmin(a, v[k]);
				b = fmax(b, v[k]);
			}
	}
	if (!isfinite(a)) {
		a = 0;
		b = 1;
	}
	double pad = (b - a) * 0.08 + 1e-9 * (fabs(a) + 1);
	a -= pad;
	b += pad;
	double w = ml + pw + mr, h = mt + n * rh + mb;
	svg_open(f, w, h, title);
	double step = tick_step(b - a, 5);
	for (double t = ceil(a / step) * step; t <= b; t += step) {
		double x = ml + (t - a) / (b - a) * pw;
		char s[32];
		snprintf(s, sizeof s, "%.4g", fabs(t) < step * 1e-6 ? 0.0 : t);
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x, x, mt,
			mt + n * rh);
		label(f, x, mt + n * rh + 16, "middle", s);
	}
	label(f, ml + pw / 2, mt + n * rh + 38, "middle", axis);
	if (isfinite(ref)) {
		double x = ml + (ref - a) / (b - a) * pw;
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n",
			x, x, mt - 6, mt + n * rh);
	}
	for (int i = 0; i < n; i++) {
		double y = mt + i * rh + rh / 2;
		const char *col = palette[i % N_PALETTE];
		label(f, ml - 8, y + 4, "end", labels[i]);
		if (isfinite(lo[i]) && isfinite(hi[i]))
			fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
				ml + (lo[i] - a) / (b - a) * pw, ml + (hi[i] - a) / (b - a) * pw, y, y, col);
		if (isfinite(est[i]))
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", ml + (est[i] - a) / (b - a) * pw,
				y, col);
	}
	fprintf(f, "</svg>\n");
}

void svg_lines(FILE *f, const char *title, const char *x_axis, const char *y_axis, int n_x, const double *x,
	       int n_series, const char *const *names, const double *y)
{
	const double ml = 70, mr = 130, mt = 40, mb = 50, pw = 420, ph = 240;
	double x0 = INFINITY, x1 = -INFINITY, y1 = 0;
	for (int i = 0; i < n_x; i++) {
		x0 = fmin(x0, x[i]);
		x1 = fmax(x1, x[i]);
		for (int s = 0; s < n_series; s++)
			if (isfinite(y[s * n_x + i]))
				y1 = fmax(y1, y[s * n_x + i]);
	}
	if (!(x1 > x0)) {
		x0 -= 1;
		x1 += 1;
	}
	y1 = y1 > 0 ? y1 * 1.1 : 1;
	svg_open(f, ml + pw + mr, mt + ph + mb, title);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", ml, mt,
		pw, ph);
	double step = tick_step(y1, 5);
	for (double t = 0; t <= y1; t += step) {
		double py = mt + ph - t / y1 * ph;
		char s[32];
		snprintf(s, sizeof s, "%.4g", t);
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", ml, ml + pw, py, py);
		label(f, ml - 6, py + 4, "end", s);
	}
	for (int i = 0; i < n_x; i++) {
		char s[32];
		snprintf(s, sizeof s, "%.6g", x[i]);
		label(f, ml + (x[i] - x0) / (x1 - x0) * pw, mt + ph + 16, "middle", s);
	}
	label(f, ml + pw / 2, mt + ph + 38, "middle", x_axis);
	fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">", mt + ph / 2,
		mt + ph / 2);
	put_text(f, y_axis);
	fprintf(f, "</text>\n");
	for (int s = 0; s < n_series; s++) {
		const char *col = palette[s % N_PALETTE];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
		for (int i = 0; i < n_x; i++)
			if (isfinite(y[s * n_x + i]))
				fprintf(f, "%.1f,%.1f ", ml + (x[i] - x0) / (x1 - x0) * pw, mt + ph - y[s * n_x + i] / y1 * ph);
		fprintf(f, "\"/>\n");
		for (int i = 0; i < n_x; i++)
			if (isfinite(y[s * n_x + i]))
				fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
					ml + (x[i] - x0) / (x1 - x0) * pw, mt + ph - y[s * n_x + i] / y1 * ph, col);
		double ly = mt + 14 + s * 18;
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
			ml + pw + 12, ml + pw + 36, ly - 4, ly - 4, col);
		label(f, ml + pw + 42, ly, "start", names[s]);
	}
	fprintf(f, "</svg>\n");
}
