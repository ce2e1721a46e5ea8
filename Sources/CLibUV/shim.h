// What Swift cannot import from libuv and the C library directly: variadic functions and
// macros, wrapped in plain functions.
#ifndef REACTIVELOOP_CLIBUV_SHIM_H
#define REACTIVELOOP_CLIBUV_SHIM_H

#include <uv.h>
#include <sys/prctl.h>

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
