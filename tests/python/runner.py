"""The test runner of the Python suites: every test_* function of a module, filtered by the
first command-line argument; each failure is reported with its traceback and the rest run."""
import sys
import time
import traceback


def expect_raises(exc, needle, fn, *args, **kw):
    """fn(*args, **kw) raises exc with `needle` in its message; returns the exception."""
    try:
        fn(*args, **kw)
    except exc as e:
        assert needle in str(e), "message %r lacks %r" % (str(e), needle)
        return e
    raise AssertionError("expected %s(%r)" % (exc.__name__, needle))


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
