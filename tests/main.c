/* main.c — runs every test case; prints one line per case and "N passed, N failed" last.
 * Usage: vc_tests [name-substring]. VC_TEST_SEED=S replays a run's random data. */
#include "vc_test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void vc_test_seed(uint64_t s);

extern const vc_test_case vc_tests_kmap[], vc_tests_conv[], vc_tests_grad[], vc_tests_errors[],
    vc_tests_misc[], vc_tests_ply[];
static const vc_test_case *const suites[] = {vc_tests_misc, vc_tests_kmap, vc_tests_conv, vc_tests_grad,
                                             vc_tests_errors, vc_tests_ply};

static int current_failures;

void vc_test_fail(const char *file, int line, const char *expr, const char *fmt, ...) {
  if (current_failures++ >= 8) return; /* one broken loop should not flood the log */
  fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", file, line, expr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  const char *env = getenv("VC_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
  printf("voxconv tests, VC_TEST_SEED=%llu\n", (unsigned long long)seed);
  int passed = 0, failed = 0;
  for (size_t s = 0; s < sizeof suites / sizeof *suites; s++)
    for (const vc_test_case *t = suites[s]; t->name; t++) {
      if (filter && !strstr(t->name, filter)) continue;
      vc_test_seed(seed ^ (uint64_t)(passed + failed + 1) * 0x9e3779b97f4a7c15ull);
      current_failures = 0;
      clock_t t0 = clock();
      t->fn();
      double ms = 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC;
      printf("%s %-44s %8.1f ms cpu\n", current_failures ? "FAIL" : "ok  ", t->name, ms);
      fflush(stdout);
      if (current_failures) failed++;
      else passed++;
    }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
