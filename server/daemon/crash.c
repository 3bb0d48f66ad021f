/* crash.c — a crash report in the daemon's log (crash.h).
 *
 * A daemon that dies of a signal with nothing in its log leaves its operator
 * (and a CI run) with an exit status only. Like Redis's bug report, the
 * handler writes which signal, the address it faulted on, and the stack of
 * the thread that crashed to the log's descriptor, then lets the signal take
 * its default action (a core file where the system keeps them, and the exit
 * status a supervisor expects). Only async-signal-safe calls: write(2), and
 * backtrace(3), whose library is loaded at install time (its first call may
 * allocate). The handler runs on an alternate stack so that a stack overflow
 * is reported too. */
#define _GNU_SOURCE /* gettid, sigabbrev_np */
#include "crash.h"

#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "server/common/log.h"

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* Bytes to fd; what cannot be written is dropped (we are dying). */
static void put(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_str(int fd, const char *s)
{
    put(fd, s, strlen(s));
}

/* v in hex, without printf (not async-signal-safe). */
static void put_hex(int fd, uintptr_t v)
{
    char b[2 + 2 * sizeof v];
    int n = (int)sizeof b;
    do {
        b[--n] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && n > 2);
    b[--n] = 'x';
    b[--n] = '0';
    put(fd, b + n, sizeof b - (size_t)n);
}

static void put_dec(int fd, long v)
{
    char b[24];
    int n = (int)sizeof b;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do {
        b[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) b[--n] = '-';
    put(fd, b + n, sizeof b - (size_t)n);
}

static void on_crash(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    int fd = ws_log_fd();
    put_str(fd, "worldstated crashed: signal ");
    put_dec(fd, sig);
    put_str(fd, " (");
    put_str(fd, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    put_str(fd, ") at address ");
    put_hex(fd, (uintptr_t)(info ? info->si_addr : 0));
    put_str(fd, ", thread ");
    put_dec(fd, (long)gettid());
    put_str(fd, "; its stack (addr2line -f -e worldstated +offset names a frame):\n");
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, fd);
    put_str(fd, "worldstated crashed: end of report\n");
    /* SA_RESETHAND restored the default action: the signal again ends us. */
    raise(sig);
}

ws_status ws_crash_report_install(ws_error *err)
{
#ifdef __SANITIZE_ADDRESS__
    (void)err; /* the sanitizer's own report says more, and needs its handlers */
#else
    static char alt_stack[64 * 1024];
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack};
    if (sigaltstack(&ss, NULL) != 0)
        return ws_error_set(err, WS_ERR_IO, "cannot set the crash handler's stack");
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc's unwinder now, not inside the handler */
    struct sigaction sa = {.sa_sigaction = on_crash,
                           .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof crash_signals / sizeof *crash_signals; i++)
        if (sigaction(crash_signals[i], &sa, NULL) != 0)
            return ws_error_set(err, WS_ERR_IO, "cannot install the crash handler");
#endif
    return WS_OK;
}
