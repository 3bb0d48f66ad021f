/* test_server_notify.c — worldstated ($WS_DAEMON) as a systemd Type=notify
 * service: with $NOTIFY_SOCKET set it sends READY=1 once it listens and
 * STOPPING=1 when SIGTERM starts its shutdown (sd_notify, libsystemd). Skipped
 * (exit 77) in a build without libsystemd. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "test_server_util.h"

/* The next datagram on fd within 10 s, NUL-terminated into buf; "" if none. */
static void next_message(int fd, char *buf, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    buf[0] = '\0';
    if (poll(&p, 1, 10000) != 1) return;
    ssize_t n = recv(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

static void test_ready_and_stopping(void **state)
{
    (void)state;
    char dir[256], msg[256];
    ws_ts_tmpdir(dir, sizeof dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    assert_true(strlen(dir) + sizeof ".notify" <= sizeof addr.sun_path);
    memcpy(addr.sun_path, dir, strlen(dir));
    memcpy(addr.sun_path + strlen(dir), ".notify", sizeof ".notify");
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", addr.sun_path, 1), 0); /* the daemon inherits it */
    ws_ts_daemon d;
    int started = ws_ts_start(&d, dir, NULL);
    assert_int_equal(unsetenv("NOTIFY_SOCKET"), 0);
    assert_int_equal(started, 0);
    next_message(fd, msg, sizeof msg);
    assert_string_equal(msg, "READY=1");
    assert_int_equal(ws_ts_stop(&d), 0);
    next_message(fd, msg, sizeof msg);
    assert_string_equal(msg, "STOPPING=1");
    close(fd);
    unlink(addr.sun_path);
    ws_ts_cleanup(dir);
}

int main(void)
{
#ifndef WS_HAVE_SYSTEMD
    printf("worldstated is built without libsystemd: nothing to test\n");
    return 77;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_and_stopping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
