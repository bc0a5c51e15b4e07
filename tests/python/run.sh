#!/bin/sh
# Runs the Python binding's tests that need no torch against build directory $1. Installs
# what is missing first: python3 (apt) and NumPy (PyPI).
set -e
B=${1:-build}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v python3 >/dev/null 2>&1; then
  echo "python tests: installing python3"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 python3-pip python3-venv >/dev/null
fi
if ! python3 -c "import numpy" 2>/dev/null; then
  echo "python tests: installing numpy from PyPI"
  python3 -m pip install --quiet numpy 2>/dev/null || python3 -m pip install --quiet --break-system-packages numpy
fi
echo "== python binding (numpy)"
PYTHONPATH=python VOXCONV_LIBRARY="$B/libvoxconv.so" exec python3 tests/python/test_numpy.py
