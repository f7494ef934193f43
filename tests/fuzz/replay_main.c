/*
 * replay_main.c - runs a libFuzzer target without libFuzzer.
 *
 *   replay_fuzz_X FILE_OR_DIR...
 *
 * Calls LLVMFuzzerTestOneInput once on the contents of every file named on
 * the command line, and of every regular file directly inside each named
 * directory (not recursive; hidden files are skipped; entries are sorted so
 * the order is deterministic). Prints "replayed N inputs" and exits 0. A
 * crash, abort or sanitizer report is the failure signal; an unreadable
 * argument is an error (exit 2).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int read_file(const char *path, uint8_t **out, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return -1;
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    fclose(fp);
    return -1;
  }
  for (;;) {
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(fp);
        return -1;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, fp);
    n += got;
    if (got == 0)
      break;
  }
  int err = ferror(fp);
  fclose(fp);
  if (err) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

/* Runs one file; returns 0 on success, -1 if it cannot be read. */
static int run_file(const char *path) {
  uint8_t *data = NULL;
  size_t len = 0;
  if (read_file(path, &data, &len) != 0) {
    fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  /* an exact-size copy, so that ASan catches reads past the end */
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) {
    free(data);
    fprintf(stderr, "replay: out of memory\n");
    return -1;
  }
  memcpy(copy, data, len);
  free(data);
  LLVMFuzzerTestOneInput(copy, len);
  free(copy);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file directly inside dir; adds to *count. */
static int run_dir(const char *dir, unsigned long *count) {
  DIR *dp = opendir(dir);
  if (!dp) {
    fprintf(stderr, "replay: cannot open directory %s: %s\n", dir,
            strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    size_t pl = strlen(dir) + 1 + strlen(de->d_name) + 1;
    char *path = malloc(pl);
    if (!path) {
      rc = -1;
      break;
    }
    snprintf(path, pl, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      free(path);
      continue;
    }
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      char **nn = realloc(names, ncap * sizeof *names);
      if (!nn) {
        free(path);
        rc = -1;
        break;
      }
      names = nn;
      cap = ncap;
    }
    names[n++] = path;
  }
  closedir(dp);
  if (n)
    qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) {
      if (run_file(names[i]) != 0)
        rc = -1;
      else
        (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  unsigned long count = 0;
  int failed = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "replay: cannot stat %s: %s\n", argv[i],
              strerror(errno));
      failed = 1;
      continue;
    }
    if (S_ISDIR(sb.st_mode)) {
      if (run_dir(argv[i], &count) != 0)
        failed = 1;
    } else if (run_file(argv[i]) == 0) {
      count++;
    } else {
      failed = 1;
    }
  }
  printf("replayed %lu inputs\n", count);
  return failed ? 2 : 0;
}
