/* recall.c — see recall.h. */
#include "recall.h"

#include <string.h>

#include "base/ws_rng.h"

void ws_recall_tell(ws_recall_facts *f, int S, const int32_t *ids, int val)
{
    size_t row = sizeof(int32_t) * (size_t)S;
    for (int i = 0; i < f->n; i++) {
        if (!memcmp(f->ids[i], ids, row)) { /* overridden: move to the newest slot */
            memmove(&f->ids[i], &f->ids[i + 1], sizeof f->ids[0] * (size_t)(f->n - i - 1));
            memmove(&f->val[i], &f->val[i + 1], (size_t)(f->n - i - 1));
            f->n--;
            break;
        }
    }
    if (f->n == WS_RECALL_FACTS) { /* forget the oldest fact */
        memmove(&f->ids[0], &f->ids[1], sizeof f->ids[0] * (WS_RECALL_FACTS - 1));
        memmove(&f->val[0], &f->val[1], WS_RECALL_FACTS - 1);
        f->n--;
    }
    memcpy(f->ids[f->n], ids, row);
    f->val[f->n++] = (int8_t)val;
}

int ws_recall_draw(const ws_recall_facts *f, uint64_t *rng)
{
    return (int)(ws_xorshift64(rng) % (uint64_t)f->n);
}
