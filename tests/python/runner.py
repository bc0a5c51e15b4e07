"""The test runner of the Python suites: every test_* function of a module, filtered by the
first command-line argument; each failure is reported with its traceback and the rest run."""
import sys
import time
import traceback


def run(namespace, footer):
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    tests = [(n, f) for n, f in sorted(namespace.items()) if n.startswith("test_") and only in n]
    failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            print("ok   %-45s %8.1f ms" % (name, 1e3 * (time.time() - t0)), flush=True)
        except Exception as e:  # report and go on: every test runs
            failed += 1
            traceback.print_exc()
            print("FAIL %-45s %s: %s" % (name, type(e).__name__, e), flush=True)
    print("%d passed, %d failed (%s)" % (len(tests) - failed, failed, footer))
    return 1 if failed else 0
