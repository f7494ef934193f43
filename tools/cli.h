/* cli.h - the parts of xpjit-cli in other files. */
#ifndef XPJ_CLI_H
#define XPJ_CLI_H
#include "xpjit.h"

#include <stdio.h>

extern const char *cli_prog; /* "xpjit-cli" */

/* xpjit-cli cache ARGS... and xpjit-cli bundle ARGS... (cli_cache.c);
 * argv starts after the command word. */
int cli_cache(int argc, char **argv);
int cli_bundle(int argc, char **argv);
/* s as a JSON string (cli_cache.c). */
void cli_json_str(FILE *f, const char *s);
/* xpjit-cli daemon status|stats|stop (cli_daemon.c). */
int cli_daemon(int argc, char **argv);
#endif
