/* elfload.c - a static linker for one kernel object at a time (elfload.h).
 *
 * Why not ORC: libLLVM costs about 13 ms of every process start (issue 19),
 * and a process whose kernels come from a cache needs no compiler. What
 * compiler/target_cpu.c emits (PIC, the small code model) needs very
 * little: copy the allocated sections, bind a few libm calls, apply
 * PC-relative relocations. This file does that and refuses everything
 * else, with a message (docs/abi.md, "Loading CPU objects"):
 *
 *   mapped    SHF_ALLOC sections of type PROGBITS and NOBITS (code,
 *             constants, jump tables, data, bss) and SHN_COMMON symbols;
 *   skipped   everything not allocated (symbols, strings, relocations of
 *             skipped sections, debug info, .comment, .llvm_addrsig,
 *             notes) and the unwind tables (.eh_frame: kernels never
 *             unwind, and nothing registers them): never mapped, never
 *             relocated;
 *   refused   constructors and destructors (.init_array, .ctors, ...),
 *             thread-local storage, IFUNCs, REL relocations, writable
 *             code, compressed sections, any other allocated section
 *             type, alignments above a page; images over 256 MiB,
 *             objects over 1 GiB, over 65279 sections or 2^20
 *             relocations; relocation types other than NONE, 64, PC64,
 *             PC32, PLT32, 32, 32S, GOTPCREL, GOTPCRELX, REX_GOTPCRELX.
 *
 * Layout: whole pages, [code | stubs | read-only data | GOT] [writable
 * data | bss | commons], each part starting on a page so that it gets its
 * own protection once everything is written: read+execute (one mprotect
 * for a kernel's code and constants: the constants are executable, never
 * writable) and read+write (never executable). Images are carved from
 * shared anonymous mappings (chunks of 1 MiB, never reused: a chunk goes
 * when its last image is unloaded), so that a load costs no mmap and an
 * unload no munmap (the mmap was a third of a load, and unloading 20
 * kernels at context teardown was 20 munmaps); an image over a quarter of
 * a chunk gets a mapping of its own. An external
 * symbol (libm, memset) may be further than 2 GiB away: a reference that
 * needs a 32-bit displacement goes to the symbol's stub (jmp *GOT(%rip))
 * and a GOT load to its slot, both inside the image, so every PC-relative
 * value is in range; each one is checked anyway, as the addends are the
 * object's.
 *
 * The input is read with explicit little-endian loads at checked offsets
 * (no casts of the buffer to structs), and the caller's bytes must not
 * change during the call. */
#define _GNU_SOURCE
#include "elfload.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_OBJECT ((uint64_t)1 << 30)
#define MAX_IMAGE ((uint64_t)256 << 20)
#define MAX_ALIGN 4096u
#define MAX_RELOCS ((uint64_t)1 << 20) /* applied; a kernel has hundreds */
#define STUB_SIZE 8u
#define SYM_SIZE 24u  /* Elf64_Sym */
#define RELA_SIZE 24u /* Elf64_Rela */
#define SHDR_SIZE 64u /* Elf64_Shdr */

/* A mapping images are carved from: used bytes from the start, never
 * handed out twice (fresh pages are zero, as bss must be); unmapped when
 * no image is in it and it takes no more. */
typedef struct chunk {
  uint8_t *base;
  size_t size, used;
  unsigned live; /* images in it */
} chunk;

struct xpj_elf_image {
  uint8_t *base;
  size_t size;
  chunk *ch;
};

enum { CHUNK_SIZE = 1u << 20 };
static pthread_mutex_t chunks_mu = PTHREAD_MUTEX_INITIALIZER;
static chunk *open_chunk; /* the one new images are carved from */

static void chunk_drop(chunk *c) { /* chunks_mu held */
  if (c == open_chunk)
    open_chunk = NULL;
  munmap(c->base, c->size);
  free(c);
}

/* size bytes (whole pages) of fresh read-write memory for an image, and
 * the chunk that holds them; NULL with errno. */
static uint8_t *chunk_take(size_t size, chunk **out) {
  pthread_mutex_lock(&chunks_mu);
  chunk *c = open_chunk;
  if (!c || c->size - c->used < size) {
    size_t csize = size > CHUNK_SIZE / 4 ? size : CHUNK_SIZE;
    c = malloc(sizeof *c);
    void *m = c ? mmap(NULL, csize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
    if (m == MAP_FAILED) {
      int e = c ? errno : ENOMEM;
      free(c);
      pthread_mutex_unlock(&chunks_mu);
      errno = e;
      return NULL;
    }
    *c = (chunk){m, csize, 0, 0};
    if (csize == CHUNK_SIZE) { /* the old open chunk takes no more */
      if (open_chunk && !open_chunk->live)
        chunk_drop(open_chunk);
      open_chunk = c;
    }
  }
  uint8_t *at = c->base + c->used;
  c->used += size;
  c->live++;
  *out = c;
  pthread_mutex_unlock(&chunks_mu);
  return at;
}

void xpj_elf_atfork(int phase) {
  if (phase == 0)
    pthread_mutex_lock(&chunks_mu);
  else
    pthread_mutex_unlock(&chunks_mu);
}

/* Gives back an image's pages (never handed out again). */
static void chunk_give(chunk *c) {
  pthread_mutex_lock(&chunks_mu);
  if (--c->live == 0) /* no mapping is kept with nothing in it */
    chunk_drop(c);
  pthread_mutex_unlock(&chunks_mu);
}

/* The parts of the image, in order; 0: a section that is not mapped. */
enum { PART_NONE, PART_CODE, PART_RO, PART_RW, NPARTS };

typedef struct sec {
  uint32_t type, link, info;
  uint64_t flags, off, size, align, entsize;
  uint32_t name_off;
  const char *name; /* "" when the object names no sections */
  int part;         /* PART_NONE: not mapped */
  uint64_t at;      /* offset in the image */
} sec;

/* What a symbol is while the object is linked. */
enum {
  SYM_ABS,       /* val is its value (symbol 0 too) */
  SYM_IMAGE,     /* val is its offset in the image (once laid out) */
  SYM_EXTERN,    /* val is the address resolve gave */
  SYM_UNLOADED,  /* defined in a section that is not mapped */
  SYM_UNDEFLOCAL /* undefined and local: nothing can bind it */
};

typedef struct ld {
  const uint8_t *obj;
  size_t len;
  char *err;
  size_t errsize;
  unsigned shnum;
  sec *secs;
  unsigned symtab; /* its section index */
  const sec *strtab;
  size_t nsyms;
  uint8_t *kind;  /* per symbol: SYM_* */
  uint64_t *val;  /* per symbol: see SYM_* */
  uint32_t *got;  /* per symbol: 0, or 1 + its GOT slot */
  uint32_t *stub; /* per symbol: 0, or 1 + its stub */
  uint32_t ngot, nstub;
  uint64_t got_at, stub_at;
  uint64_t part_at[NPARTS], part_end[NPARTS];
  uint8_t *base;
  chunk *ch; /* the mapping base is in */
  size_t size;
} ld;

/* ---- reading and messages -------------------------------------------- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}
static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> 8 * i);
}
static void wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> 8 * i);
}

__attribute__((format(printf, 3, 4))) static xpj_status
fail(ld *l, xpj_status st, const char *fmt, ...) {
  if (l->errsize) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, l->errsize, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* A name from the object, fit for a message: printable ASCII, at most 64
 * characters, quoted. */
typedef struct shown {
  char s[80];
} shown;

static shown show(const char *name) {
  shown o;
  size_t n = 0;
  o.s[n++] = '"';
  for (const char *p = name; *p && n <= 64; p++)
    o.s[n++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
  if (strlen(name) > 64) {
    memcpy(o.s + n, "...", 3);
    n += 3;
  }
  o.s[n++] = '"';
  o.s[n] = 0;
  return o;
}

/* The NUL-terminated string at idx of the string table s, or NULL when it
 * is not inside s. */
static const char *str_at(const ld *l, const sec *s, uint64_t idx) {
  if (idx >= s->size)
    return NULL;
  const char *p = (const char *)l->obj + s->off + idx;
  return memchr(p, 0, s->size - idx) ? p : NULL;
}

static bool pow2(uint64_t x) { return x && !(x & (x - 1)); }

static uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}

/* v, seen as a signed 64-bit value, fits 32 signed bits */
static bool fits_s32(uint64_t v) { return v + 0x80000000u <= 0xffffffffu; }

/* ---- the header and the sections -------------------------------------- */

static xpj_status read_header(ld *l, unsigned *shstrndx, uint64_t *shoff) {
  const uint8_t *h = l->obj;
  if (l->len < sizeof(Elf64_Ehdr))
    return fail(l, XPJ_ERR_INVALID,
                "%zu bytes are too few for an ELF header (64)", l->len);
  if (memcmp(h, ELFMAG, SELFMAG))
    return fail(l, XPJ_ERR_INVALID, "not an ELF file (bad magic)");
  if (h[EI_CLASS] != ELFCLASS64)
    return fail(l, XPJ_ERR_INVALID, "ELF class %u, not 64-bit (2)",
                h[EI_CLASS]);
  if (h[EI_DATA] != ELFDATA2LSB)
    return fail(l, XPJ_ERR_INVALID, "ELF data encoding %u, not little-endian",
                h[EI_DATA]);
  if (h[EI_VERSION] != EV_CURRENT || rd32(h + 20) != EV_CURRENT)
    return fail(l, XPJ_ERR_INVALID, "ELF version %u, not 1", h[EI_VERSION]);
  if (h[EI_OSABI] != ELFOSABI_NONE && h[EI_OSABI] != ELFOSABI_GNU)
    return fail(l, XPJ_ERR_INVALID, "OS ABI %u, not System V or GNU",
                h[EI_OSABI]);
  if (rd16(h + 16) != ET_REL)
    return fail(l, XPJ_ERR_INVALID,
                "ELF type %u, not a relocatable object (ET_REL)",
                rd16(h + 16));
  if (rd16(h + 18) != EM_X86_64)
    return fail(l, XPJ_ERR_INVALID, "machine %u, not x86-64 (%u)",
                rd16(h + 18), EM_X86_64);
  if (rd16(h + 52) != sizeof(Elf64_Ehdr) || rd16(h + 58) != SHDR_SIZE)
    return fail(l, XPJ_ERR_INVALID,
                "header size %u and section header size %u, not 64 and 64",
                rd16(h + 52), rd16(h + 58));
  *shoff = rd64(h + 40);
  l->shnum = rd16(h + 60);
  *shstrndx = rd16(h + 62);
  if (l->shnum == 0)
    return fail(l, XPJ_ERR_INVALID,
                "no section headers (or over 65279: not supported)");
  if (*shoff > l->len || (uint64_t)l->shnum * SHDR_SIZE > l->len - *shoff)
    return fail(l, XPJ_ERR_INVALID,
                "the %u section headers at offset %llu lie outside the "
                "object (%zu bytes)",
                l->shnum, (unsigned long long)*shoff, l->len);
  if (*shstrndx >= l->shnum && *shstrndx != SHN_UNDEF)
    return fail(l, XPJ_ERR_INVALID,
                "section name table index %u out of range (%u sections)",
                *shstrndx, l->shnum);
  return XPJ_OK;
}

static bool has_prefix(const char *s, const char *p) {
  return !strncmp(s, p, strlen(p));
}

/* Which part of the image an allocated section goes to, or PART_NONE when
 * it is skipped; anything refused fails. */
static xpj_status classify(ld *l, unsigned i) {
  sec *s = &l->secs[i];
  if (!(s->flags & SHF_ALLOC)) {
    if (s->type == SHT_REL && s->info > 0 && s->info < l->shnum &&
        (l->secs[s->info].flags & SHF_ALLOC))
      return fail(l, XPJ_ERR_INVALID,
                  "section %u (%s): REL relocations (implicit addends) are "
                  "not supported on x86-64",
                  i, show(s->name).s);
    return XPJ_OK; /* symbols, strings, debug info, .comment: not mapped */
  }
  if (s->flags & SHF_TLS)
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) is thread-local storage: not supported", i,
                show(s->name).s);
  if (s->type == SHT_INIT_ARRAY || s->type == SHT_FINI_ARRAY ||
      s->type == SHT_PREINIT_ARRAY || has_prefix(s->name, ".init_array") ||
      has_prefix(s->name, ".fini_array") ||
      has_prefix(s->name, ".preinit_array") ||
      has_prefix(s->name, ".ctors") || has_prefix(s->name, ".dtors") ||
      !strcmp(s->name, ".init") || !strcmp(s->name, ".fini"))
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) holds constructors or destructors: kernels "
                "have none, and nothing would run them",
                i, show(s->name).s);
  if (s->type == SHT_X86_64_UNWIND || s->type == SHT_NOTE ||
      !strcmp(s->name, ".eh_frame"))
    return XPJ_OK; /* unwind tables (never registered), notes */
  if (s->type != SHT_PROGBITS && s->type != SHT_NOBITS)
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) is allocated with type 0x%x, which the "
                "loader does not support",
                i, show(s->name).s, s->type);
  if (s->flags & SHF_COMPRESSED)
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) is compressed: not supported", i, show(s->name).s);
  if ((s->flags & SHF_WRITE) && (s->flags & SHF_EXECINSTR))
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) is writable and executable: refused", i,
                show(s->name).s);
  if (s->align == 0)
    s->align = 1;
  if (!pow2(s->align) || s->align > MAX_ALIGN)
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s): alignment %llu is not a power of two of "
                "at most %u",
                i, show(s->name).s, (unsigned long long)s->align, MAX_ALIGN);
  if (s->size > MAX_IMAGE)
    return fail(l, XPJ_ERR_INVALID,
                "section %u (%s) has %llu bytes: an image has at most %llu",
                i, show(s->name).s, (unsigned long long)s->size,
                (unsigned long long)MAX_IMAGE);
  s->part = (s->flags & SHF_EXECINSTR) ? PART_CODE
            : (s->flags & SHF_WRITE)   ? PART_RW
                                       : PART_RO;
  return XPJ_OK;
}

static xpj_status read_sections(ld *l) {
  unsigned shstrndx = 0;
  uint64_t shoff = 0;
  xpj_status st = read_header(l, &shstrndx, &shoff);
  if (st != XPJ_OK)
    return st;
  l->secs = calloc(l->shnum, sizeof *l->secs);
  if (!l->secs)
    return fail(l, XPJ_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; i < l->shnum; i++) {
    const uint8_t *h = l->obj + shoff + (uint64_t)i * SHDR_SIZE;
    sec *s = &l->secs[i];
    s->name_off = rd32(h);
    s->type = rd32(h + 4);
    s->flags = rd64(h + 8);
    s->off = rd64(h + 24);
    s->size = rd64(h + 32);
    s->link = rd32(h + 40);
    s->info = rd32(h + 44);
    s->align = rd64(h + 48);
    s->entsize = rd64(h + 56);
    s->name = "";
    if (i > 0 && s->type != SHT_NOBITS && s->type != SHT_NULL &&
        (s->off > l->len || s->size > l->len - s->off))
      return fail(l, XPJ_ERR_INVALID,
                  "section %u: %llu bytes at offset %llu lie outside the "
                  "object (%zu bytes)",
                  i, (unsigned long long)s->size, (unsigned long long)s->off,
                  l->len);
  }
  if (shstrndx != SHN_UNDEF) {
    const sec *ns = &l->secs[shstrndx];
    if (ns->type != SHT_STRTAB)
      return fail(l, XPJ_ERR_INVALID,
                  "the section name table (section %u) is not a string "
                  "table",
                  shstrndx);
    for (unsigned i = 1; i < l->shnum; i++) {
      l->secs[i].name = str_at(l, ns, l->secs[i].name_off);
      if (!l->secs[i].name)
        return fail(l, XPJ_ERR_INVALID,
                    "section %u: its name (offset %u) is outside the section "
                    "name table",
                    i, l->secs[i].name_off);
    }
  }
  unsigned nsymtab = 0;
  for (unsigned i = 1; i < l->shnum; i++) {
    if (l->secs[i].type == SHT_SYMTAB) {
      l->symtab = i;
      nsymtab++;
    }
    if ((st = classify(l, i)) != XPJ_OK)
      return st;
  }
  if (nsymtab != 1)
    return fail(l, XPJ_ERR_INVALID, "%u symbol tables, not one", nsymtab);
  const sec *t = &l->secs[l->symtab];
  if (t->entsize != SYM_SIZE || t->size % SYM_SIZE || t->size == 0)
    return fail(l, XPJ_ERR_INVALID,
                "the symbol table has entries of %llu bytes and %llu bytes "
                "in all (not a positive multiple of %u)",
                (unsigned long long)t->entsize, (unsigned long long)t->size,
                SYM_SIZE);
  if (t->link == 0 || t->link >= l->shnum ||
      l->secs[t->link].type != SHT_STRTAB)
    return fail(l, XPJ_ERR_INVALID,
                "the symbol table's string table (section %u) is not one",
                t->link);
  l->strtab = &l->secs[t->link];
  l->nsyms = t->size / SYM_SIZE;
  return XPJ_OK;
}

/* ---- symbols ----------------------------------------------------------- */

typedef struct rsym {
  const char *name;
  uint8_t bind, type;
  uint16_t shndx;
  uint64_t value, size;
} rsym;

/* Symbol i; false when its name is not inside the string table. */
static bool read_sym(const ld *l, size_t i, rsym *r) {
  const uint8_t *p = l->obj + l->secs[l->symtab].off + i * SYM_SIZE;
  uint32_t name = rd32(p);
  r->bind = p[4] >> 4;
  r->type = p[4] & 15;
  r->shndx = rd16(p + 6);
  r->value = rd64(p + 8);
  r->size = rd64(p + 16);
  r->name = str_at(l, l->strtab, name);
  return r->name != NULL;
}

/* What symbol i is called, for a message. */
static shown sym_shown(const ld *l, size_t i) {
  rsym r;
  if (i >= l->nsyms || !read_sym(l, i, &r)) {
    shown o;
    snprintf(o.s, sizeof o.s, "#%zu", i);
    return o;
  }
  if (!r.name[0] && r.type == STT_SECTION && r.shndx < l->shnum)
    return show(l->secs[r.shndx].name);
  return show(r.name);
}

/* Classifies every symbol, binds the undefined ones through resolve and
 * finds entry (*entry_sym). */
static xpj_status read_symbols(ld *l, const char *entry,
                               xpj_elf_resolve_fn resolve, void *ctx,
                               size_t *entry_sym) {
  l->kind = calloc(l->nsyms, 1);
  l->val = calloc(l->nsyms, sizeof *l->val);
  l->got = calloc(l->nsyms, sizeof *l->got);
  l->stub = calloc(l->nsyms, sizeof *l->stub);
  if (!l->kind || !l->val || !l->got || !l->stub)
    return fail(l, XPJ_ERR_NOMEM, "out of memory");
  *entry_sym = 0;
  for (size_t i = 1; i < l->nsyms; i++) {
    rsym r;
    if (!read_sym(l, i, &r))
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %zu: its name is outside the string table", i);
    if (r.bind != STB_LOCAL && r.bind != STB_GLOBAL && r.bind != STB_WEAK &&
        r.bind != STB_GNU_UNIQUE)
      return fail(l, XPJ_ERR_INVALID, "symbol %s: binding %u not supported",
                  show(r.name).s, r.bind);
    if (r.type == STT_TLS)
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %s is thread-local: not supported", show(r.name).s);
    if (r.type == STT_GNU_IFUNC)
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %s is an indirect function (IFUNC): not supported",
                  show(r.name).s);
    if (r.shndx == SHN_UNDEF) {
      if (r.bind == STB_LOCAL) {
        l->kind[i] = SYM_UNDEFLOCAL;
        continue;
      }
      if (!r.name[0])
        return fail(l, XPJ_ERR_INVALID,
                    "symbol %zu is undefined and has no name", i);
      void *a = resolve ? resolve(ctx, r.name) : NULL;
      if (!a)
        return fail(l, XPJ_ERR_INVALID,
                    "undefined symbol %s is not available to kernels", show(r.name).s);
      l->kind[i] = SYM_EXTERN;
      l->val[i] = (uint64_t)(uintptr_t)a;
      continue;
    }
    if (r.shndx == SHN_ABS) {
      l->kind[i] = SYM_ABS;
      l->val[i] = r.value;
      continue;
    }
    if (r.shndx == SHN_COMMON) {
      /* laid out with the writable data; value is the alignment */
      if (r.value == 0)
        r.value = 1;
      if (!pow2(r.value) || r.value > MAX_ALIGN || r.size > MAX_IMAGE)
        return fail(l, XPJ_ERR_INVALID,
                    "common symbol %s: %llu bytes aligned to %llu (at most "
                    "%llu bytes, a power-of-two alignment of at most %u)",
                    show(r.name).s, (unsigned long long)r.size,
                    (unsigned long long)r.value,
                    (unsigned long long)MAX_IMAGE, MAX_ALIGN);
      l->kind[i] = SYM_IMAGE;
      continue;
    }
    if (r.shndx >= SHN_LORESERVE)
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %s: section index 0x%x is not supported", show(r.name).s,
                  r.shndx);
    if (r.shndx >= l->shnum)
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %s: section index %u out of range (%u sections)",
                  show(r.name).s, r.shndx, l->shnum);
    const sec *s = &l->secs[r.shndx];
    if (!s->part) {
      l->kind[i] = SYM_UNLOADED;
      continue;
    }
    if (r.value > s->size)
      return fail(l, XPJ_ERR_INVALID,
                  "symbol %s: value %llu is past the end of its section %s "
                  "(%llu bytes)",
                  show(r.name).s, (unsigned long long)r.value, show(s->name).s,
                  (unsigned long long)s->size);
    l->kind[i] = SYM_IMAGE;
    l->val[i] = r.value; /* plus the section's offset, once laid out */
    if (r.bind != STB_LOCAL && !strcmp(r.name, entry)) {
      if (*entry_sym)
        return fail(l, XPJ_ERR_INVALID, "symbol %s is defined twice", show(r.name).s);
      if (!(s->flags & SHF_EXECINSTR) || r.value >= s->size ||
          (r.type != STT_FUNC && r.type != STT_NOTYPE))
        return fail(l, XPJ_ERR_INVALID,
                    "symbol %s is not a function in an executable section",
                    show(r.name).s);
      *entry_sym = i;
    }
  }
  if (!*entry_sym)
    return fail(l, XPJ_ERR_NOT_FOUND, "no symbol %s in the object",
                show(entry).s);
  return XPJ_OK;
}

/* ---- relocations --------------------------------------------------------- */

typedef struct rela {
  uint64_t off;
  uint32_t sym, type;
  uint64_t addend;
  unsigned width; /* bytes written */
} rela;

static const char *rel_name(uint32_t t) {
  switch (t) {
  case R_X86_64_NONE: return "R_X86_64_NONE";
  case R_X86_64_64: return "R_X86_64_64";
  case R_X86_64_PC32: return "R_X86_64_PC32";
  case R_X86_64_PLT32: return "R_X86_64_PLT32";
  case R_X86_64_32: return "R_X86_64_32";
  case R_X86_64_32S: return "R_X86_64_32S";
  case R_X86_64_PC64: return "R_X86_64_PC64";
  case R_X86_64_GOTPCREL: return "R_X86_64_GOTPCREL";
  case R_X86_64_GOTPCRELX: return "R_X86_64_GOTPCRELX";
  case R_X86_64_REX_GOTPCRELX: return "R_X86_64_REX_GOTPCRELX";
  }
  return NULL;
}

static bool needs_got(uint32_t t) {
  return t == R_X86_64_GOTPCREL || t == R_X86_64_GOTPCRELX ||
         t == R_X86_64_REX_GOTPCRELX;
}

/* A 32-bit value whose target, if external, must be near: its stub. */
static bool needs_near(uint32_t t) {
  return t == R_X86_64_PC32 || t == R_X86_64_PLT32 || t == R_X86_64_32 ||
         t == R_X86_64_32S;
}

/* The relocation section r applies to a mapped section (*target), or 0
 * when it is skipped; anything malformed fails. */
static xpj_status rela_target(ld *l, unsigned r, const sec **target) {
  const sec *s = &l->secs[r];
  *target = NULL;
  if (s->info == 0 || s->info >= l->shnum)
    return fail(l, XPJ_ERR_INVALID,
                "relocation section %u (%s) applies to section %u, out of "
                "range (%u sections)",
                r, show(s->name).s, s->info, l->shnum);
  const sec *t = &l->secs[s->info];
  if (!t->part)
    return XPJ_OK; /* .eh_frame, debug info: not mapped, not relocated */
  if (s->link != l->symtab)
    return fail(l, XPJ_ERR_INVALID,
                "relocation section %u (%s) uses section %u as its symbol "
                "table, not the symbol table (%u)",
                r, show(s->name).s, s->link, l->symtab);
  if (s->entsize != RELA_SIZE || s->size % RELA_SIZE)
    return fail(l, XPJ_ERR_INVALID,
                "relocation section %u (%s): entries of %llu bytes, %llu "
                "bytes in all (not a multiple of %u)",
                r, show(s->name).s, (unsigned long long)s->entsize,
                (unsigned long long)s->size, RELA_SIZE);
  if (t->type == SHT_NOBITS)
    return fail(l, XPJ_ERR_INVALID,
                "relocation section %u (%s) applies to %s, which has no "
                "contents (NOBITS)",
                r, show(s->name).s, show(t->name).s);
  *target = t;
  return XPJ_OK;
}

/* Entry k of relocation section r (applying to t), checked. */
static xpj_status read_rela(ld *l, unsigned r, const sec *t, uint64_t k,
                            rela *e) {
  const uint8_t *p = l->obj + l->secs[r].off + k * RELA_SIZE;
  uint64_t info = rd64(p + 8);
  e->off = rd64(p);
  e->sym = (uint32_t)(info >> 32);
  e->type = (uint32_t)info;
  e->addend = rd64(p + 16);
  if (e->sym >= l->nsyms)
    return fail(l, XPJ_ERR_INVALID,
                "relocation %llu of %s: symbol index %u out of range (%zu "
                "symbols)",
                (unsigned long long)k, show(t->name).s, e->sym, l->nsyms);
  if (!rel_name(e->type))
    return fail(l, XPJ_ERR_INVALID,
                "relocation %llu of %s: type %u is not supported",
                (unsigned long long)k, show(t->name).s, e->type);
  e->width = e->type == R_X86_64_NONE                              ? 0
             : e->type == R_X86_64_64 || e->type == R_X86_64_PC64 ? 8
                                                                  : 4;
  if (e->off > t->size || e->width > t->size - e->off)
    return fail(l, XPJ_ERR_INVALID,
                "relocation %llu of %s (%s): %u bytes at offset %llu are "
                "outside the section (%llu bytes)",
                (unsigned long long)k, show(t->name).s, rel_name(e->type), e->width,
                (unsigned long long)e->off, (unsigned long long)t->size);
  uint8_t kind = l->kind[e->sym];
  if (e->type != R_X86_64_NONE &&
      (kind == SYM_UNLOADED || kind == SYM_UNDEFLOCAL))
    return fail(l, XPJ_ERR_INVALID,
                "relocation %llu of %s (%s) refers to %s, %s",
                (unsigned long long)k, show(t->name).s, rel_name(e->type),
                sym_shown(l, e->sym).s,
                kind == SYM_UNLOADED
                    ? "defined in a section that is not loaded"
                    : "an undefined local symbol");
  return XPJ_OK;
}

/* First pass: check every relocation that will be applied, and count the
 * GOT slots and stubs they need. */
static xpj_status scan_relocations(ld *l) {
  uint64_t total = 0;
  for (unsigned r = 1; r < l->shnum; r++) {
    const sec *t;
    if (l->secs[r].type != SHT_RELA)
      continue;
    xpj_status st = rela_target(l, r, &t);
    if (st != XPJ_OK)
      return st;
    if (!t)
      continue;
    total += l->secs[r].size / RELA_SIZE;
    if (total > MAX_RELOCS)
      return fail(l, XPJ_ERR_INVALID, "more than %llu relocations",
                  (unsigned long long)MAX_RELOCS);
    for (uint64_t k = 0; k < l->secs[r].size / RELA_SIZE; k++) {
      rela e;
      if ((st = read_rela(l, r, t, k, &e)) != XPJ_OK)
        return st;
      bool ext = l->kind[e.sym] == SYM_EXTERN;
      if ((needs_got(e.type) || (ext && needs_near(e.type))) &&
          !l->got[e.sym])
        l->got[e.sym] = ++l->ngot;
      if (ext && needs_near(e.type) && !l->stub[e.sym])
        l->stub[e.sym] = ++l->nstub;
    }
  }
  return XPJ_OK;
}

/* ---- layout, mapping, relocation ----------------------------------------- */

static xpj_status grow(ld *l, uint64_t *at, uint64_t align, uint64_t size) {
  *at = align_up(*at, align); /* at <= MAX_IMAGE, align <= a page */
  if (*at > MAX_IMAGE || size > MAX_IMAGE - *at)
    return fail(l, XPJ_ERR_INVALID,
                "the image would take more than %llu bytes",
                (unsigned long long)MAX_IMAGE);
  *at += size;
  return XPJ_OK;
}

static xpj_status layout(ld *l, uint64_t page) {
  uint64_t at = 0;
  xpj_status st;
  for (int part = PART_CODE; part < NPARTS; part++) {
    l->part_at[part] = at;
    for (unsigned i = 1; i < l->shnum; i++) {
      sec *s = &l->secs[i];
      if (s->part != part)
        continue;
      if ((st = grow(l, &at, s->align, s->size)) != XPJ_OK)
        return st;
      s->at = at - s->size;
    }
    if (part == PART_CODE) {
      if ((st = grow(l, &at, STUB_SIZE, (uint64_t)l->nstub * STUB_SIZE)))
        return st;
      l->stub_at = at - (uint64_t)l->nstub * STUB_SIZE;
    } else if (part == PART_RO) {
      if ((st = grow(l, &at, 8, (uint64_t)l->ngot * 8)))
        return st;
      l->got_at = at - (uint64_t)l->ngot * 8;
    } else {
      for (size_t i = 1; i < l->nsyms; i++) {
        rsym r;
        if (l->kind[i] != SYM_IMAGE)
          continue;
        if (!read_sym(l, i, &r) || r.shndx != SHN_COMMON)
          continue;
        if ((st = grow(l, &at, r.value ? r.value : 1, r.size)))
          return st;
        l->val[i] = at - r.size;
      }
    }
    l->part_end[part] = at;
    /* the constants share the code's pages (and protection) */
    if (part != PART_CODE && (st = grow(l, &at, page, 0)))
      return st;
  }
  l->size = at ? (size_t)at : (size_t)page;
  /* symbols defined in sections: offsets in the image */
  for (size_t i = 1; i < l->nsyms; i++) {
    rsym r;
    if (l->kind[i] != SYM_IMAGE)
      continue;
    if (read_sym(l, i, &r) && r.shndx != SHN_COMMON)
      l->val[i] += l->secs[r.shndx].at;
  }
  return XPJ_OK;
}

/* The address symbol i stands for in a relocation of type t. */
static uint64_t sym_addr(const ld *l, uint32_t i, uint32_t t) {
  uint64_t b = (uint64_t)(uintptr_t)l->base;
  switch (l->kind[i]) {
  case SYM_IMAGE:
    return b + l->val[i];
  case SYM_EXTERN:
    return needs_near(t) ? b + l->stub_at + (uint64_t)(l->stub[i] - 1) *
                                                STUB_SIZE
                         : l->val[i];
  default:
    return l->val[i];
  }
}

static xpj_status apply(ld *l, const sec *t, uint64_t k, const rela *e) {
  uint8_t *where = l->base + t->at + e->off;
  uint64_t P = (uint64_t)(uintptr_t)where, A = e->addend;
  uint64_t S = sym_addr(l, e->sym, e->type), v = 0;
  bool ok = true;
  switch (e->type) {
  case R_X86_64_NONE:
    return XPJ_OK;
  case R_X86_64_64:
    wr64(where, S + A);
    return XPJ_OK;
  case R_X86_64_PC64:
    wr64(where, S + A - P);
    return XPJ_OK;
  case R_X86_64_PC32:
  case R_X86_64_PLT32:
    v = S + A - P;
    ok = fits_s32(v);
    break;
  case R_X86_64_GOTPCREL:
  case R_X86_64_GOTPCRELX:
  case R_X86_64_REX_GOTPCRELX:
    v = (uint64_t)(uintptr_t)l->base + l->got_at +
        (uint64_t)(l->got[e->sym] - 1) * 8 + A - P;
    ok = fits_s32(v);
    break;
  case R_X86_64_32:
    v = S + A;
    ok = v <= 0xffffffffu;
    break;
  case R_X86_64_32S:
    v = S + A;
    ok = fits_s32(v);
    break;
  }
  if (!ok)
    return fail(l, XPJ_ERR_INVALID,
                "relocation %llu of %s (%s against %s%+lld): the value "
                "0x%llx does not fit 32 bits",
                (unsigned long long)k, show(t->name).s, rel_name(e->type),
                sym_shown(l, e->sym).s, (long long)A, (unsigned long long)v);
  wr32(where, (uint32_t)v);
  return XPJ_OK;
}

static xpj_status map_image(ld *l) {
  uint8_t *m = chunk_take(l->size, &l->ch);
  if (!m)
    return fail(l, errno == ENOMEM ? XPJ_ERR_NOMEM : XPJ_ERR_DEVICE,
                "cannot map %zu bytes: %s", l->size, strerror(errno));
  l->base = m;
  for (unsigned i = 1; i < l->shnum; i++) {
    const sec *s = &l->secs[i];
    if (s->part && s->type == SHT_PROGBITS && s->size)
      memcpy(l->base + s->at, l->obj + s->off, s->size);
  }
  for (size_t i = 1; i < l->nsyms; i++) {
    if (l->got[i])
      wr64(l->base + l->got_at + (uint64_t)(l->got[i] - 1) * 8,
           sym_addr(l, (uint32_t)i, R_X86_64_64));
    if (l->stub[i]) { /* jmp *slot(%rip); int3; int3 */
      uint64_t at = l->stub_at + (uint64_t)(l->stub[i] - 1) * STUB_SIZE;
      uint64_t slot = l->got_at + (uint64_t)(l->got[i] - 1) * 8;
      uint64_t next = at + 6;
      uint8_t *p = l->base + at;
      p[0] = 0xff;
      p[1] = 0x25;
      wr32(p + 2, (uint32_t)(slot - next)); /* both in the image */
      p[6] = p[7] = 0xcc;
    }
  }
  for (unsigned r = 1; r < l->shnum; r++) {
    const sec *t;
    if (l->secs[r].type != SHT_RELA)
      continue;
    xpj_status st = rela_target(l, r, &t);
    if (st != XPJ_OK)
      return st;
    if (!t)
      continue;
    for (uint64_t k = 0; k < l->secs[r].size / RELA_SIZE; k++) {
      rela e;
      if ((st = read_rela(l, r, t, k, &e)) != XPJ_OK ||
          (st = apply(l, t, k, &e)) != XPJ_OK)
        return st;
    }
  }
  /* W^X: code, constants and the GOT become read+execute, in one
   * mprotect (the parts are adjacent; a second one for the constants
   * alone was a tenth of a cached kernel's load); writable data stays
   * read+write, never executable */
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t end = align_up(l->part_end[PART_RO], page);
  if (end > l->part_at[PART_CODE] &&
      mprotect(l->base + l->part_at[PART_CODE], end - l->part_at[PART_CODE],
               PROT_READ | PROT_EXEC) != 0)
    return fail(l, errno == ENOMEM ? XPJ_ERR_NOMEM : XPJ_ERR_DEVICE,
                "cannot make the code of the image executable: %s",
                strerror(errno));
  return XPJ_OK;
}

/* ---- the API ---------------------------------------------------------- */

bool xpj_elf_supported(void) {
#if defined(__x86_64__) && defined(__linux__)
  return true;
#else
  return false;
#endif
}

xpj_status xpj_elf_load(const uint8_t *obj, size_t len, const char *entry,
                        xpj_elf_resolve_fn resolve, void *ctx,
                        xpj_elf_image **out, void **entry_addr, char *err,
                        size_t errsize) {
  ld l = {0};
  l.obj = obj;
  l.len = len;
  l.err = err;
  l.errsize = errsize;
  if (errsize)
    err[0] = 0;
  if (out)
    *out = NULL;
  if (entry_addr)
    *entry_addr = NULL;
  xpj_status st = XPJ_OK;
  size_t entry_sym = 0;
  long pg = sysconf(_SC_PAGESIZE);
  uint64_t page = pg > 0 && pow2((uint64_t)pg) ? (uint64_t)pg : 4096;
  if (!xpj_elf_supported())
    st = fail(&l, XPJ_ERR_UNSUPPORTED,
              "the object loader runs on x86-64 Linux only");
  else if (!out || !entry_addr || !entry || (!obj && len))
    st = fail(&l, XPJ_ERR_INVALID, "xpj_elf_load: bad arguments");
  else if (len > MAX_OBJECT)
    st = fail(&l, XPJ_ERR_INVALID, "the object has %zu bytes (at most %llu)",
              len, (unsigned long long)MAX_OBJECT);
  if (st == XPJ_OK)
    st = read_sections(&l);
  if (st == XPJ_OK)
    st = read_symbols(&l, entry, resolve, ctx, &entry_sym);
  if (st == XPJ_OK)
    st = scan_relocations(&l);
  if (st == XPJ_OK)
    st = layout(&l, page);
  if (st == XPJ_OK)
    st = map_image(&l);
  xpj_elf_image *img = NULL;
  if (st == XPJ_OK && !(img = malloc(sizeof *img)))
    st = fail(&l, XPJ_ERR_NOMEM, "out of memory");
  if (st == XPJ_OK) {
    img->base = l.base;
    img->size = l.size;
    img->ch = l.ch;
    *out = img;
    *entry_addr = l.base + l.val[entry_sym];
  } else if (l.base) {
    chunk_give(l.ch);
  }
  free(l.secs);
  free(l.kind);
  free(l.val);
  free(l.got);
  free(l.stub);
  return st;
}

void xpj_elf_unload(xpj_elf_image *img) {
  if (!img)
    return;
  chunk_give(img->ch);
  free(img);
}

void xpj_elf_image_range(const xpj_elf_image *img, void **base,
                         size_t *size) {
  *base = img ? img->base : NULL;
  *size = img ? img->size : 0;
}
