/* ws_thread_name.h — names the calling thread (up to 15 bytes; longer is cut), as
 * top -H, ps -L, perf and gdb show it: which of a daemon's threads takes the CPU
 * is then seen, not guessed. Best effort: a failure changes nothing else. */
#ifndef WS_THREAD_NAME_H
#define WS_THREAD_NAME_H

void ws_thread_name(const char *name);

#endif
