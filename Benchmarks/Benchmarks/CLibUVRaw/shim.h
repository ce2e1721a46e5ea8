// The system's libuv, for the raw-libuv peer rows of the loop benchmarks.
#include <uv.h>
