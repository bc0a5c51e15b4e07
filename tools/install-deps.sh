#!/bin/sh
# Installs the build's packages on a Debian machine when they are missing: the OpenMP build
# of OpenBLAS (the CPU GEMM; it shares voxconv's OpenMP thread pool). Quiet when present.
# Offline machines (a lent GPU box): point VOXCONV_DEBS at a folder holding the .deb files
# of libopenblas0-openmp, libopenblas-openmp-dev and libgfortran5 (apt-get download them).
set -e
missing=""
ls /usr/lib/*/openblas-openmp/libopenblas.so >/dev/null 2>&1 || missing="$missing libopenblas-openmp-dev"
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if [ -n "${VOXCONV_DEBS:-}" ] && ls "$VOXCONV_DEBS"/*.deb >/dev/null 2>&1; then
  echo "install-deps: installing$missing from $VOXCONV_DEBS"
  $SUDO dpkg -i --force-depends "$VOXCONV_DEBS"/*.deb >/dev/null
  exit 0
fi
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
