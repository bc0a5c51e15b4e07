#!/bin/sh
# Renders a `voxconv bench --plot` chart with headless Chromium into a PNG, to look at it as
# a browser shows it: overlaps, clipping, unreadable labels.
#
#   tests/plot/screenshot.sh [CHART.svg [OUT.png]]
#
# Without CHART.svg a small CPU benchmark draws one first (build/voxconv bench --device cpu,
# suite S at RES 16 and 32 and suite L; BUILD=dir picks another build). OUT.png defaults to
# CHART.png. The window is the chart's own size (its width and height attributes), so the
# picture is what a viewer shows at 100 %.
#
# Run by hand, not by `make test`: Chromium is a 140 MB download (480 MB installed) for a
# picture that still needs a person to judge it. tests/cli.sh checks what a script can: the
# SVG parses, and holds the bars, labels, title and legend it should.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
svg=${1:-}
if [ -z "$svg" ]; then
  svg=$BUILD/bench-plot.svg
  make --no-print-directory all >/dev/null
  "$BUILD/voxconv" bench --device cpu --res 16,32 --reps 3 --warmup 1 --plot "$svg" >"$BUILD/bench-plot.txt"
  echo "screenshot: $BUILD/voxconv bench wrote $svg (its table: $BUILD/bench-plot.txt)"
fi
png=${2:-${svg%.svg}.png}
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "screenshot: installing chromium"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
size=$(sed -n 's/^<svg[^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$svg")
[ -n "$size" ] || { echo "screenshot: $svg has no <svg width=... height=...> line" >&2; exit 1; }
# Chromium wants absolute paths for both files; its D-Bus complaints on a headless box are noise.
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$size" \
  --screenshot="$(realpath -m "$png")" "file://$(realpath "$svg")" 2>/dev/null
echo "screenshot: $png ($size px)"
