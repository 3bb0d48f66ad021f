/* crash.h — on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT), a
 * report in the daemon's log: the signal, the faulting address, the crashing
 * thread's stack. The signal then ends the process as it would have. Call it
 * from the main thread: the alternate stack that lets a stack overflow be
 * reported is that thread's; other threads report on their own stacks. */
#ifndef WS_SRV_CRASH_H
#define WS_SRV_CRASH_H

#include "base/ws_status.h"

ws_status ws_crash_report_install(ws_error *err);

#endif
