#!/bin/sh
# Installs what `make fuzz` needs on a Debian machine when it is missing: clang and its
# libFuzzer runtime (libclang-rt-N-dev for clang N; Debian 12 has clang 14). Quiet when
# present. The probe links a trivial target with the fuzzer and both sanitizers.
set -e
probe() {
  dir=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n; }\n' >"$dir/t.c"
  ok=0
  clang -fsanitize=fuzzer,address,undefined "$dir/t.c" -o "$dir/t" >/dev/null 2>&1 || ok=1
  rm -rf "$dir"
  return $ok
}
command -v clang >/dev/null 2>&1 && probe && exit 0
if command -v clang >/dev/null 2>&1; then
  missing="libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
else
  missing="clang libclang-rt-dev"
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "install-fuzz-deps: installing $missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
probe || { echo "install-fuzz-deps: clang still cannot link -fsanitize=fuzzer" >&2; exit 1; }
