/*
 * Writes a Sparkey log and its hash index with the Sparkey C library
 * (spotify/sparkey), and prints every put as "<key hex> <value hex>".
 *
 *   write <base> <none|snappy|zstd> <block size> <partitions> <partition> <first> <count> <seed>
 *
 * Keys are "key-%08d" from the first number on whose sequins hash
 * (h = 31*h + b over the bytes, int32) puts them in partition <partition>
 * of <partitions>, <count> of them, in byte order. Values are pseudo-random
 * bytes of 0 to 300 bytes, and one in 50 of 5000 to 20000 bytes (longer
 * than a block).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sparkey/sparkey.h>

static uint64_t state;
static uint32_t next(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return (uint32_t)(state >> 11);
}

static int partition(const char *k, int n) {
  int32_t h = 0;
  for (const unsigned char *p = (const unsigned char *)k; *p; p++) h = (int32_t)((uint32_t)h * 31u + *p);
  return (int)((h & 0x7fffffff) % n);
}

static void hex(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
}

int main(int argc, char **argv) {
  if (argc != 9) { fprintf(stderr, "usage: write base comp block parts part first count seed\n"); return 2; }
  const char *base = argv[1];
  sparkey_compression_type comp = SPARKEY_COMPRESSION_NONE;
  if (!strcmp(argv[2], "snappy")) comp = SPARKEY_COMPRESSION_SNAPPY;
  if (!strcmp(argv[2], "zstd")) comp = SPARKEY_COMPRESSION_ZSTD;
  int block = atoi(argv[3]), parts = atoi(argv[4]), part = atoi(argv[5]);
  long first = atol(argv[6]), count = atol(argv[7]);
  state = strtoull(argv[8], NULL, 10) * 2654435761u + 1;
  char log[4096], idx[4096];
  snprintf(log, sizeof log, "%s.spl", base);
  snprintf(idx, sizeof idx, "%s.spi", base);
  sparkey_logwriter *w;
  sparkey_returncode rc = sparkey_logwriter_create(&w, log, comp, block);
  if (rc != SPARKEY_SUCCESS) { fprintf(stderr, "create: %s\n", sparkey_errstring(rc)); return 1; }
  static uint8_t value[20000];
  char key[32];
  for (long i = first, n = 0; n < count; i++) {
    snprintf(key, sizeof key, "key-%08ld", i);
    if (partition(key, parts) != part) continue;
    size_t vlen = next() % 301;
    if (next() % 50 == 0) vlen = 5000 + next() % 15001;
    for (size_t j = 0; j < vlen; j++) value[j] = (uint8_t)next();
    rc = sparkey_logwriter_put(w, strlen(key), (uint8_t *)key, vlen, value);
    if (rc != SPARKEY_SUCCESS) { fprintf(stderr, "put: %s\n", sparkey_errstring(rc)); return 1; }
    hex((uint8_t *)key, strlen(key)); printf(" "); hex(value, vlen); printf("\n");
    n++;
  }
  rc = sparkey_logwriter_close(&w);
  if (rc != SPARKEY_SUCCESS) { fprintf(stderr, "close: %s\n", sparkey_errstring(rc)); return 1; }
  rc = sparkey_hash_write(idx, log, 0);
  if (rc != SPARKEY_SUCCESS) { fprintf(stderr, "hash: %s\n", sparkey_errstring(rc)); return 1; }
  return 0;
}
