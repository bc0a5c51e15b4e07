#!/bin/sh
# Runs the C test suite, the README example and the command-line tests from build directory $1.
set -e
B=${1:-build}
echo "== README example"
"$B/readme_example"
echo "== test suite"
"$B/vc_tests"
echo "== command line (voxconv run, bench --plot, progress)"
sh tests/cli.sh "$B"
