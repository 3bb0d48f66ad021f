/* vocab.c — symbol → id map: open addressing over an array of owned strings. */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/symcode.h"

struct ws_vocab {
    int capacity, n_overflow, size;
    char **symbols;   /* [capacity], by id */
    uint64_t *hashes; /* [capacity]: ws_sym_hash of each named symbol */
    int32_t *slots;   /* hash table of ids, -1 empty; n_slots is a power of two */
    size_t n_slots;
};

/* Hash-table slots for a capacity: a power of two, at least twice it. */
static size_t slots_for(int capacity)
{
    size_t n = 16;
    while (n < (size_t)capacity * 2) n *= 2;
    return n;
}

size_t ws_vocab_bytes(int capacity)
{
    size_t rows = capacity > 0 ? (size_t)capacity : 1;
    return sizeof(ws_vocab) + rows * (sizeof(char *) + sizeof(uint64_t)) +
           slots_for(capacity) * sizeof(int32_t);
}

ws_status ws_vocab_new(ws_vocab **out, int capacity, int n_overflow)
{
    *out = NULL;
    if (capacity < 0 || n_overflow < 1) return WS_ERR_INVALID;
    ws_vocab *v = calloc(1, sizeof *v);
    if (!v) return WS_ERR_NOMEM;
    v->capacity = capacity;
    v->n_overflow = n_overflow;
    v->n_slots = slots_for(capacity);
    v->symbols = calloc(capacity > 0 ? (size_t)capacity : 1, sizeof *v->symbols);
    v->hashes = calloc(capacity > 0 ? (size_t)capacity : 1, sizeof *v->hashes);
    v->slots = malloc(v->n_slots * sizeof *v->slots);
    if (!v->symbols || !v->hashes || !v->slots) {
        ws_vocab_free(v);
        return WS_ERR_NOMEM;
    }
    memset(v->slots, 0xff, v->n_slots * sizeof *v->slots);
    *out = v;
    return WS_OK;
}

void ws_vocab_free(ws_vocab *v)
{
    if (!v) return;
    for (int i = 0; i < v->size; i++) free(v->symbols[i]);
    free(v->symbols);
    free(v->hashes);
    free(v->slots);
    free(v);
}

/* ws_vocab_id with the bytes' FNV-1a-64 already computed. */
static int32_t id_of(ws_vocab *v, const char *sym, size_t len, uint64_t h, int add)
{
    size_t mask = v->n_slots - 1;
    size_t i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        int32_t id = v->slots[i];
        if (id < 0) break;
        const char *s = v->symbols[id];
        if (strlen(s) == len && memcmp(s, sym, len) == 0) return id;
    }
    /* The table is at most half full (n_slots >= 2*capacity), so the probe ends. */
    if (add && v->size < v->capacity) {
        char *copy = malloc(len + 1);
        if (copy) {
            memcpy(copy, sym, len);
            copy[len] = '\0';
            int32_t id = v->size++;
            v->symbols[id] = copy;
            v->hashes[id] = ws_sym_hash_of_fnv(h);
            v->slots[i] = id;
            return id;
        }
        /* Out of memory: fall through to the overflow id rather than fail. */
    }
    return v->capacity + (int32_t)(h % (uint64_t)v->n_overflow);
}

void ws_vocab_truncate(ws_vocab *v, int n)
{
    if (n < 0 || n >= v->size) return;
    for (int i = n; i < v->size; i++) {
        free(v->symbols[i]);
        v->symbols[i] = NULL;
    }
    v->size = n;
    /* Open addressing cannot delete in place: the table is rebuilt from the rest. */
    memset(v->slots, 0xff, v->n_slots * sizeof *v->slots);
    size_t mask = v->n_slots - 1;
    for (int32_t id = 0; id < n; id++) {
        size_t i = (size_t)ws_fnv1a64(v->symbols[id], strlen(v->symbols[id])) & mask;
        while (v->slots[i] >= 0) i = (i + 1) & mask;
        v->slots[i] = id;
    }
}

int ws_vocab_size(const ws_vocab *v) { return v->size; }
int ws_vocab_capacity(const ws_vocab *v) { return v->capacity; }
int ws_vocab_n_overflow(const ws_vocab *v) { return v->n_overflow; }

const char *ws_vocab_symbol(const ws_vocab *v, int32_t id)
{
    return (id >= 0 && id < v->size) ? v->symbols[id] : NULL;
}

const char *ws_vocab_symbol_added(const ws_vocab *v, int32_t id) { return v->symbols[id]; }

int32_t ws_vocab_id(ws_vocab *v, const char *sym, size_t len, int add)
{
    return id_of(v, sym, len, ws_fnv1a64(sym, len), add);
}

/* One pass over the bytes gives both the table hash and the symbol hash. */
ws_sym ws_vocab_sym(ws_vocab *v, const char *sym, size_t len, int add)
{
    uint64_t h = ws_fnv1a64(sym, len);
    return (ws_sym){id_of(v, sym, len, h, add), ws_sym_hash_of_fnv(h)};
}

uint64_t ws_vocab_hash(const ws_vocab *v, int32_t id)
{
    if (id >= 0 && id < v->size) return v->hashes[id];
    uint64_t h = ws_mix64((uint64_t)(uint32_t)id + 0x5EED5EED5EED5EEDULL);
    return h ? h : 1;
}
