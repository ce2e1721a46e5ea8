// What loopd's allocator policy (AllocatorPolicy.swift) needs from glibc and the Glibc module
// leaves out: the allocator's settings (mallopt, M_MMAP_THRESHOLD) and the auxiliary vector's
// AT_SECURE.
#ifndef LOOPD_CGLIBCMALLOC_SHIM_H
#define LOOPD_CGLIBCMALLOC_SHIM_H

#include <malloc.h>
#include <sys/auxv.h>

#endif
