/* SPDX-License-Identifier: MIT */
/*
 * agent/cfi.c - builds the compact DWARF CFI table of a loaded module from its in-memory
 * .eh_frame_hdr and .eh_frame (x86_64 and aarch64: register numbers and the return address's
 * initial rule from agent/arch.h). Every FDE's CFA program is run once, here, and each row is
 * reduced to "CFA = sp|fp + off, RA at CFA + off (or still in the link register), saved fp at
 * CFA + off or unchanged"; rules the step function cannot evaluate (DWARF expressions,
 * registers other than sp/fp) become "other", so the sampler falls back to frame pointers there.
 * A Go module's functions, which have no .eh_frame, get rows from its pclntab's SP tables (x86-64,
 * Go 1.18 and 1.19; below, ag_cfi_go_walk).
 * Context: outside signal context (modules.c, inside dl_iterate_phdr); allocates. The input is
 * treated as hostile: every read is bounds-checked against the module's PT_LOAD ranges and a
 * corrupt FDE is skipped, never followed outside them. Must not be called from a signal handler.
 */
#include "agent/cfi.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* DWARF register numbers of the architecture the agent runs on (agent/arch.h). */
#define AG_CFI_REG_FP AG_DWARF_REG_FP
#define AG_CFI_REG_SP AG_DWARF_REG_SP
#define AG_CFI_REG_RA AG_DWARF_REG_RA

/* Pointer encodings (LSB 4.1, .eh_frame). */
#define AG_PE_OMIT     0xff
#define AG_PE_ABSPTR   0x00
#define AG_PE_ULEB128  0x01
#define AG_PE_UDATA2   0x02
#define AG_PE_UDATA4   0x03
#define AG_PE_UDATA8   0x04
#define AG_PE_SLEB128  0x09
#define AG_PE_SDATA2   0x0a
#define AG_PE_SDATA4   0x0b
#define AG_PE_SDATA8   0x0c
#define AG_PE_PCREL    0x10
#define AG_PE_DATAREL  0x30
#define AG_PE_INDIRECT 0x80

#define AG_CFI_STACK_MAX 8  /* DW_CFA_remember_state depth */
#define AG_CFI_CIE_CACHE 16 /* CIEs remembered while walking one module */

struct ag_cfi_cur {
    const uint8_t *p;
    const uint8_t *end;
    bool bad; /* sticky: a read went past end or met an unsupported encoding */
};

enum ag_cfi_rule_kind {
    AG_RULE_SAME = 0, /* unchanged (the initial rule of fp, and of aarch64's RA in x30) */
    AG_RULE_OFF,      /* saved at CFA + off */
    AG_RULE_UNDEF,    /* undefined: for the RA, the end of the stack */
    AG_RULE_OTHER,    /* register, expression or val_* rule: not supported */
};

struct ag_cfi_rule {
    enum ag_cfi_rule_kind kind;
    int64_t off;
};

struct ag_cfi_state {
    uint64_t cfa_reg;
    int64_t cfa_off;
    bool cfa_expr;
    struct ag_cfi_rule ra, fp;
};

struct ag_cfi_cie {
    uint64_t addr; /* runtime address of the record; 0 for an empty cache slot */
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    bool aug_z;
    const uint8_t *insns, *insns_end;
};

/* A row while the table is being built; seq keeps the sort stable. */
struct ag_cfi_tmp {
    struct ag_cfi_row row;
    uint32_t seq;
};

struct ag_cfi_builder {
    uint64_t base;
    const struct ag_cfi_span *spans;
    size_t n_spans;
    struct ag_cfi_tmp *rows;
    size_t n, cap;
    size_t fde_first; /* index of the current FDE's first row */
    size_t fdes;
    struct ag_cfi_cie cies[AG_CFI_CIE_CACHE];
    size_t cie_next;
    _Atomic int *cancel; /* or NULL */
};

/* Returns a cursor over [addr, end of the readable span containing addr), or a bad one. */
static struct ag_cfi_cur
ag_cfi_cur_at(const struct ag_cfi_builder *b, uint64_t addr)
{
    struct ag_cfi_cur c = { NULL, NULL, true };

    for (size_t i = 0; i < b->n_spans; i++) {
        if (addr >= b->spans[i].lo && addr < b->spans[i].hi) {
            c.p = (const uint8_t *)(uintptr_t)addr;
            c.end = (const uint8_t *)(uintptr_t)b->spans[i].hi;
            c.bad = false;
            break;
        }
    }
    return c;
}

static uint64_t
ag_cfi_fixed(struct ag_cfi_cur *c, size_t n)
{
    uint64_t v = 0;

    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    for (size_t i = 0; i < n; i++) { /* little-endian, unaligned */
        v |= (uint64_t)c->p[i] << (8 * i);
    }
    c->p += n;
    return v;
}

/*
 * Reads the 7-bit groups of one LEB128 number: *bits gets how many bits they hold and *last the
 * final byte, whose bit 6 is the sign of a signed one.
 */
static uint64_t
ag_cfi_leb128(struct ag_cfi_cur *c, unsigned *bits, uint8_t *last)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t byte = 0;

    while (!c->bad) {
        if (c->p >= c->end || shift > 63) {
            c->bad = true;
            break;
        }
        byte = *c->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80)) {
            break;
        }
    }
    *bits = shift;
    *last = byte;
    return c->bad ? 0 : v;
}

static uint64_t
ag_cfi_uleb(struct ag_cfi_cur *c)
{
    unsigned bits;
    uint8_t last;

    return ag_cfi_leb128(c, &bits, &last);
}

static int64_t
ag_cfi_sleb(struct ag_cfi_cur *c)
{
    unsigned bits;
    uint8_t last;
    uint64_t v = ag_cfi_leb128(c, &bits, &last);

    if (c->bad) {
        return 0;
    }
    if (bits < 64 && (last & 0x40)) {
        v |= ~(uint64_t)0 << bits;
    }
    return (int64_t)v;
}

/*
 * Reads a pointer in encoding enc. datarel is the base of DW_EH_PE_datarel (the .eh_frame_hdr
 * address in the search table). Indirect, textrel, funcrel and aligned are not supported.
 */
static uint64_t
ag_cfi_encoded(struct ag_cfi_cur *c, uint8_t enc, uint64_t datarel)
{
    uint64_t field = (uint64_t)(uintptr_t)c->p;
    uint64_t v;

    switch (enc & 0x0f) {
    case AG_PE_ABSPTR:
    case AG_PE_UDATA8:
    case AG_PE_SDATA8:
        v = ag_cfi_fixed(c, 8);
        break;
    case AG_PE_ULEB128:
        v = ag_cfi_uleb(c);
        break;
    case AG_PE_SLEB128:
        v = (uint64_t)ag_cfi_sleb(c);
        break;
    case AG_PE_UDATA2:
        v = ag_cfi_fixed(c, 2);
        break;
    case AG_PE_SDATA2:
        v = (uint64_t)(int64_t)(int16_t)ag_cfi_fixed(c, 2);
        break;
    case AG_PE_UDATA4:
        v = ag_cfi_fixed(c, 4);
        break;
    case AG_PE_SDATA4:
        v = (uint64_t)(int64_t)(int32_t)ag_cfi_fixed(c, 4);
        break;
    default:
        c->bad = true;
        return 0;
    }
    switch (enc & 0x70) {
    case 0:
        break;
    case AG_PE_PCREL:
        v += field;
        break;
    case AG_PE_DATAREL:
        if (datarel == 0) {
            c->bad = true;
        }
        v += datarel;
        break;
    default:
        c->bad = true;
    }
    if (enc & AG_PE_INDIRECT) {
        c->bad = true;
    }
    return v;
}

/*
 * Opens the record (CIE or FDE) at addr: *body covers it after the length, and *id_field is
 * the address of its CIE id / CIE pointer. Returns the length, 0 for the terminator, or
 * UINT64_MAX when the record is corrupt or 64-bit (not produced for .eh_frame in practice).
 */
static uint64_t
ag_cfi_record(const struct ag_cfi_builder *b, uint64_t addr, struct ag_cfi_cur *body)
{
    struct ag_cfi_cur c = ag_cfi_cur_at(b, addr);
    uint64_t len = ag_cfi_fixed(&c, 4);

    if (c.bad || len == 0xffffffffu) {
        return UINT64_MAX;
    }
    if (len == 0) {
        return 0;
    }
    if (len > (uint64_t)(c.end - c.p) || len < 4) {
        return UINT64_MAX;
    }
    body->p = c.p;
    body->end = c.p + len;
    body->bad = false;
    return len;
}

/* Parses (or finds in the cache) the CIE at addr. */
static const struct ag_cfi_cie *
ag_cfi_cie_get(struct ag_cfi_builder *b, uint64_t addr)
{
    struct ag_cfi_cie cie = { 0 };
    struct ag_cfi_cur c;
    const char *aug;
    uint8_t version;
    size_t aug_len;
    uint64_t len;

    for (size_t i = 0; i < AG_CFI_CIE_CACHE; i++) {
        if (b->cies[i].addr == addr) {
            return &b->cies[i];
        }
    }
    len = ag_cfi_record(b, addr, &c);
    if (len == 0 || len == UINT64_MAX || ag_cfi_fixed(&c, 4) != 0) {
        return NULL; /* the terminator, corrupt, or not a CIE */
    }
    version = (uint8_t)ag_cfi_fixed(&c, 1);
    if (c.bad || (version != 1 && version != 3 && version != 4)) {
        return NULL;
    }
    aug = (const char *)c.p;
    aug_len = strnlen(aug, (size_t)(c.end - c.p));
    if (aug_len == (size_t)(c.end - c.p)) {
        return NULL;
    }
    c.p += aug_len + 1;
    if (version == 4) {
        uint8_t addr_size = (uint8_t)ag_cfi_fixed(&c, 1);

        if (addr_size != 8 || ag_cfi_fixed(&c, 1) != 0) {
            return NULL; /* segment selectors are not supported */
        }
    }
    cie.code_align = ag_cfi_uleb(&c);
    cie.data_align = ag_cfi_sleb(&c);
    cie.ra_reg = version == 1 ? ag_cfi_fixed(&c, 1) : ag_cfi_uleb(&c);
    cie.fde_enc = AG_PE_ABSPTR;
    if (aug[0] == 'z') {
        struct ag_cfi_cur a;

        len = ag_cfi_uleb(&c);
        a = c;

        if (c.bad || len > (uint64_t)(c.end - c.p)) {
            return NULL;
        }
        a.end = c.p + len;
        c.p += len;
        cie.aug_z = true;
        for (size_t i = 1; i < aug_len && !a.bad; i++) {
            if (aug[i] == 'R') {
                cie.fde_enc = (uint8_t)ag_cfi_fixed(&a, 1);
            } else if (aug[i] == 'L') {
                (void)ag_cfi_fixed(&a, 1);
            } else if (aug[i] == 'P') {
                uint8_t enc = (uint8_t)ag_cfi_fixed(&a, 1);

                (void)ag_cfi_encoded(&a, enc & 0x7f, 0); /* personality: skipped */
            } else if (aug[i] != 'S' && aug[i] != 'B' && aug[i] != 'G') {
                break; /* unknown letter: the z length still lets us skip the data */
            }
        }
    } else if (aug_len != 0) {
        return NULL; /* pre-'z' augmentations ("eh") cannot be skipped safely */
    }
    if (c.bad || cie.code_align == 0) {
        return NULL;
    }
    cie.insns = c.p;
    cie.insns_end = c.end;
    cie.addr = addr;
    b->cies[b->cie_next] = cie;
    b->cie_next = (b->cie_next + 1) % AG_CFI_CIE_CACHE;
    return &b->cies[(b->cie_next + AG_CFI_CIE_CACHE - 1) % AG_CFI_CIE_CACHE];
}

static void
ag_cfi_row_make(const struct ag_cfi_state *s, uint32_t addr, struct ag_cfi_row *r)
{
    memset(r, 0, sizeof(*r));
    r->addr = addr;
    if (s->cfa_expr || s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX) {
        r->flags = AG_CFI_CFA_OTHER;
    } else if (s->cfa_reg == AG_CFI_REG_SP) {
        r->flags = AG_CFI_CFA_SP;
    } else if (s->cfa_reg == AG_CFI_REG_FP) {
        r->flags = AG_CFI_CFA_FP;
    } else {
        r->flags = AG_CFI_CFA_OTHER;
    }
    if ((r->flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_OTHER) {
        r->cfa_off = (int32_t)s->cfa_off;
    }
    if (s->ra.kind == AG_RULE_OFF && s->ra.off >= INT16_MIN && s->ra.off <= INT16_MAX) {
        r->flags |= AG_CFI_RA_AT;
        r->ra_off = (int16_t)s->ra.off;
    } else if (s->ra.kind == AG_RULE_UNDEF) {
        r->flags |= AG_CFI_RA_END;
    } else if (s->ra.kind == AG_RULE_SAME && AG_ARCH_LINK_REGISTER) {
        r->flags |= AG_CFI_RA_LR; /* not stored yet: the caller's pc is x30 */
    }
    if (s->fp.kind == AG_RULE_SAME) {
        r->flags |= AG_CFI_FP_SAME;
    } else if (s->fp.kind == AG_RULE_OFF && s->fp.off % 8 == 0 && s->fp.off / 8 >= INT8_MIN &&
               s->fp.off / 8 <= INT8_MAX) {
        r->flags |= AG_CFI_FP_AT;
        r->fp_off8 = (int8_t)(s->fp.off / 8);
    } else if (s->fp.kind == AG_RULE_OFF && (r->flags & AG_CFI_RA_MASK) == AG_CFI_RA_AT &&
               s->fp.off == (int64_t)r->ra_off - 8) {
        r->flags |= AG_CFI_FP_BELOW_RA; /* a frame record far from the CFA */
    }
}

static int
ag_cfi_push(struct ag_cfi_builder *b, const struct ag_cfi_row *row)
{
    if (b->n > b->fde_first && b->rows[b->n - 1].row.addr == row->addr) {
        b->rows[b->n - 1].row = *row; /* an advance by zero: the later state wins */
        return 0;
    }
    if (b->n == b->cap) {
        size_t ncap = b->cap == 0 ? 1024 : b->cap * 2;
        struct ag_cfi_tmp *r = realloc(b->rows, ncap * sizeof(*r));

        if (r == NULL) {
            return -ENOMEM;
        }
        b->rows = r;
        b->cap = ncap;
    }
    b->rows[b->n].row = *row;
    b->rows[b->n].seq = (uint32_t)b->n;
    b->n++;
    return 0;
}

/* Emits the row of state s at runtime address loc, if it falls in the module's 4 GiB. */
static int
ag_cfi_emit(struct ag_cfi_builder *b, const struct ag_cfi_state *s, uint64_t loc)
{
    struct ag_cfi_row row;
    uint64_t rel = loc - b->base;

    if (loc < b->base || rel > UINT32_MAX) {
        return -ERANGE;
    }
    ag_cfi_row_make(s, (uint32_t)rel, &row);
    return ag_cfi_push(b, &row);
}

static void
ag_cfi_set_rule(struct ag_cfi_state *s, uint64_t reg, enum ag_cfi_rule_kind kind, int64_t off)
{
    struct ag_cfi_rule *r = reg == AG_CFI_REG_RA ? &s->ra : reg == AG_CFI_REG_FP ? &s->fp : NULL;

    if (r != NULL) {
        r->kind = kind;
        r->off = off;
    }
}

/*
 * Runs a CFA program. With emit, rows are emitted at every advance (from *loc) and loc must
 * stay below end; without, the program is the CIE's initial instructions.
 */
static int
ag_cfi_run(struct ag_cfi_builder *b, const struct ag_cfi_cie *cie, struct ag_cfi_cur *c,
           struct ag_cfi_state *s, const struct ag_cfi_state *init, uint64_t *loc, uint64_t end,
           bool emit)
{
    struct ag_cfi_state stack[AG_CFI_STACK_MAX];
    size_t depth = 0;
    int err;

    while (c->p < c->end && !c->bad) {
        uint8_t op = (uint8_t)ag_cfi_fixed(c, 1);
        uint64_t reg, delta = 0;
        int64_t off;

        switch (op & 0xc0) {
        case 0x40: /* DW_CFA_advance_loc */
            delta = (uint64_t)(op & 0x3f);
            goto advance;
        case 0x80: /* DW_CFA_offset */
            off = (int64_t)ag_cfi_uleb(c) * cie->data_align;
            ag_cfi_set_rule(s, op & 0x3f, AG_RULE_OFF, off);
            continue;
        case 0xc0: /* DW_CFA_restore */
            reg = op & 0x3f;
            if (init == NULL) {
                return -EBADMSG;
            }
            ag_cfi_set_rule(s, reg, reg == AG_CFI_REG_RA ? init->ra.kind : init->fp.kind,
                            reg == AG_CFI_REG_RA ? init->ra.off : init->fp.off);
            continue;
        default:
            break;
        }
        switch (op) {
        case 0x00: /* DW_CFA_nop */
            break;
        case 0x01: /* DW_CFA_set_loc */
            if (emit) {
                uint64_t to = ag_cfi_encoded(c, cie->fde_enc, 0);

                if (c->bad || to < *loc) {
                    return -EBADMSG;
                }
                delta = to - *loc;
                goto advance_raw;
            }
            return -EBADMSG;
        case 0x02: /* DW_CFA_advance_loc1 */
            delta = ag_cfi_fixed(c, 1);
            goto advance;
        case 0x03: /* DW_CFA_advance_loc2 */
            delta = ag_cfi_fixed(c, 2);
            goto advance;
        case 0x04: /* DW_CFA_advance_loc4 */
            delta = ag_cfi_fixed(c, 4);
            goto advance;
        case 0x05: /* DW_CFA_offset_extended */
            reg = ag_cfi_uleb(c);
            off = (int64_t)ag_cfi_uleb(c) * cie->data_align;
            ag_cfi_set_rule(s, reg, AG_RULE_OFF, off);
            break;
        case 0x06: /* DW_CFA_restore_extended */
            reg = ag_cfi_uleb(c);
            if (init == NULL) {
                return -EBADMSG;
            }
            ag_cfi_set_rule(s, reg, reg == AG_CFI_REG_RA ? init->ra.kind : init->fp.kind,
                            reg == AG_CFI_REG_RA ? init->ra.off : init->fp.off);
            break;
        case 0x07: /* DW_CFA_undefined */
            ag_cfi_set_rule(s, ag_cfi_uleb(c), AG_RULE_UNDEF, 0);
            break;
        case 0x08: /* DW_CFA_same_value */
            ag_cfi_set_rule(s, ag_cfi_uleb(c), AG_RULE_SAME, 0);
            break;
        case 0x09: /* DW_CFA_register */
            reg = ag_cfi_uleb(c);
            (void)ag_cfi_uleb(c);
            ag_cfi_set_rule(s, reg, AG_RULE_OTHER, 0);
            break;
        case 0x0a: /* DW_CFA_remember_state */
            if (depth == AG_CFI_STACK_MAX) {
                return -EBADMSG;
            }
            stack[depth++] = *s;
            break;
        case 0x0b: /* DW_CFA_restore_state */
            if (depth == 0) {
                return -EBADMSG;
            }
            *s = stack[--depth];
            break;
        case 0x0c: /* DW_CFA_def_cfa */
            s->cfa_reg = ag_cfi_uleb(c);
            s->cfa_off = (int64_t)ag_cfi_uleb(c);
            s->cfa_expr = false;
            break;
        case 0x0d: /* DW_CFA_def_cfa_register */
            s->cfa_reg = ag_cfi_uleb(c);
            s->cfa_expr = false;
            break;
        case 0x0e: /* DW_CFA_def_cfa_offset */
            s->cfa_off = (int64_t)ag_cfi_uleb(c);
            break;
        case 0x0f: { /* DW_CFA_def_cfa_expression */
            uint64_t len = ag_cfi_uleb(c);

            if (c->bad || len > (uint64_t)(c->end - c->p)) {
                return -EBADMSG;
            }
            c->p += len;
            s->cfa_expr = true;
            break;
        }
        case 0x10:   /* DW_CFA_expression */
        case 0x16: { /* DW_CFA_val_expression */
            uint64_t len;

            reg = ag_cfi_uleb(c);
            len = ag_cfi_uleb(c);
            if (c->bad || len > (uint64_t)(c->end - c->p)) {
                return -EBADMSG;
            }
            c->p += len;
            ag_cfi_set_rule(s, reg, AG_RULE_OTHER, 0);
            break;
        }
        case 0x11: /* DW_CFA_offset_extended_sf */
            reg = ag_cfi_uleb(c);
            off = ag_cfi_sleb(c) * cie->data_align;
            ag_cfi_set_rule(s, reg, AG_RULE_OFF, off);
            break;
        case 0x12: /* DW_CFA_def_cfa_sf */
            s->cfa_reg = ag_cfi_uleb(c);
            s->cfa_off = ag_cfi_sleb(c) * cie->data_align;
            s->cfa_expr = false;
            break;
        case 0x13: /* DW_CFA_def_cfa_offset_sf */
            s->cfa_off = ag_cfi_sleb(c) * cie->data_align;
            break;
        case 0x14: /* DW_CFA_val_offset */
            reg = ag_cfi_uleb(c);
            (void)ag_cfi_uleb(c);
            ag_cfi_set_rule(s, reg, AG_RULE_OTHER, 0);
            break;
        case 0x15: /* DW_CFA_val_offset_sf */
            reg = ag_cfi_uleb(c);
            (void)ag_cfi_sleb(c);
            ag_cfi_set_rule(s, reg, AG_RULE_OTHER, 0);
            break;
        case 0x2d: /* DW_CFA_AARCH64_negate_ra_state: x30 is signed from here (or no longer) */
            if (!AG_DWARF_NEGATE_RA_STATE) {
                return -EBADMSG; /* DW_CFA_GNU_window_save elsewhere: SPARC register windows */
            }
            break; /* the step strips every RA it reads (ag_arch_strip_ra), signed or not */
        case 0x2e: /* DW_CFA_GNU_args_size */
            (void)ag_cfi_uleb(c);
            break;
        case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
            reg = ag_cfi_uleb(c);
            off = -(int64_t)ag_cfi_uleb(c) * cie->data_align;
            ag_cfi_set_rule(s, reg, AG_RULE_OFF, off);
            break;
        default:
            return -EBADMSG; /* unknown opcode: operands cannot be skipped */
        }
        continue;
    advance:
        delta *= cie->code_align;
    advance_raw:
        if (!emit) {
            return -EBADMSG; /* a CIE's initial instructions never advance */
        }
        err = ag_cfi_emit(b, s, *loc);
        if (err != 0) {
            return err;
        }
        *loc += delta;
        if (*loc >= end) {
            return 0; /* the rest cannot apply inside this FDE */
        }
    }
    return c->bad ? -EBADMSG : 0;
}

/* Parses one FDE at addr and emits its rows. A CIE found there is skipped (returns 0). */
static int
ag_cfi_fde(struct ag_cfi_builder *b, uint64_t addr)
{
    struct ag_cfi_state init = { 0 }, s;
    const struct ag_cfi_cie *cie;
    struct ag_cfi_cur c = { NULL, NULL, false }, ci;
    uint64_t len, id_field, cie_ptr, begin, range, loc;
    size_t first = b->n;
    int err;

    len = ag_cfi_record(b, addr, &c);
    if (len == 0 || len == UINT64_MAX) {
        return len == 0 ? 0 : -EBADMSG;
    }
    id_field = (uint64_t)(uintptr_t)c.p;
    cie_ptr = ag_cfi_fixed(&c, 4);
    if (cie_ptr == 0) {
        return 0;
    }
    if (cie_ptr > id_field) {
        return -EBADMSG;
    }
    cie = ag_cfi_cie_get(b, id_field - cie_ptr);
    if (cie == NULL || cie->ra_reg != AG_CFI_REG_RA) {
        return -EBADMSG;
    }
    begin = ag_cfi_encoded(&c, cie->fde_enc, 0);
    range = ag_cfi_encoded(&c, cie->fde_enc & 0x0f, 0);
    if (cie->aug_z) {
        len = ag_cfi_uleb(&c);
        if (c.bad || len > (uint64_t)(c.end - c.p)) {
            return -EBADMSG;
        }
        c.p += len;
    }
    if (c.bad || range == 0 || begin + range < begin) {
        return c.bad ? -EBADMSG : 0;
    }
    ci = (struct ag_cfi_cur){ cie->insns, cie->insns_end, false };
    /* x86-64: unknown until the CIE says where the RA is; aarch64: in x30 until saved. */
    init.ra.kind = AG_DWARF_RA_INITIAL_SAME ? AG_RULE_SAME : AG_RULE_OTHER;
    err = ag_cfi_run(b, cie, &ci, &init, NULL, NULL, 0, false);
    if (err != 0) {
        return err;
    }
    s = init;
    loc = begin;
    b->fde_first = b->n;
    err = ag_cfi_run(b, cie, &c, &s, &init, &loc, begin + range, true);
    if (err == 0 && loc < begin + range) {
        err = ag_cfi_emit(b, &s, loc);
    }
    if (err == 0) {
        struct ag_cfi_state none = { .cfa_reg = UINT64_MAX, .cfa_expr = false };
        struct ag_cfi_row row;
        uint64_t end_rel = begin + range - b->base;

        /* The end marker: no CFI after the FDE unless another FDE starts there. */
        if (end_rel <= UINT32_MAX) {
            ag_cfi_row_make(&none, (uint32_t)end_rel, &row);
            row.flags = AG_CFI_CFA_NONE;
            b->fde_first = b->n; /* never merge the marker into the FDE's last row */
            err = ag_cfi_push(b, &row);
        }
    }
    if (err != 0) {
        b->n = first; /* drop a half-emitted FDE */
        return err == -ENOMEM ? err : 0;
    }
    b->fdes++;
    return 0;
}

static int
ag_cfi_tmp_cmp(const void *a, const void *b)
{
    const struct ag_cfi_tmp *x = a, *y = b;
    int xr = (x->row.flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_NONE;
    int yr = (y->row.flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_NONE;

    if (x->row.addr != y->row.addr) {
        return x->row.addr < y->row.addr ? -1 : 1;
    }
    if (xr != yr) {
        return xr - yr; /* end markers first: the last row at an address wins */
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool
ag_cfi_row_same(const struct ag_cfi_row *a, const struct ag_cfi_row *b)
{
    return a->flags == b->flags && a->cfa_off == b->cfa_off && a->ra_off == b->ra_off &&
           a->fp_off8 == b->fp_off8;
}

/* Sorts the rows unless they are sorted: the rows of a table that .eh_frame_hdr sorts come out
 * sorted already, checking costs one pass, sorting them again is most of a start-up's time in
 * a short-lived process. */
static void
ag_cfi_rows_sort(struct ag_cfi_builder *b)
{
    for (size_t i = 1; i < b->n; i++) {
        if (ag_cfi_tmp_cmp(&b->rows[i - 1], &b->rows[i]) > 0) {
            qsort(b->rows, b->n, sizeof(b->rows[0]), ag_cfi_tmp_cmp);
            break;
        }
    }
}

/* Walks the FDEs: through the binary search table when it has the usual encoding. */
static int
ag_cfi_walk(struct ag_cfi_builder *b, uint64_t hdr)
{
    struct ag_cfi_cur c = ag_cfi_cur_at(b, hdr);
    uint8_t version, ptr_enc, count_enc, table_enc;
    uint64_t eh_frame, count;
    int err;

    version = (uint8_t)ag_cfi_fixed(&c, 1);
    ptr_enc = (uint8_t)ag_cfi_fixed(&c, 1);
    count_enc = (uint8_t)ag_cfi_fixed(&c, 1);
    table_enc = (uint8_t)ag_cfi_fixed(&c, 1);
    if (c.bad || version != 1 || ptr_enc == AG_PE_OMIT) {
        return -ENOENT;
    }
    eh_frame = ag_cfi_encoded(&c, ptr_enc, hdr);
    if (c.bad) {
        return -EBADMSG;
    }
    if (count_enc != AG_PE_OMIT && table_enc == (AG_PE_DATAREL | AG_PE_SDATA4)) {
        count = ag_cfi_encoded(&c, count_enc, hdr);
        if (c.bad || count > (uint64_t)(c.end - c.p) / 8) {
            return -EBADMSG;
        }
        for (uint64_t i = 0; i < count; i++) {
            (void)ag_cfi_encoded(&c, table_enc, hdr); /* initial location: in the FDE too */
            uint64_t fde = ag_cfi_encoded(&c, table_enc, hdr);

            if (c.bad) {
                return -EBADMSG;
            }
            if ((i & 63) == 63 && b->cancel != NULL && atomic_load(b->cancel)) {
                return -ECANCELED;
            }
            err = ag_cfi_fde(b, fde);
            if (err == -ENOMEM) {
                return err;
            }
        }
        return 0;
    }
    /* No table: walk .eh_frame up to its zero terminator or the end of its segment. */
    for (uint64_t at = eh_frame;;) {
        struct ag_cfi_cur rec = { NULL, NULL, false };
        uint64_t len = ag_cfi_record(b, at, &rec);

        if (len == 0 || len == UINT64_MAX) {
            return len == 0 ? 0 : -EBADMSG;
        }
        err = ag_cfi_fde(b, at);
        if (err == -ENOMEM) {
            return err;
        }
        at = (uint64_t)(uintptr_t)rec.end;
    }
}

/*
 * Go's function table (.gopclntab): Go emits no .eh_frame for Go code, but its runtime keeps, for
 * every function, the stack pointer's distance from its value at the entry for every pc (the
 * "pcsp" table, which Go's own traceback reads). With the return address at the entry's sp, that
 * is a CFI row: CFA = sp + delta + 8, RA at CFA - 8. Read here for the layout of Go 1.18 and 1.19
 * on x86-64 (runtime/symtab.go's pcHeader, magic 0xfffffff0, and _func); a pclntab of another
 * Go version is refused (-ENOTSUP) and its module unwinds by frame pointers as before.
 */
#define AG_GO_MAGIC_118     0xfffffff0u /* Go 1.18, 1.19 */
#define AG_GO_HEADER_SIZE   72u         /* magic, pads, minLC, ptrSize, 8 words */
#define AG_GO_FUNC_SIZE     40u         /* _func up to nfuncdata */
#define AG_GO_FUNC_PCSP     16u
#define AG_GO_FUNC_FLAG     37u
#define AG_GO_FLAG_TOPFRAME 0x01u /* the outermost frame of a stack (goexit, mstart) */
#define AG_GO_FLAG_SPWRITE  0x02u /* writes sp outright (a stack switch): pcsp does not apply */
#define AG_GO_FUNCS_MAX     (1u << 24)
#define AG_GO_SP_DELTA_MAX  (1 << 24) /* a larger delta is corrupt data, not a frame */

#if defined(__x86_64__)
/* Reads the n-byte little-endian value at addr (inside a readable span), or sets *bad. */
static uint64_t
ag_cfi_go_word(const struct ag_cfi_builder *b, uint64_t addr, size_t n, bool *bad)
{
    struct ag_cfi_cur c = ag_cfi_cur_at(b, addr);
    uint64_t v = ag_cfi_fixed(&c, n);

    *bad = *bad || c.bad;
    return v;
}

/* A Go varint (unsigned LEB128 of at most 32 bits). */
static uint32_t
ag_cfi_go_uvarint(struct ag_cfi_cur *c)
{
    uint64_t v = ag_cfi_uleb(c);

    if (v > UINT32_MAX) {
        c->bad = true;
    }
    return (uint32_t)v;
}

/*
 * Where a function with a frame has saved the caller's rbp, from the code at p, the first pc
 * where sp has moved by delta: Go 1.19's prologue is `sub $N,%rsp; mov %rbp,N-8(%rsp); lea
 * N-8(%rsp),%rbp`, so p holds the store (its length is returned: rbp is saved after it); a
 * prologue `push %rbp` leaves delta 8 right after the push (0: saved at p). -1: the function
 * does not save rbp there (a frameless leaf, assembly).
 */
static int
ag_cfi_go_bp_store(const struct ag_cfi_builder *b, uint64_t p, int64_t delta)
{
    struct ag_cfi_cur c = ag_cfi_cur_at(b, p);
    uint8_t code[8] = { 0 };
    size_t n = 0;
    bool bad = false;

    while (n < sizeof(code) && !c.bad && c.p < c.end) {
        code[n++] = *c.p++;
    }
    if (n >= 5 && code[0] == 0x48 && code[1] == 0x89 && code[2] == 0x6c && code[3] == 0x24 &&
        (int64_t)(int8_t)code[4] == delta - 8) {
        return 5; /* mov %rbp,disp8(%rsp) */
    }
    if (n >= 8 && code[0] == 0x48 && code[1] == 0x89 && code[2] == 0xac && code[3] == 0x24 &&
        (int64_t)(int32_t)((uint32_t)code[4] | (uint32_t)code[5] << 8 | (uint32_t)code[6] << 16 |
                           (uint32_t)code[7] << 24) == delta - 8) {
        return 8; /* mov %rbp,disp32(%rsp) */
    }
    if (delta == 8 && ag_cfi_go_word(b, p - 1, 1, &bad) == 0x55 && !bad) {
        return 0; /* push %rbp */
    }
    return -1;
}

/* The row of sp delta v at runtime address pc; fp_saved: rbp is saved at CFA - 16; exact: the
 * return address is the interrupted pc (AG_CFI_RA_EXACT). */
static int
ag_cfi_go_emit(struct ag_cfi_builder *b, uint64_t pc, int64_t v, bool fp_saved, bool exact)
{
    struct ag_cfi_state s = { .cfa_reg = AG_CFI_REG_SP, .cfa_off = v + 8, .cfa_expr = false };

    s.ra = (struct ag_cfi_rule){ AG_RULE_OFF, -8 };
    s.fp = fp_saved ? (struct ag_cfi_rule){ AG_RULE_OFF, -16 }
                    : (struct ag_cfi_rule){ AG_RULE_SAME, 0 };
    if (v < 0 || v > AG_GO_SP_DELTA_MAX) {
        s.cfa_reg = UINT64_MAX; /* no usable rule: CFA "other", the frame pointers go on */
    }
    if (exact && s.cfa_reg == AG_CFI_REG_SP) {
        struct ag_cfi_row row;
        uint64_t rel = pc - b->base;

        if (pc < b->base || rel > UINT32_MAX) {
            return -ERANGE;
        }
        ag_cfi_row_make(&s, (uint32_t)rel, &row);
        row.flags |= AG_CFI_RA_EXACT;
        return ag_cfi_push(b, &row);
    }
    return ag_cfi_emit(b, &s, pc);
}

/* Does an .eh_frame row (the first n_eh of b->rows, sorted) cover part of [lo, hi)? */
static bool
ag_cfi_go_covered(const struct ag_cfi_builder *b, size_t n_eh, uint64_t lo, uint64_t hi)
{
    size_t l = 0, h = n_eh;

    while (l < h) { /* first row with addr > lo */
        size_t mid = l + (h - l) / 2;

        if (b->rows[mid].row.addr <= lo) {
            l = mid + 1;
        } else {
            h = mid;
        }
    }
    if (l > 0 && (b->rows[l - 1].row.flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_NONE) {
        return true;
    }
    for (; l < n_eh && b->rows[l].row.addr < hi; l++) {
        if ((b->rows[l].row.flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_NONE) {
            return true;
        }
    }
    return false;
}

/* Is the function named at nameoff in the name table at names (0: none) one that Go enters as
 * if called from the interrupted pc (runtime.asyncPreempt: a preemption; runtime.sigpanic: a
 * fault)? Its caller's pc is that pc itself, not a return address: Go's own traceback does not
 * take 1 from it either. */
static bool
ag_cfi_go_exact(const struct ag_cfi_builder *b, uint64_t names, uint64_t nameoff)
{
    static const char *const injected[] = { "runtime.asyncPreempt", "runtime.sigpanic" };
    struct ag_cfi_cur c = ag_cfi_cur_at(b, names + nameoff);

    if (names == 0 || nameoff > UINT32_MAX || c.bad) {
        return false;
    }
    for (size_t i = 0; i < sizeof(injected) / sizeof(injected[0]); i++) {
        size_t len = strlen(injected[i]) + 1; /* with its NUL */

        if ((size_t)(c.end - c.p) >= len && memcmp(c.p, injected[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* Emits the rows of one Go function [entry, end) from its pcsp table at sp (pcvalue's encoding:
 * from -1 at the entry, pairs of a zigzag value delta and a pc delta, until a zero value delta);
 * exact: its return address is the interrupted pc (ag_cfi_go_exact). */
static int
ag_cfi_go_func(struct ag_cfi_builder *b, uint64_t entry, uint64_t end, struct ag_cfi_cur sp,
               uint8_t flags, bool exact)
{
    uint64_t pc = entry;
    int64_t v = -1;
    bool first = true, fp_known = false, fp_frame = false;
    int err = 0;

    b->fde_first = b->n;
    if (flags & AG_GO_FLAG_TOPFRAME) {
        struct ag_cfi_state s = { .cfa_reg = AG_CFI_REG_SP, .cfa_off = 8 };

        s.ra.kind = AG_RULE_UNDEF; /* the walk ends here, as Go's traceback does */
        err = ag_cfi_emit(b, &s, entry);
        pc = end;
    }
    while (err == 0 && pc < end) {
        uint32_t uv = ag_cfi_go_uvarint(&sp), pcd;
        uint64_t next;

        if (sp.bad || (uv == 0 && !first)) {
            break;
        }
        v += (int32_t)(-(uv & 1) ^ (uv >> 1));
        pcd = ag_cfi_go_uvarint(&sp);
        if (sp.bad) {
            break;
        }
        next = pcd < end - pc ? pc + pcd : end;
        first = false;
        if (v > 0 && !fp_known) {
            /* The first pc with a frame: does the function save rbp, and where? */
            int at = ag_cfi_go_bp_store(b, pc, v);

            fp_known = true;
            fp_frame = at >= 0;
            if (at > 0) {
                err = ag_cfi_go_emit(b, pc, v, false, exact); /* the store: not saved yet */
                pc = (uint64_t)at < next - pc ? pc + (uint64_t)at : next;
            }
        }
        if (err == 0 && next > pc) {
            err = ag_cfi_go_emit(b, pc, v, fp_frame && v > 0, exact);
        }
        pc = next;
    }
    if (err == 0 && sp.bad) {
        err = -EBADMSG;
    }
    if (err == 0 && end - b->base <= UINT32_MAX) {
        struct ag_cfi_state none = { .cfa_reg = UINT64_MAX };
        struct ag_cfi_row row;

        /* The end marker: no row after the function unless another starts there. */
        ag_cfi_row_make(&none, (uint32_t)(end - b->base), &row);
        row.flags = AG_CFI_CFA_NONE;
        b->fde_first = b->n;
        err = ag_cfi_push(b, &row);
    }
    return err;
}
#endif

int
ag_cfi_go_find(const struct ag_cfi_span *spans, size_t n_spans, uint64_t *out)
{
    int err = -ENOENT;

    *out = 0;
#if defined(__x86_64__)
    for (size_t i = 0; i < n_spans; i++) {
        uint64_t a = (spans[i].lo + 7) & ~(uint64_t)7;

        for (; a < spans[i].hi && spans[i].hi - a >= AG_GO_HEADER_SIZE; a += 8) {
            const uint8_t *p = (const uint8_t *)(uintptr_t)a;
            uint64_t nfunc, pctab, pcln;
            uint32_t magic;

            if (p[0] < 0xf0 || p[1] != 0xff || p[2] != 0xff || p[3] != 0xff || p[4] != 0 ||
                p[5] != 0 || p[6] != 1 || p[7] != 8) {
                continue; /* the magic, two zero pads, minLC 1, 8-byte pointers */
            }
            memcpy(&magic, p, sizeof(magic));
            if (magic != AG_GO_MAGIC_118) {
                err = -ENOTSUP; /* another Go version's layout, or a chance match */
                continue;
            }
            memcpy(&nfunc, p + 8, sizeof(nfunc));
            memcpy(&pctab, p + 56, sizeof(pctab));
            memcpy(&pcln, p + 64, sizeof(pcln));
            if (nfunc == 0 || nfunc > AG_GO_FUNCS_MAX || pctab >= spans[i].hi - a ||
                pcln >= spans[i].hi - a) {
                continue; /* a chance match: the tables are not in this segment */
            }
            *out = a;
            return 0;
        }
    }
#else
    (void)spans;
    (void)n_spans;
    err = -ENOTSUP; /* Go's frames on arm64 keep the return address at sp: not read */
#endif
    return err;
}

/* Emits the rows of the Go functions of the pclntab at hdr that no .eh_frame row covers. */
static int
ag_cfi_go_walk(struct ag_cfi_builder *b, uint64_t hdr)
{
#if defined(__x86_64__)
    struct ag_cfi_cur h = ag_cfi_cur_at(b, hdr);
    uint64_t nfunc, text, names, pctab, pcln, span_end;
    size_t n_eh = b->n;
    bool bad = false;
    int err;

    if (h.bad || (uint64_t)(h.end - h.p) < AG_GO_HEADER_SIZE ||
        ag_cfi_fixed(&h, 4) != AG_GO_MAGIC_118) {
        return -ENOENT;
    }
    span_end = (uint64_t)(uintptr_t)h.end;
    (void)ag_cfi_fixed(&h, 4); /* pads, minLC, ptrSize: checked by ag_cfi_go_find */
    nfunc = ag_cfi_fixed(&h, 8);
    (void)ag_cfi_fixed(&h, 8); /* nfiles */
    text = ag_cfi_fixed(&h, 8);
    names = ag_cfi_fixed(&h, 8); /* funcnameOffset */
    (void)ag_cfi_fixed(&h, 8);   /* cuOffset */
    (void)ag_cfi_fixed(&h, 8);   /* filetabOffset */
    pctab = ag_cfi_fixed(&h, 8);
    pcln = ag_cfi_fixed(&h, 8);
    if (h.bad || nfunc == 0 || nfunc > AG_GO_FUNCS_MAX || pctab >= span_end - hdr ||
        pcln >= span_end - hdr || (nfunc + 1) * 8 > span_end - hdr - pcln) {
        return -EBADMSG;
    }
    pctab += hdr;
    pcln += hdr;
    names = names < span_end - hdr ? hdr + names : 0;
    for (uint64_t i = 0; i < nfunc; i++) {
        uint64_t entry = text + ag_cfi_go_word(b, pcln + 8 * i, 4, &bad);
        uint64_t funcoff = ag_cfi_go_word(b, pcln + 8 * i + 4, 4, &bad);
        uint64_t end = text + ag_cfi_go_word(b, pcln + 8 * i + 8, 4, &bad);
        uint64_t f = pcln + funcoff, pcsp;
        uint8_t flags;
        struct ag_cfi_cur sp;
        size_t first;

        if (bad || end < entry) {
            return -EBADMSG; /* the function table is sorted by entry */
        }
        if ((i & 255) == 255 && b->cancel != NULL && atomic_load(b->cancel)) {
            return -ECANCELED;
        }
        if (entry == end || entry < b->base || end - b->base > UINT32_MAX ||
            funcoff > span_end - pcln || span_end - f < AG_GO_FUNC_SIZE ||
            ag_cfi_go_word(b, f, 4, &bad) != entry - text) {
            continue; /* outside the module's 4 GiB, or a _func that does not match its entry */
        }
        pcsp = ag_cfi_go_word(b, f + AG_GO_FUNC_PCSP, 4, &bad);
        flags = (uint8_t)ag_cfi_go_word(b, f + AG_GO_FUNC_FLAG, 1, &bad);
        if (bad || (flags & AG_GO_FLAG_SPWRITE) || (pcsp == 0 && !(flags & AG_GO_FLAG_TOPFRAME)) ||
            pcsp >= span_end - pctab ||
            ag_cfi_go_covered(b, n_eh, entry - b->base, end - b->base)) {
            bad = false;
            continue; /* a stack switch, no table, or C code the .eh_frame describes */
        }
        sp = (struct ag_cfi_cur){ (const uint8_t *)(uintptr_t)(pctab + pcsp),
                                  (const uint8_t *)(uintptr_t)span_end, false };
        first = b->n;
        err = ag_cfi_go_func(b, entry, end, sp, flags,
                             ag_cfi_go_exact(b, names, ag_cfi_go_word(b, f + 4, 4, &bad)));
        if (err == -ENOMEM) {
            return err;
        }
        if (err != 0) {
            b->n = first; /* drop a half-emitted function */
            continue;
        }
        b->fdes++;
    }
    return 0;
#else
    (void)b;
    (void)hdr;
    return -ENOTSUP;
#endif
}

int
ag_cfi_build(uint64_t base, uint64_t hdr, const struct ag_cfi_span *spans, size_t n_spans,
             struct ag_cfi_table **out)
{
    return ag_cfi_build_cancellable(base, hdr, 0, spans, n_spans, NULL, out);
}

int
ag_cfi_build_cancellable(uint64_t base, uint64_t hdr, uint64_t gopclntab,
                         const struct ag_cfi_span *spans, size_t n_spans, _Atomic int *cancel,
                         struct ag_cfi_table **out)
{
    struct ag_cfi_builder *b;
    struct ag_cfi_table *t = NULL;
    struct ag_cfi_row *rows;
    size_t k = 0;
    int err;

    *out = NULL;
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    b->base = base;
    b->spans = spans;
    b->n_spans = n_spans;
    b->cancel = cancel;
    err = hdr != 0 ? ag_cfi_walk(b, hdr) : 0;
    if (err != 0 && !(err == -ENOENT && gopclntab != 0)) {
        goto out;
    }
    ag_cfi_rows_sort(b);
    if (gopclntab != 0) {
        /* Go's functions after the sorted .eh_frame rows, which they must not overlap. */
        size_t n_eh = b->n;

        err = ag_cfi_go_walk(b, gopclntab);
        if (err == -ENOMEM || err == -ECANCELED) {
            goto out;
        }
        if (err != 0) {
            b->n = n_eh; /* a corrupt or unknown table: none of its rows (an empty table: -ENOENT)
                          */
        }
        err = 0;
        ag_cfi_rows_sort(b);
    }
    for (size_t i = 0; i < b->n; i++) {
        if (i + 1 < b->n && b->rows[i + 1].row.addr == b->rows[i].row.addr) {
            continue; /* the last row at one address wins */
        }
        if (k > 0 && ag_cfi_row_same(&b->rows[k - 1].row, &b->rows[i].row)) {
            continue; /* same rule as the row before: the earlier row covers it */
        }
        b->rows[k++] = b->rows[i];
    }
    if (k == 0) {
        err = -ENOENT;
        goto out;
    }
    t = calloc(1, sizeof(*t) + k * sizeof(struct ag_cfi_row));
    if (t == NULL) {
        err = -ENOMEM;
        goto out;
    }
    rows = (struct ag_cfi_row *)(t + 1);
    t->rows = rows;
    t->base = base;
    t->n = k;
    t->fdes = b->fdes;
    t->unsupported = 0;
    for (size_t i = 0; i < k; i++) {
        rows[i] = b->rows[i].row;
        t->unsupported += (t->rows[i].flags & AG_CFI_CFA_MASK) == AG_CFI_CFA_OTHER;
    }
    *out = t;
out:
    free(b->rows);
    free(b);
    return err;
}

void
ag_cfi_table_free(struct ag_cfi_table *t)
{
    if (t != NULL && t->map != NULL) {
        munmap(t->map, t->map_len);
    }
    free(t);
}
