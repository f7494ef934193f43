/* elfload.h - loads the CPU target's kernel objects (x86-64 ELF64
 * relocatable files, ET_REL) into this process without LLVM: a small
 * static linker into one private mapping. Internal to libxpjit; used by
 * runtime/cpu.c (docs/abi.md, "Loading CPU objects").
 *
 * The bytes are untrusted (they may come from a cache file): every offset,
 * size and index is checked, and anything the loader does not understand
 * is refused with a message, never guessed at.
 *
 * Thread safety: every function may be called from any thread at once. */
#ifndef XPJ_ELFLOAD_H
#define XPJ_ELFLOAD_H

#include "xpjit_ir.h" /* xpj_status */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct xpj_elf_image xpj_elf_image;

/* The address an undefined symbol of the object binds to, or NULL when the
 * object may not use it (the load then fails, naming the symbol). Called
 * once per undefined global symbol, from the loading thread. */
typedef void *(*xpj_elf_resolve_fn)(void *ctx, const char *name);

/* Whether this host can run what the loader loads (x86-64 Linux). When it
 * cannot, xpj_elf_load returns XPJ_ERR_UNSUPPORTED and the caller needs
 * another loader. */
bool xpj_elf_supported(void);

/* Links obj[0..len) into a new mapping of this process and finds entry, a
 * global function symbol of an executable section.
 *   [in]  obj, len       the object (not kept; may be freed after)
 *   [in]  entry          the symbol to find
 *   [in]  resolve, ctx   binds undefined symbols (nothing else can)
 *   [out] out            the image, to free with xpj_elf_unload; NULL on
 *                        failure
 *   [out] entry_addr     entry's address in the image; NULL on failure
 *   [out] err            on failure, why (NUL-terminated when errsize > 0)
 * Returns XPJ_OK;
 *   XPJ_ERR_INVALID     the object is malformed or uses something refused
 *                       (another machine, a relocation type or section
 *                       kind not supported, constructors, thread-local
 *                       storage, an unresolved symbol, a value out of range);
 *   XPJ_ERR_NOT_FOUND   no symbol entry in an executable section;
 *   XPJ_ERR_NOMEM       out of memory (or address space);
 *   XPJ_ERR_DEVICE      the system refused to map or protect the image;
 *   XPJ_ERR_UNSUPPORTED this host is not x86-64 Linux.
 * The image is mapped at once: code read+execute, read-only data read-only
 * (the GOT included), writable data read+write; nothing is writable and
 * executable at any time after the load returns. */
xpj_status xpj_elf_load(const uint8_t *obj, size_t len, const char *entry,
                        xpj_elf_resolve_fn resolve, void *ctx,
                        xpj_elf_image **out, void **entry_addr, char *err,
                        size_t errsize);

/* Around fork() (rt.h's RT_FORK_* phases): the loader's lock is taken
 * before and given back after, in the parent and the child. */
void xpj_elf_atfork(int phase);

/* Unmaps the image. NULL is a no-op. Nothing may run its code any more. */
void xpj_elf_unload(xpj_elf_image *img);

/* The image's mapping (for tests and diagnostics). */
void xpj_elf_image_range(const xpj_elf_image *img, void **base,
                         size_t *size);

#endif
