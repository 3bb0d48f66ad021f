/* life.h — the Game of Life rule behind the life task (internal to tasks/ and
 * its tests).
 *
 * A board is an 8×8 torus packed in 64 bits: cell (row, col) is bit row*8 + col,
 * 1 = alive. */
#ifndef WS_TASK_LIFE_H
#define WS_TASK_LIFE_H

#include <stdint.h>

#define WS_LIFE_SIDE 8
#define WS_LIFE_CELLS (WS_LIFE_SIDE * WS_LIFE_SIDE)

/* One generation of Conway's rule B3/S23, edges wrapping around. */
uint64_t ws_task_life_next(uint64_t board);

#endif
