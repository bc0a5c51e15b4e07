#!/bin/sh
# The voxconv command line on the CPU, from build directory $1: `run` on the shipped mesh
# (the table, batching, saved voxels that voxelise back to the same sites, usage errors),
# `bench --plot` (a well-formed SVG with a bar per row and pass), and the progress line
# (on a terminal only). Prints one line per case and "N passed, N failed" last.
set -u
B=${1:-build}
V="$B/voxconv"
SHAPE=data/shape.ply
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
# Small and fast: a run of one warm-up-free repetition on a coarse grid.
QUICK="--device cpu --reps 1 --warmup 0"

fail() {
  echo "  $*" >&2
  ok=false
}

check_case() {
  ok=true
  "$1"
  if $ok; then
    passed=$((passed + 1))
    echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1"
  fi
}

# has FILE REGEX: FILE has a line matching the extended regular expression.
has() {
  grep -Eq -- "$2" "$1" || fail "$(basename "$1") has no line matching '$2'"
}

# succeeds NAME ARGS...: voxconv ARGS exits 0; stdout in $T/NAME.out, stderr in $T/NAME.err.
succeeds() {
  name=$1
  shift
  "$V" "$@" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
  [ $rc = 0 ] || fail "voxconv $* exited with $rc: $(cat "$T/$name.err")"
}

# refuses RC MESSAGE ARGS...: voxconv ARGS exits with RC and prints exactly MESSAGE on stderr.
refuses() {
  want_rc=$1 want=$2
  shift 2
  "$V" "$@" >"$T/refused.out" 2>"$T/refused.err"
  rc=$?
  got=$(cat "$T/refused.err")
  [ $rc = "$want_rc" ] || fail "voxconv $*: exit status $rc, expected $want_rc"
  [ "$got" = "$want" ] || fail "voxconv $*: said '$got', expected '$want'"
}

# voxels OUT FILE: the voxel count of FILE in a run's file table.
voxels() {
  awk -v f="$2" '$2 == f && $1 ~ /^[0-9]+$/ { print $5 }' "$1"
}

# ---- voxconv run ------------------------------------------------------------------------

run_table() {
  succeeds table run "$SHAPE" --resolution 64 $QUICK
  out="$T/table.out"
  has "$out" '^voxel size [0-9.e-]+: the largest extent of the file over 64 voxels$'
  has "$out" '^0 +data/shape\.ply +[0-9]+ +[0-9]+ +[0-9]+  [0-9]+ x [0-9]+ x [0-9]+$'
  has "$out" '^input: [0-9]+ voxels in 1 batch item, 4 random feature channels'
  has "$out" '^neighbours \(the 3x3x3 submanifold map of the input voxels\): [0-9]+ pairs'
  has "$out" '^  mean [0-9.]+, min [0-9]+, max [0-9]+ of 27$'
  has "$out" '^  dx  0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +100\.0 '
  has "$out" '^network: unet of depth 2 and width 32: 8 layers, 4 -> 16 channels$'
  has "$out" '^layer +kind +vox_in +vox_out +pairs +map_ms +fwd_ms +GFLOP/s$'
  for layer in stem down1 sub1 down2 sub2 up2 up1 head total; do has "$out" "^$layer "; done
  has "$out" '^inference: +[0-9.]+ ms per batch, +[0-9.]+ M voxels/s'
  n=$(voxels "$out" data/shape.ply)
  has "$out" "^input: $n voxels"
  has "$out" "^stem +submanifold +$n +$n "
  [ -s "$T/table.err" ] && fail "stderr is not empty: $(cat "$T/table.err")"
}

run_train_check() {
  succeeds train run "$SHAPE" --resolution 32 --net stack --layers 3 --channels 8 --train --check --dtype f16 $QUICK
  out="$T/train.out"
  has "$out" '^network: stack of 3 submanifold 3x3x3 layers, 8 channels$'
  has "$out" '^layer +kind .* fwd_ms +bwd_ms +GFLOP/s +max_rel_err$'
  has "$out" '^subm2 +submanifold .* shared '
  has "$out" '^training step: +[0-9.]+ ms per batch'
  has "$out" '^verdict: PASS$'
}

# Two files are batch items 0 and 1, each voxelised as on its own.
run_batch() {
  succeeds one run "$SHAPE" --voxel-size 0.05 --net stack --layers 1 --channels 4 $QUICK
  succeeds two run "$SHAPE" "$SHAPE" --voxel-size 0.05 --net stack --layers 1 --channels 4 $QUICK
  n=$(voxels "$T/one.out" data/shape.ply)
  has "$T/two.out" "^1 +data/shape\.ply .* $n  "
  has "$T/two.out" "^input: $((2 * n)) voxels in 2 batch items"
  pairs=$(sed -n 's/^neighbours.*: \([0-9]*\) pairs.*/\1/p' "$T/one.out")
  has "$T/two.out" "^neighbours .*: $((2 * pairs)) pairs" # batch items never neighbour
}

# The saved centres voxelise back to exactly the same sites: saving them again gives the
# same bytes (vc_ply_read and vc_voxelize of the saved file, vc_ply_write_voxels again).
run_saved_voxels() {
  for size in 0.05 0.0173; do
    succeeds save1 run "$SHAPE" --voxel-size $size --save-voxels "$T/a.ply" --net stack --layers 1 --channels 4 $QUICK
    succeeds save2 run "$T/a.ply" --voxel-size $size --save-voxels "$T/b.ply" --net stack --layers 1 --channels 4 $QUICK
    n=$(voxels "$T/save1.out" data/shape.ply)
    has "$T/save1.out" "^saved $n voxel centres to $T/a.ply$"
    has "$T/save2.out" "^0 +$T/a.ply +$n +0 +$n  "
    cmp -s "$T/a.ply" "$T/b.ply" || fail "size $size: the voxels saved from the saved voxels differ"
  done
}

run_usage_errors() {
  S=$SHAPE
  refuses 2 "voxconv run: no input file (usage: voxconv run [options] FILE...)" run --resolution 16
  refuses 2 "voxconv run: no voxel size: give --voxel-size S or --resolution R" run "$S"
  refuses 2 "voxconv run: --voxel-size and --resolution exclude each other; give one" \
    run "$S" --voxel-size 0.1 --resolution 16
  refuses 2 "voxconv run: --voxel-size '-1': voxel size -1 is not a positive finite number" run "$S" --voxel-size -1
  refuses 2 "voxconv run: --voxel-size '0': voxel size 0 is not a positive finite number" run "$S" --voxel-size 0
  refuses 2 "voxconv run: --voxel-size 'inf': voxel size inf is not a positive finite number" run "$S" --voxel-size inf
  refuses 2 "voxconv run: --voxel-size '1cm': expected a number" run "$S" --voxel-size 1cm
  refuses 2 "voxconv run: --resolution '0': expected an integer in [1, 65536]" run "$S" --resolution 0
  refuses 2 "voxconv run: --resolution '1.5': expected an integer in [1, 65536]" run "$S" --resolution 1.5
  refuses 2 "voxconv run: --resolution '70000': expected an integer in [1, 65536]" run "$S" --resolution 70000
  refuses 2 "voxconv run: --net unet --layers 9 --channels 32: unet depth 9 is outside [1, 8]" \
    run "$S" --resolution 16 --layers 9
  refuses 2 "voxconv run: --net unet --layers 2 --channels 20000: unet width 20000 doubled at every level exceeds VC_CHANNELS_MAX = 65536" \
    run "$S" --resolution 16 --channels 20000
  refuses 2 "voxconv run: --net 'mlp' is not one of unet, stack" run "$S" --resolution 16 --net mlp
  refuses 2 "voxconv run: unknown option '--voxels' (try 'voxconv run --help')" run "$S" --voxels 16
  refuses 2 "voxconv run: --resolution needs a value (R)" run "$S" --resolution
  refuses 2 "voxconv demo: unknown argument 'x' (try 'voxconv demo --help')" demo x
  # files that cannot be read or used, and an unwritable --save-voxels: the file's name, then
  # the reader's (or writer's) reason, exit status 1
  refuses 1 "voxconv run: $T/missing.ply: cannot open: No such file or directory" run "$T/missing.ply" --resolution 16
  printf 'ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nend_header\n' >"$T/bad.ply"
  refuses 1 "voxconv run: $T/bad.ply: vertex element has no 'y' property" run "$T/bad.ply" --resolution 16
  printf 'ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\nend_header\n1 2 3\n' \
    >"$T/point.ply"
  refuses 1 "voxconv run: $T/point.ply: all vertices lie at one point: there is no extent to fit" \
    run "$S" "$T/point.ply" --resolution 16
  refuses 1 "voxconv run: $T/no/such/dir.ply: cannot open for writing: No such file or directory" \
    run "$S" --resolution 16 --save-voxels "$T/no/such/dir.ply"
}

# Without a GPU (or a CUDA build) --device cuda says so and stops; with one it runs there.
run_device_cuda() {
  "$V" run "$SHAPE" --resolution 16 --device cuda --reps 1 --warmup 0 >"$T/cuda.out" 2>"$T/cuda.err"
  rc=$?
  if [ $rc = 0 ]; then
    has "$T/cuda.out" '^voxconv run .*: device cuda: '
  else
    [ $rc = 1 ] || fail "--device cuda without a GPU: exit status $rc, expected 1"
    has "$T/cuda.err" '^voxconv: --device cuda: .+'
    [ "$(wc -l <"$T/cuda.err")" = 1 ] || fail "--device cuda: more than one line: $(cat "$T/cuda.err")"
    [ -s "$T/cuda.out" ] && fail "--device cuda without a GPU printed a table"
  fi
}

# ---- voxconv bench --plot ---------------------------------------------------------------

bench_plot() {
  succeeds bench bench --device cpu --suite S --res 16,32 --dtype f32,f16 --channels 8 --reps 1 --warmup 0 \
    --no-check --plot "$T/bench.svg" --csv "$T/bench.csv"
  has "$T/bench.out" '^4 rows, 0 over tolerance$'
  command -v python3 >/dev/null 2>&1 || { echo "  (no python3: the SVG is not parsed)"; return; }
  python3 - "$T/bench.svg" <<'EOF' || fail "the SVG"
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])  # well-formed XML, or an exception
def of_class(name):
    return [e for tag in ("rect", "text", "line") for e in doc.getElementsByTagName(tag)
            if e.getAttribute("class") == name]
def text(e):
    return "".join(n.data for n in e.getElementsByTagName("*") + [e] for n in n.childNodes if n.nodeType == n.TEXT_NODE)
svg = doc.documentElement
bars, groups, title = of_class("bar"), of_class("group"), of_class("title")
problems = []
if svg.tagName != "svg" or not svg.getAttribute("viewBox"): problems.append("no <svg viewBox=...>")
if len(bars) != 8: problems.append("%d bars, expected 8 (4 rows x inference, training)" % len(bars))
labels = [text(g) for g in groups]
want = ["shell_r16_c8_l8f16", "shell_r16_c8_l8f32", "shell_r32_c8_l4f16", "shell_r32_c8_l4f32"]
if labels != want: problems.append("group labels %s, expected %s" % (labels, want))
if of_class("target"): problems.append("target marks on rows that are not BENCHMARKS.md's cases")
t = text(title[0]) if title else ""
if "on cpu" not in t or "(f16, f32)" not in t: problems.append("title '%s' does not name the dtypes" % t)
subs = " ".join(text(e) for e in of_class("subtitle"))
for word in ("device cpu", "dense peak", "TFLOP/s"):
    if word not in subs: problems.append("subtitle lacks '%s'" % word)
if len(of_class("legend")) != 2: problems.append("legend entries: %d, expected 2" % len(of_class("legend")))
if len(of_class("tick")) < 3: problems.append("fewer than 3 axis ticks")
for b in bars:
    if float(b.getAttribute("height")) < 0: problems.append("a bar of negative height")
print("\n".join("  " + p for p in problems), file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  head -n 1 "$T/bench.csv" | grep -q '^suite,case,dtype,' || fail "--csv lost its header next to --plot"
  refuses 1 "voxconv bench: --plot '$T/no/such.svg': cannot open it for writing" \
    bench --device cpu --plot "$T/no/such.svg"
}

# ---- progress ---------------------------------------------------------------------------

# Piped, stderr stays empty; on a terminal (a pty) the line is drawn with '\r' and erased.
progress() {
  "$V" run "$SHAPE" --resolution 32 --net stack --layers 1 --channels 4 $QUICK >/dev/null 2>"$T/piped.err"
  [ -s "$T/piped.err" ] && fail "run wrote to a piped stderr: $(cat "$T/piped.err")"
  command -v python3 >/dev/null 2>&1 || { echo "  (no python3: no pty)"; return; }
  for cmd in "run $SHAPE --resolution 32 --net stack --layers 1 --channels 4 $QUICK" \
    "bench --device cpu --suite S --res 16 --dtype f32 --channels 8 --reps 1 --warmup 0 --no-check"; do
    # shellcheck disable=SC2086
    python3 - "$V" $cmd <<'EOF' || fail "progress of voxconv $cmd"
import os, pty, subprocess, sys
master, slave = pty.openpty()
out = open(os.devnull, "w")
p = subprocess.Popen(sys.argv[1:], stdout=out, stderr=slave)
os.close(slave)
data = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not chunk:
        break
    data += chunk
rc = p.wait()
what = sys.argv[2]
problems = []
if rc != 0: problems.append("exit status %d" % rc)
if not data.startswith(b"\r" + what.encode()): problems.append("no '\\r%s...' line first" % what)
if not data.endswith(b"\r\x1b[K"): problems.append("the line is not erased at the end")
if b"\n" in data: problems.append("a newline on the terminal")
if problems: print("  %s; stderr was %r" % ("; ".join(problems), data[:300]), file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  done
}

for c in run_table run_train_check run_batch run_saved_voxels run_usage_errors run_device_cuda bench_plot progress; do
  check_case $c
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
