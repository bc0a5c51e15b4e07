#!/bin/sh
# Installs the build's packages on a Debian machine when they are missing: OpenBLAS (the
# CPU GEMM). Quiet when everything is there.
set -e
missing=""
[ -f /usr/include/x86_64-linux-gnu/cblas.h ] || [ -f /usr/include/cblas.h ] || [ -f /usr/include/openblas/cblas.h ] || missing="$missing libopenblas-dev"
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
