/* svg.c - the SVG writer of the hsq tools: plain SVG 1.1 that any browser
 * renders, written with fprintf, no library. The document frame and its
 * text for every SVG a tool writes (hsq-inspect's fetch heatmap too), and
 * the charts of hsq-eval: a heatmap (needle success over depth x length),
 * intervals against a reference (perplexity ratio to full), lines (decode
 * speed over context) and log-scale panels (codec error over bits), with
 * the numbers also in the Markdown or CSV next to them. */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "svg.h"

static const char *const palette[] = { "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02" };
#define N_PALETTE (sizeof palette / sizeof *palette)

void svg_text(FILE *f, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = cli_utf8_len(s + i, n - i);
		if (!len || (len == 1 && (c < 0x20 || c == 0x7f))) {
			fputc('?', f);
			i++;
		} else if (len > 1) {
			fwrite(s + i, 1, len, f);
			i += len;
		} else {
			if (c == '&')
				fputs("&amp;", f);
			else if (c == '<')
				fputs("&lt;", f);
			else if (c == '>')
				fputs("&gt;", f);
			else if (c == '"')
				fputs("&quot;", f);
			else
				fputc(c, f);
			i++;
		}
	}
}

void svg_begin(FILE *f, double w, double h, int font_size, int viewbox)
{
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" ", w, h);
	if (viewbox)
		fprintf(f, "viewBox=\"0 0 %.0f %.0f\" ", w, h);
	fprintf(f, "font-family=\"sans-serif\" font-size=\"%d\">\n", font_size);
}

void svg_background(FILE *f, const char *color)
{
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"%s\"/>\n", color);
}

void svg_end(FILE *f)
{
	fprintf(f, "</svg>\n");
}

/* A chart of hsq-eval's: w x h, white, its title centred on top. */
static void chart_open(FILE *f, double w, double h, const char *title)
{
	svg_begin(f, w, h, 12, 1);
	svg_background(f, "white");
	fprintf(f, "<text x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"bold\" text-anchor=\"middle\">", w / 2);
	svg_text(f, title);
	fprintf(f, "</text>\n");
}

static void label(FILE *f, double x, double y, const char *anchor, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
	svg_text(f, s);
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
	chart_open(f, w < 320 ? 320 : w, h, title);
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
	svg_text(f, row_axis);
	fprintf(f, "</text>\n");
	svg_end(f);
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
	chart_open(f, w, h, title);
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
	svg_end(f);
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
	chart_open(f, ml + pw + mr, mt + ph + mb, title);
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
	svg_text(f, y_axis);
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
	svg_end(f);
}

void svg_log_panels(FILE *f, int n_panels, const char *const *panel_titles, int n_x, const int *x, const char *x_axis,
		    int n_series, const char *const *names, const int *colors, const double *mean, const double *lo,
		    const double *hi, const char *legend)
{
	const int cols = n_panels < 4 ? n_panels : 4, rows = (n_panels + cols - 1) / cols;
	const double pw = 300, ph = 240, ml = 58, mr = 12, mt = 28, mb = 40;
	double width = cols * pw, height = rows * ph + 40;
	svg_begin(f, width, height, 11, 0);
	svg_background(f, "white");
	int xmin = 99, xmax = 0;
	for (int i = 0; i < n_x; i++) {
		xmin = x[i] < xmin ? x[i] : xmin;
		xmax = x[i] > xmax ? x[i] : xmax;
	}
	if (xmax == xmin)
		xmax = xmin + 1;
	for (int pn = 0; pn < n_panels; pn++) {
		double x0 = (pn % cols) * pw + ml, y0 = (pn / cols) * ph + mt;
		double w = pw - ml - mr, h = ph - mt - mb;
		/* y range: whole decades around every positive mean and interval */
		double ylo = INFINITY, yhi = -INFINITY;
		for (int s = 0; s < n_series; s++)
			for (int i = 0; i < n_x; i++) {
				size_t k = ((size_t)pn * n_series + s) * n_x + i;
				double v[3] = { mean[k], lo[k], hi[k] };
				for (int j = 0; j < 3; j++)
					if (v[j] > 0 && isfinite(v[j])) {
						ylo = fmin(ylo, log10(v[j]));
						yhi = fmax(yhi, log10(v[j]));
					}
			}
		if (!isfinite(ylo)) {
			ylo = -1;
			yhi = 0;
		}
		ylo = floor(ylo);
		yhi = ceil(yhi);
		if (yhi <= ylo)
			yhi = ylo + 1;
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", x0, y0 - 10);
		svg_text(f, panel_titles[pn]);
		fprintf(f, "</text>\n");
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
			   "stroke=\"#888\"/>\n", x0, y0, w, h);
		for (int dec = (int)ylo; dec <= (int)yhi; dec++) {
			double y = y0 + h - (dec - ylo) / (yhi - ylo) * h;
			fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
				   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
				x0, x0 + w, y, y, x0 - 4, y + 4, dec);
		}
		for (int i = 0; i < n_x; i++) {
			double px = x0 + (double)(x[i] - xmin) / (xmax - xmin) * w;
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", px, y0 + h + 14, x[i]);
		}
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x0 + w / 2, y0 + h + 30);
		svg_text(f, x_axis);
		fprintf(f, "</text>\n");
		for (int s = 0; s < n_series; s++) {
			const char *col = palette[colors[s] % N_PALETTE];
			const size_t row = ((size_t)pn * n_series + s) * n_x;
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
			for (int i = 0; i < n_x; i++) {
				double m = mean[row + i];
				if (!(m > 0) || !isfinite(m))
					continue;
				double px = x0 + (double)(x[i] - xmin) / (xmax - xmin) * w;
				double py = y0 + h - (log10(m) - ylo) / (yhi - ylo) * h;
				fprintf(f, "%.1f,%.1f ", px, py);
			}
			fprintf(f, "\"/>\n");
			for (int i = 0; i < n_x; i++) {
				double m = mean[row + i], a = lo[row + i], b = hi[row + i];
				if (!(m > 0) || !isfinite(m))
					continue;
				double px = x0 + (double)(x[i] - xmin) / (xmax - xmin) * w;
				double py = y0 + h - (log10(m) - ylo) / (yhi - ylo) * h;
				fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", px, py, col);
				if (a > 0 && isfinite(b)) {
					double ya = y0 + h - (log10(a) - ylo) / (yhi - ylo) * h;
					double yb = y0 + h - (log10(b) - ylo) / (yhi - ylo) * h;
					fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>",
						px, px, ya, yb, col);
				}
				fputc('\n', f);
			}
		}
	}
	double ly = rows * ph + 20;
	fprintf(f, "<text x=\"10\" y=\"%.1f\">", ly);
	svg_text(f, legend);
	fprintf(f, "</text>\n");
	for (int s = 0; s < n_series; s++) {
		double lx = 260 + s * 110;
		fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
			   "<text x=\"%.0f\" y=\"%.1f\">",
			lx, lx + 24, ly - 4, ly - 4, palette[colors[s] % N_PALETTE], lx + 30, ly);
		svg_text(f, names[s]);
		fprintf(f, "</text>\n");
	}
	svg_end(f);
}
