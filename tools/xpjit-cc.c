/* xpjit-cc - the compile server of libxpjit (compiler/cserver.c): started
 * by the library at a process's first isolated compile, with its control
 * socket as descriptor 3; it forks a worker per compile. Not a command to
 * run by hand. */
#define _GNU_SOURCE
#include "worker.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int type = 0;
  socklen_t len = sizeof type;
  if (argc != 2 || strcmp(argv[1], "--serve") != 0 ||
      getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != SOCK_SEQPACKET) {
    fprintf(stderr, "xpjit-cc: the compile server of libxpjit; the library "
                    "starts it (docs/abi.md, Isolation)\n");
    return 2;
  }
  close_range(4, ~0u, 0); /* (the library's spawn closed them already) */
  xpj_cs_main(3);
}
