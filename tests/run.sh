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
echo "== fuzz targets: seed corpus and regression inputs"
for r in "$B"/replay_*; do
  name=${r##*/replay_}
  set --
  for d in tests/fuzz/corpus/$name tests/fuzz/regress/$name; do [ -d "$d" ] && set -- "$@" "$d"; done
  "$r" "$@"
done
