/* main.c — runs every test case; prints one line per case and "N passed, N failed" last.
 * Usage: vc_tests [name-substring]. VC_TEST_SEED=S replays a run's random data. */
#include "vc_test.h"

extern const vc_test_case vc_tests_kmap[], vc_tests_conv[], vc_tests_grad[], vc_tests_errors[],
    vc_tests_misc[], vc_tests_ply[], vc_tests_tune[];
static const vc_test_case *const suites[] = {vc_tests_misc, vc_tests_kmap, vc_tests_conv, vc_tests_grad,
                                             vc_tests_errors, vc_tests_ply, vc_tests_tune};

int main(int argc, char **argv) {
  vc_test_runner r = {.seed = vc_test_seed_from_env(), .filter = argc > 1 ? argv[1] : NULL, .name_width = 44};
  printf("voxconv tests, VC_TEST_SEED=%llu\n", (unsigned long long)r.seed);
  for (size_t s = 0; s < sizeof suites / sizeof *suites; s++) vc_test_run_cases(&r, suites[s]);
  return vc_test_summary(&r);
}
