/* plot.c — the SVG bar chart of plot.h.
 *
 * No font metrics are at hand, so text widths are estimated at 0.6 em per character (a
 * little wide for most sans-serif faces): the layout leaves room rather than overlap.
 */
#include "plot.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Sizes in px. */
#define FONT 12.0        /* axis ticks, group labels, legend */
#define TITLE_FONT 17.0
#define SUB_FONT 12.0
#define VALUE_FONT 10.0
#define EM_WIDTH 0.6     /* estimated character width per px of font size */
#define BAR_W 24.0
#define BAR_GAP 2.0      /* between the bars of a group */
#define GROUP_PAD 22.0   /* between groups */
#define PLOT_H 340.0
#define MARGIN 16.0
#define AXIS_LEFT 64.0   /* tick labels and the y caption */
#define LABEL_TURN 35.0  /* degrees, for group labels wider than their group */
#define GROUP_MAX_W 320.0 /* how far groups widen to fill a chart as wide as its title */

static const char *const palette[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"};
enum { N_COLOURS = sizeof palette / sizeof *palette };

static double text_width(size_t chars, double font) { return (double)chars * EM_WIDTH * font; }

/* Writes s[0 .. n) with the XML special characters escaped. */
static void put_escaped(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n && s[i]; i++) {
    switch (s[i]) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(s[i], f);
    }
  }
}

/* The number of '\n'-separated lines of s and the length of the longest. */
static int text_lines(const char *s, size_t *longest) {
  int lines = 1;
  size_t run = 0;
  *longest = 0;
  for (; s && *s; s++) {
    if (*s == '\n') lines++, run = 0;
    else if (++run > *longest) *longest = run;
  }
  return lines;
}

static bool present(double v) { return v == v && v >= 0; }

/* A value as the bar's label: three significant digits at most, none wasted. */
static void format_value(double v, char *out, size_t len) {
  if (v >= 100) snprintf(out, len, "%.0f", v);
  else if (v >= 1) snprintf(out, len, "%.1f", v);
  else snprintf(out, len, "%.2g", v);
}

/* ---- the layout -------------------------------------------------------------------------- */

typedef struct layout {
  double width, height;
  double left, plot_top, plot_w, group_w;
  double bar_w, bars_w; /* one bar; a group's bars with their gaps */
  double y_top, y_step; /* the axis' top value and tick step */
  bool turn;            /* group labels turned by LABEL_TURN */
  int sub_lines;
} layout;

/* The left edge of group g's first bar: the bars sit in the middle of their group. */
static double x_of_group(const layout *l, int g) { return l->left + g * l->group_w + (l->group_w - l->bars_w) / 2; }
static double y_of(const layout *l, double v) { return l->plot_top + PLOT_H * (1 - v / l->y_top); }

/* Round ticks: a step of 1, 2, 2.5 or 5 times a power of ten, about six of them, and room
 * above the highest value for its label. */
static void y_scale(const vc_bar_chart *c, layout *l) {
  double most = 0;
  for (int i = 0; i < c->n_groups * c->n_series; i++) {
    if (present(c->values[i]) && c->values[i] > most) most = c->values[i];
    if (c->targets && present(c->targets[i]) && c->targets[i] > most) most = c->targets[i];
  }
  if (!(most > 0) || !isfinite(most)) most = 1;
  const double raw = most / 6, mag = pow(10, floor(log10(raw)));
  static const double steps[] = {1, 2, 2.5, 5, 10};
  l->y_step = 10 * mag;
  for (int i = 0; i < 5; i++)
    if (steps[i] * mag >= raw) {
      l->y_step = steps[i] * mag;
      break;
    }
  l->y_top = l->y_step * ceil(most * 1.08 / l->y_step);
}

static double legend_width(const vc_bar_chart *c, bool marks) {
  double w = 0;
  for (int s = 0; s < c->n_series; s++) w += 18 + text_width(strlen(c->series[s]), FONT) + 18;
  if (marks && c->target_name) w += 24 + text_width(strlen(c->target_name), FONT) + 18;
  return w;
}

static bool any_target(const vc_bar_chart *c) {
  for (int i = 0; c->targets && i < c->n_groups * c->n_series; i++)
    if (present(c->targets[i]) && c->targets[i] > 0) return true;
  return false;
}

static void lay_out(const vc_bar_chart *c, layout *l) {
  memset(l, 0, sizeof *l);
  y_scale(c, l);
  size_t sub_longest = 0;
  l->sub_lines = c->subtitle ? text_lines(c->subtitle, &sub_longest) : 0;
  const double text_w = fmax(text_width(c->title ? strlen(c->title) : 0, TITLE_FONT),
                             fmax(text_width(sub_longest, SUB_FONT), legend_width(c, any_target(c))));
  /* Groups as narrow as their bars allow, or wider up to GROUP_MAX_W when the title and
   * legend make the chart wide anyway. */
  l->bars_w = c->n_series * BAR_W + (c->n_series - 1) * BAR_GAP;
  l->left = MARGIN + AXIS_LEFT;
  l->group_w = fmin(fmax(l->bars_w + GROUP_PAD, (MARGIN + text_w - l->left) / c->n_groups), GROUP_MAX_W);
  l->group_w = fmax(l->group_w, l->bars_w + GROUP_PAD);
  l->plot_w = c->n_groups * l->group_w;
  /* wider groups get wider bars, up to twice the narrowest */
  l->bar_w = fmin(2 * BAR_W, (l->group_w - GROUP_PAD - (c->n_series - 1) * BAR_GAP) / c->n_series);
  l->bars_w = c->n_series * l->bar_w + (c->n_series - 1) * BAR_GAP;
  /* Group labels: level if every line fits its group, else turned (as one line). */
  size_t widest = 0;
  int lines = 1;
  for (int g = 0; g < c->n_groups; g++) {
    size_t longest;
    const int n = text_lines(c->groups[g], &longest);
    lines = n > lines ? n : lines;
    widest = longest > widest ? longest : widest;
  }
  l->turn = text_width(widest, FONT) > l->group_w - 6;
  double label_h = lines * (FONT + 3) + 10;
  if (l->turn) {
    const double a = LABEL_TURN * M_PI / 180;
    label_h = 0;
    for (int g = 0; g < c->n_groups; g++) {
      const double w = text_width(strlen(c->groups[g]), FONT);
      label_h = fmax(label_h, w * sin(a) + FONT * cos(a) + 12);
      /* a turned label reaches left of its group: the first ones may need a wider margin */
      l->left = fmax(l->left, w * cos(a) - (g * l->group_w + l->group_w / 2) + MARGIN);
    }
  }
  l->plot_top = MARGIN + TITLE_FONT + 8 + l->sub_lines * (SUB_FONT + 5) + 12 + FONT + 18;
  l->width = fmax(l->left + l->plot_w + MARGIN, 2 * MARGIN + text_w);
  l->height = l->plot_top + PLOT_H + label_h + MARGIN;
}

/* ---- the pieces -------------------------------------------------------------------------- */

static void put_header(FILE *f, const vc_bar_chart *c, const layout *l) {
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
          "font-size=\"%.0f\">\n",
          ceil(l->width), ceil(l->height), ceil(l->width), ceil(l->height), FONT);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  double y = MARGIN + TITLE_FONT;
  fprintf(f, "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" font-weight=\"bold\">", MARGIN, y,
          TITLE_FONT);
  put_escaped(f, c->title ? c->title : "", (size_t)-1);
  fprintf(f, "</text>\n");
  y += 8;
  for (const char *s = c->subtitle; s && l->sub_lines;) {
    const char *nl = strchr(s, '\n');
    y += SUB_FONT + 5;
    fprintf(f, "<text class=\"subtitle\" x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" fill=\"#444\">", MARGIN, y,
            SUB_FONT);
    put_escaped(f, s, nl ? (size_t)(nl - s) : (size_t)-1);
    fprintf(f, "</text>\n");
    s = nl ? nl + 1 : NULL;
  }
}

static void put_legend(FILE *f, const vc_bar_chart *c, const layout *l) {
  double x = MARGIN;
  const double y = l->plot_top - 18;
  for (int s = 0; s < c->n_series; s++) {
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, y - 10,
            palette[s % N_COLOURS]);
    fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">", x + 18, y);
    put_escaped(f, c->series[s], (size_t)-1);
    fprintf(f, "</text>\n");
    x += 18 + text_width(strlen(c->series[s]), FONT) + 18;
  }
  if (!any_target(c) || !c->target_name) return;
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" stroke-width=\"2\" "
             "stroke-dasharray=\"4 2\"/>",
          x, y - 4, x + 18, y - 4);
  fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">", x + 24, y);
  put_escaped(f, c->target_name, (size_t)-1);
  fprintf(f, "</text>\n");
}

static void put_axes(FILE *f, const vc_bar_chart *c, const layout *l) {
  const double x0 = l->left, x1 = l->left + l->plot_w, bottom = l->plot_top + PLOT_H;
  for (int t = 0; t * l->y_step <= l->y_top * (1 + 1e-9); t++) {
    const double v = t * l->y_step, y = y_of(l, v);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", x0, y, x1, y,
            t ? "#e4e4e4" : "#222");
    fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y + 4, v);
  }
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>\n", x0, l->plot_top, x0,
          bottom);
  const double cx = x0 - 48, cy = l->plot_top + PLOT_H / 2;
  fprintf(f, "<text class=\"ylabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">",
          cx, cy, cx, cy);
  put_escaped(f, c->y_label ? c->y_label : "", (size_t)-1);
  fprintf(f, "</text>\n");
}

static void put_group_label(FILE *f, const char *label, const layout *l, double cx) {
  const double top = l->plot_top + PLOT_H;
  if (l->turn) { /* one line, its end under the group */
    fprintf(f, "<text class=\"group\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" transform=\"rotate(-%.0f %.1f %.1f)\">",
            cx, top + 14, LABEL_TURN, cx, top + 14);
    for (const char *s = label; *s; s++) {
      if (*s == '\n') fputc(' ', f);
      else put_escaped(f, s, 1);
    }
    fprintf(f, "</text>\n");
    return;
  }
  fprintf(f, "<text class=\"group\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", cx, top + FONT + 6);
  int line = 0;
  for (const char *s = label; s;) {
    const char *nl = strchr(s, '\n');
    fprintf(f, "<tspan x=\"%.1f\" dy=\"%.0f\">", cx, line++ ? FONT + 3 : 0);
    put_escaped(f, s, nl ? (size_t)(nl - s) : (size_t)-1);
    fprintf(f, "</tspan>");
    s = nl ? nl + 1 : NULL;
  }
  fprintf(f, "</text>\n");
}

static void put_bar(FILE *f, const vc_bar_chart *c, const layout *l, int g, int s) {
  const double v = c->values[g * c->n_series + s], x = x_of_group(l, g) + s * (l->bar_w + BAR_GAP);
  const double t = c->targets ? c->targets[g * c->n_series + s] : NAN;
  const bool mark = present(t) && t > 0;
  char text[32];
  if (present(v)) {
    const double y = y_of(l, v);
    format_value(v, text, sizeof text);
    fprintf(f, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, y,
            l->bar_w, l->plot_top + PLOT_H - y, palette[s % N_COLOURS]);
    put_escaped(f, c->groups[g], (size_t)-1);
    fprintf(f, ", ");
    put_escaped(f, c->series[s], (size_t)-1);
    fprintf(f, ": %s</title></rect>", text);
    /* The value over its bar, smaller when it would run into the neighbour, and over the
     * target mark when the mark would cross it. */
    const double fit = (l->bar_w + BAR_GAP) / (EM_WIDTH * (double)strlen(text));
    const double ty = mark ? y_of(l, t) : INFINITY, base = ty < y + 4 && ty > y - VALUE_FONT - 4 ? ty - 2 : y;
    fprintf(f, "<text class=\"value\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%.1f\">%s</text>\n",
            x + l->bar_w / 2, base - 3, fmax(7, fmin(VALUE_FONT, fit)), text);
  }
  if (!mark) return;
  const double y = y_of(l, t);
  format_value(t, text, sizeof text);
  fprintf(f, "<line class=\"target\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
             "stroke-width=\"2\" stroke-dasharray=\"4 2\"><title>target %s</title></line>\n",
          x, y, x + l->bar_w, y, text);
}

/* ---- the chart --------------------------------------------------------------------------- */

int vc_bar_chart_svg(FILE *f, const vc_bar_chart *c, char *err, size_t err_len) {
  if (c->n_groups < 1 || c->n_series < 1) {
    snprintf(err, err_len, "a bar chart needs at least one group and one series (%d groups, %d series)", c->n_groups,
             c->n_series);
    return -1;
  }
  layout l;
  lay_out(c, &l);
  put_header(f, c, &l);
  put_legend(f, c, &l);
  put_axes(f, c, &l);
  for (int g = 0; g < c->n_groups; g++) {
    for (int s = 0; s < c->n_series; s++) put_bar(f, c, &l, g, s);
    put_group_label(f, c->groups[g], &l, x_of_group(&l, g) + l.bars_w / 2);
  }
  fprintf(f, "</svg>\n");
  if (fflush(f) || ferror(f)) {
    snprintf(err, err_len, "write failed");
    return -1;
  }
  return 0;
}
