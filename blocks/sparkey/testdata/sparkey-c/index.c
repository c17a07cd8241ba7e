/*
 * Writes the hash index <base>.spi of each Sparkey log <base>.spl given,
 * with the Sparkey C library (spotify/sparkey): sequins looks keys up
 * through it. cmd/spangle-bench/sparkey-serving.sh builds and runs it.
 *
 *   index <log.spl>...
 */
#include <stdio.h>
#include <string.h>
#include <sparkey/sparkey.h>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    char idx[4096];
    size_t n = strlen(argv[i]);
    if (n < 4 || strcmp(argv[i] + n - 4, ".spl")) { fprintf(stderr, "%s: not a .spl\n", argv[i]); return 2; }
    snprintf(idx, sizeof idx, "%.*s.spi", (int)(n - 4), argv[i]);
    sparkey_returncode rc = sparkey_hash_write(idx, argv[i], 0);
    if (rc != SPARKEY_SUCCESS) { fprintf(stderr, "%s: %s\n", argv[i], sparkey_errstring(rc)); return 1; }
  }
  return 0;
}
