// What Swift cannot import from libuv and the C library directly: variadic functions and
// macros, wrapped in plain functions.
#ifndef REACTIVELOOP_CLIBUV_SHIM_H
#define REACTIVELOOP_CLIBUV_SHIM_H

#include <uv.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/// libdispatch's hooks for a run loop that drains the main queue, as Foundation's RunLoop does on
/// Linux. Exported by the toolchain's libdispatch; declared in its private header only.
/// The main queue's wake-up handle: an eventfd, readable while the main queue has work.
extern int _dispatch_get_main_queue_handle_4CF(void);
/// Runs the work queued on the main queue. Main thread only, never after `dispatch_main()`.
extern void _dispatch_main_queue_callback_4CF(void *message);

/// Whether the calling thread is the process's main thread.
static inline int clibuv_is_main_thread(void) {
    return getpid() == (pid_t)syscall(SYS_gettid);
}

/// Names the calling thread (Linux keeps the first 15 bytes); returns 0 or -1.
static inline int clibuv_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// Creates a non-blocking monotonic timerfd; returns the descriptor or -errno.
static inline int clibuv_timerfd_create(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/// Arms `fd` to expire once at `deadline` nanoseconds of CLOCK_MONOTONIC (libuv's `uv_hrtime`
/// clock), or disarms it when `deadline` is 0; returns 0 or -errno.
static inline int clibuv_timerfd_arm(int fd, uint64_t deadline) {
    struct itimerspec spec = {{0, 0}, {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)}};
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL) < 0 ? -errno : 0;
}

/// Reads (clears) an expired timerfd or an eventfd; returns the count read, or 0 if none.
static inline uint64_t clibuv_read_counter(int fd) {
    uint64_t value = 0;
    return read(fd, &value, sizeof value) == (ssize_t)sizeof value ? value : 0;
}

/// Sets the calling thread's timer slack (Linux adds it to every timer wake-up, 50 µs by
/// default); returns 0 on success, -1 where unsupported.
static inline int clibuv_set_timer_slack(unsigned long nanoseconds) {
#ifdef PR_SET_TIMERSLACK
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
#else
    (void)nanoseconds;
    return -1;
#endif
}

/// The calling thread's timer slack in nanoseconds, or -1 where unsupported.
static inline long clibuv_timer_slack(void) {
#ifdef PR_GET_TIMERSLACK
    return prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
#else
    return -1;
#endif
}

#endif
