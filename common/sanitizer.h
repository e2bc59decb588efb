/* SPDX-License-Identifier: MIT */
/*
 * common/sanitizer.h - what the library does differently when it is built with AddressSanitizer.
 * Header only, no dependencies beyond the sanitizer's own interface header.
 */
#ifndef PP_SANITIZER_H
#define PP_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#include <pthread.h>
#include <sanitizer/asan_interface.h>

/*
 * Clears ASan's shadow of the calling thread's whole stack. In a fork()ed child glibc hands a
 * new thread the stack of a parent thread that does not exist there (the IPC loop's, say), whose
 * shadow still marks the dead thread's frames; ASan clears it only in its own thread start, which
 * a thread started with the real pthread_create (host_thread_spawn) never runs and one started
 * through ASan's interceptor runs after the library's start hooks. host_trampoline
 * (host/threads.c) calls it first thing on every thread it starts.
 */
static inline void
pp_asan_clear_own_stack(void)
{
    pthread_attr_t attr;
    size_t size;
    void *addr;

    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
            __asan_unpoison_memory_region(addr, size);
        }
        pthread_attr_destroy(&attr);
    }
}
#else
static inline void
pp_asan_clear_own_stack(void)
{
}
#endif

#endif /* PP_SANITIZER_H */
