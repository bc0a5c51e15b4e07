/* progress.h — one status line on stderr for the long parts of a command (reading and
 * voxelising files, benchmark rows, timed network runs).
 *
 * Shown only when stderr is a terminal: the line is redrawn in place with '\r' and erased
 * by vc_progress_clear, so it never reaches a log, a pipe or captured output. It is cut to
 * the terminal's width, because a wrapped line cannot be redrawn in place.
 */
#ifndef VC_TOOLS_PROGRESS_H
#define VC_TOOLS_PROGRESS_H

/* Replaces the status line with the formatted text (one line, no '\n'). */
void vc_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Erases the status line, if one is shown. Call it before printing to stdout, which may be
 * the same terminal, and when the work is done. */
void vc_progress_clear(void);

#endif
