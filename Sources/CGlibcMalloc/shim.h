// glibc's allocator settings and statistics (mallopt, mallinfo2), which the Glibc module
// leaves out: loopd sets its mapping threshold at start (AllocatorPolicy.swift).
#include <malloc.h>
