/* replay.c — runs a libFuzzer target over saved inputs without libFuzzer, so that the seed
 * corpus and the regression inputs run in `make test` and `make asan` with any compiler.
 * Usage: replay_<name> PATH...; a PATH is a file or a folder of files (not recursive), run
 * in name order. Exits 1 when a PATH cannot be read; a failing input aborts as it would
 * under the fuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t len = 0, cap = 4096;
  uint8_t *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
    len += got;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (!bad) LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return bad ? -1 : 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int inputs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i])) return fprintf(stderr, "replay: cannot read %s\n", argv[i]), 1;
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return fprintf(stderr, "replay: cannot read %s\n", argv[i]), 1;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, (n + 1) * sizeof *names);
      names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
      sprintf(names[n++], "%s/%s", argv[i], e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_name); /* qsort's array must not be NULL */
    for (size_t k = 0; k < n; k++) {
      if (stat(names[k], &st) == 0 && S_ISREG(st.st_mode)) {
        if (run_file(names[k])) return fprintf(stderr, "replay: cannot read %s\n", names[k]), 1;
        inputs++;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("%s: %d inputs, no failure\n", argv[0], inputs);
  return 0;
}
