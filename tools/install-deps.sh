#!/bin/sh
# Installs the build's packages on a Debian machine when they are missing: the OpenMP build
# of OpenBLAS (the CPU GEMM; it shares voxconv's OpenMP thread pool). Quiet when present.
set -e
missing=""
ls /usr/lib/*/openblas-openmp/libopenblas.so >/dev/null 2>&1 || missing="$missing libopenblas-openmp-dev"
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
