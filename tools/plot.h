/* plot.h — grouped bar charts as plain SVG (`voxconv bench --plot`).
 *
 * One group of bars per category (a benchmark case), one bar per series in every group
 * (inference, training), a y axis from 0 with round ticks and grid lines, a legend, a title,
 * the value above each bar, and optional target marks: a dashed line across a bar at the
 * value it should reach. The file is self-contained SVG 1.1 (no script, no external font or
 * style sheet), so browsers and image viewers open it. Its size follows the content: the
 * width grows with the groups, the bottom margin with the longest group label, and labels
 * too wide for their group are turned 35 degrees.
 *
 * Every bar is a <rect class="bar"> with a <title> (its tooltip), every group label a
 * <text class="group">, every target mark a <line class="target">, so a test can count them.
 */
#ifndef VC_TOOLS_PLOT_H
#define VC_TOOLS_PLOT_H

#include <stddef.h>
#include <stdio.h>

typedef struct vc_bar_chart {
  const char *title;
  const char *subtitle;      /* under the title, '\n' between lines; NULL for none */
  const char *y_label;       /* the caption of the y axis */
  int n_groups, n_series;    /* both >= 1 */
  const char *const *groups; /* group labels; '\n' between the lines of one label */
  const char *const *series; /* legend names, in bar order */
  const double *values;      /* [n_groups * n_series], group-major; NaN or < 0: no bar */
  const double *targets;     /* the same shape, or NULL; NaN or <= 0: no mark */
  const char *target_name;   /* legend name of the marks (shown when there are any) */
} vc_bar_chart;

/* Writes the chart to f. Returns 0, or -1 with one line in err (no trailing newline) for a
 * chart without groups or series, or when writing fails. Text is XML-escaped. */
int vc_bar_chart_svg(FILE *f, const vc_bar_chart *c, char *err, size_t err_len);

#endif
