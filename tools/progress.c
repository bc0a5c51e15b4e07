/* progress.c — the status line of progress.h. */
#include "progress.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int tty = -1;   /* whether stderr is a terminal; -1: not asked yet */
static bool shown;     /* a line is on the screen */

void vc_progress(const char *fmt, ...) {
  if (tty < 0) tty = isatty(STDERR_FILENO);
  if (!tty) return;
  struct winsize ws;
  int cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* One column short of the width: a character in the last column wraps on some terminals. */
  const int width = cols - 1 < (int)sizeof line - 1 ? cols - 1 : (int)sizeof line - 1;
  if (width > 0) line[width] = '\0';
  fprintf(stderr, "\r%s\033[K", line); /* ESC[K erases what a longer previous line left */
  fflush(stderr);
  shown = true;
}

void vc_progress_clear(void) {
  if (!shown) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  shown = false;
}
