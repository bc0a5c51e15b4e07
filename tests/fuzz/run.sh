#!/bin/sh
# Runs libFuzzer targets: run.sh BUILD SECONDS NAME... (`make fuzz`). Each BUILD/fuzz_NAME
# runs SECONDS over a scratch corpus in BUILD/corpus/NAME, seeded from tests/fuzz/corpus/NAME
# and tests/fuzz/regress/NAME, with tests/fuzz/NAME.dict when there is one. Prints the run
# and execution counts; on a crash prints the log's end and the saved input, and fails.
set -eu
B=$1
SECONDS_EACH=$2
shift 2
mkdir -p "$B/crashes"
for name in "$@"; do
  mkdir -p "$B/corpus/$name"
  seeds=""
  for d in "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name"; do
    [ -d "$d" ] && seeds="$seeds $d"
  done
  dict=""
  [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
  log="$B/fuzz_$name.log"
  echo "== fuzz $name: ${SECONDS_EACH}s (log: $log)"
  # ASan's leak check runs after each input; a leak counts as a crash.
  if ! "$B/fuzz_$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$B/crashes/$name-" $dict "$B/corpus/$name" $seeds >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz $name: FAILED; the input is in $B/crashes/ (keep it in tests/fuzz/regress/$name/ once fixed)"
    exit 1
  fi
  grep -E "^Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
  echo "fuzz $name: corpus of $(ls "$B/corpus/$name" | wc -l) inputs"
done
