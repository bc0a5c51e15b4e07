#!/bin/sh
# Runs the C test suite and the README example from build directory $1.
set -e
B=${1:-build}
echo "== README example"
"$B/readme_example"
echo "== test suite"
"$B/vc_tests"
