/* SPDX-License-Identifier: MIT */
/*
 * host/exit.c - leaving without exit(), and a vfork()ed child's exit() that leaves its parent
 * without exit handlers.
 *
 *   _exit _Exit      interposed because they skip the destructor that ends every session
 *                    (shim/shim.c), and shells and forked workers leave that way: the server's
 *                    sessions_end hook gives each session its rundown and end tag first, within
 *                    a bounded wait, so a lock held by the exiting thread cannot hang the exit.
 *   vfork            interposed because a vfork()ed child that ends by exit(), not _exit() (after
 *                    its exec failed), runs its parent's exit handlers in its parent's memory, and
 *                    glibc marks them all run there, the destructor that ends every session among
 *                    them: the parent's own exit() then runs none, and no atexit() or
 *                    __cxa_atexit() can register one again (glibc refuses them once its list is
 *                    done). Back in the parent, after the child has ended or exec'd, the server's
 *                    vfork_parent hook registers its own end again where the parent's exit() still
 *                    looks (shim/shim.c, shim_vfork_parent). The same system call as libc's
 *                    (vfork on x86-64; clone with CLONE_VM, CLONE_VFORK and SIGCHLD on arm64), in
 *                    assembly: the child returns through the caller's stack, which a C frame of
 *                    ours would leave to the child to overwrite before the parent returns
 *                    through it.
 *
 * What the host may rely on: the process ends with the status given, through the exit_group
 * system call itself, as libc's would; no exit handler or stdio flush runs. A fork()ed or
 * vfork()ed child finds no server of its own and leaves at once. Without the server's hooks it
 * leaves at once too. vfork() returns what libc's does, with errno as libc sets it; in the child
 * nothing of the library's runs but what libc's vfork runs there around the system call (no call),
 * and none of the host's own exit handlers runs where bare it would not.
 *
 * Held by: cli-record (a shell that leaves through _exit: its trace is complete, with rundown),
 * agent-torture (20 forked children _exit with their status under the agent),
 * host-contract-execfail-vforkexit (tests/hosts/execfail.c: 20 vfork()ed children that end by
 * exit(), its atexit handler's line printed as bare, and each recording complete).
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(exit);

__attribute__((noreturn)) static void
host_exit_group(int status)
{
    const struct host_server_hooks *h = host_server();

    if (h != NULL) {
        (void)h->sessions_end();
    }
    for (;;) {
        syscall(SYS_exit_group, status);
    }
}

HOST_EXPORT __attribute__((noreturn)) void
_exit(int status)
{
    host_exit_group(status);
}

HOST_EXPORT __attribute__((noreturn)) void
_Exit(int status)
{
    host_exit_group(status);
}

/* After vfork() returned in the parent (its child has exec'd or ended): the server's hook, errno
 * kept (the parent sees libc's). Called from the assembly below only. */
__attribute__((used)) void host_vfork_parent(void);
__attribute__((used)) void
host_vfork_parent(void)
{
    const struct host_server_hooks *h = host_server();
    int saved_errno = errno;

    if (h != NULL && h->vfork_parent != NULL) {
        h->vfork_parent();
    }
    errno = saved_errno;
}

/* A vfork that failed (rc is -errno): errno set, -1, as libc's. */
__attribute__((used)) int host_vfork_failed(long rc);
__attribute__((used)) int
host_vfork_failed(long rc)
{
    errno = (int)-rc;
    return -1;
}

/*
 * vfork: the return address is kept in a register, never on the stack the child shares, until
 * the child is gone; only the parent calls host_vfork_parent. With a shadow stack (x86-64 CET)
 * the child jumps back without popping it, as glibc's vfork does: its calls must not overwrite
 * the entry the parent returns through.
 */
#define HOST_VFORK_STR2(x) #x
#define HOST_VFORK_STR(x)  HOST_VFORK_STR2(x)
#if defined(__SANITIZE_THREAD__)
#define HOST_VFORK_IS_FORK 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOST_VFORK_IS_FORK 1
#endif
#endif
#if defined(HOST_VFORK_IS_FORK)
/* ThreadSanitizer's runtime makes every vfork a fork (a child in the parent's memory would run
 * its instrumented code on the parent's shadow state), and so does the library built for it,
 * which comes ahead of that runtime's vfork: as bare under TSan (with the system call below
 * instead, a TSan-built host's vfork()ed children were forked bare and not profiled, and
 * host-contract-execfail-vforkexit's output differed). A fork()ed child uses up nothing of the
 * parent's. */
HOST_EXPORT pid_t
vfork(void)
{
    return fork();
}
#elif defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define HOST_VFORK_LANDING "    endbr64\n"
#else
#define HOST_VFORK_LANDING ""
#endif
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        "vfork:\n"
        ".cfi_startproc\n" HOST_VFORK_LANDING "    popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_register %rip, %rdi\n"
        "    movl $" HOST_VFORK_STR(
                SYS_vfork) ", %eax\n"
                           "    syscall\n"
                           "    pushq %rdi\n"
                           ".cfi_adjust_cfa_offset 8\n"
                           ".cfi_rel_offset %rip, 0\n"
                           "    cmpq $-4095, %rax\n"
                           "    jae 3f\n"
                           "    testl %eax, %eax\n"
                           "    jz 1f\n"
                           "    pushq %rax\n" /* the pid; and the stack aligned for the call */
                           ".cfi_adjust_cfa_offset 8\n"
                           "    call host_vfork_parent\n"
                           "    popq %rax\n"
                           ".cfi_adjust_cfa_offset -8\n"
                           "    ret\n"
                           "1:\n" /* the child */
                           "    xorl %esi, %esi\n"
                           "    rdsspq %rsi\n"
                           "    testq %rsi, %rsi\n"
                           "    jz 2f\n"
                           "    popq %rdi\n"
                           ".cfi_adjust_cfa_offset -8\n"
                           "    jmp *%rdi\n"
                           ".cfi_adjust_cfa_offset 8\n"
                           "2:\n"
                           "    ret\n"
                           "3:\n" /* failed */
                           "    movq %rax, %rdi\n"
                           "    subq $8, %rsp\n"
                           ".cfi_adjust_cfa_offset 8\n"
                           "    call host_vfork_failed\n"
                           "    addq $8, %rsp\n"
                           ".cfi_adjust_cfa_offset -8\n"
                           "    ret\n"
                           ".cfi_endproc\n"
                           ".size vfork, .-vfork\n");
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define HOST_VFORK_LANDING "    bti c\n"
#else
#define HOST_VFORK_LANDING ""
#endif
/* 0x4111: CLONE_VM | CLONE_VFORK | SIGCHLD, the child on the caller's stack (x1), as glibc's. */
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, %function\n"
        "vfork:\n"
        ".cfi_startproc\n" HOST_VFORK_LANDING "    mov x0, #0x4111\n"
        "    mov x1, sp\n"
        "    mov x8, #" HOST_VFORK_STR(SYS_clone) "\n"
                                                  "    svc #0\n"
                                                  "    cmn x0, #4095\n"
                                                  "    b.cs 2f\n"
                                                  "    cbz x0, 1f\n"
                                                  "    stp x29, x30, [sp, #-32]!\n"
                                                  ".cfi_def_cfa_offset 32\n"
                                                  ".cfi_offset x29, -32\n"
                                                  ".cfi_offset x30, -24\n"
                                                  "    mov x29, sp\n"
                                                  "    str x0, [sp, #16]\n"
                                                  "    bl host_vfork_parent\n"
                                                  "    ldr x0, [sp, #16]\n"
                                                  "    ldp x29, x30, [sp], #32\n"
                                                  ".cfi_def_cfa_offset 0\n"
                                                  ".cfi_restore x29\n"
                                                  ".cfi_restore x30\n"
                                                  "1:\n"
                                                  "    ret\n"
                                                  "2:\n"
                                                  "    stp x29, x30, [sp, #-16]!\n"
                                                  ".cfi_def_cfa_offset 16\n"
                                                  ".cfi_offset x29, -16\n"
                                                  ".cfi_offset x30, -8\n"
                                                  "    mov x29, sp\n"
                                                  "    bl host_vfork_failed\n"
                                                  "    ldp x29, x30, [sp], #16\n"
                                                  ".cfi_def_cfa_offset 0\n"
                                                  ".cfi_restore x29\n"
                                                  ".cfi_restore x30\n"
                                                  "    ret\n"
                                                  ".cfi_endproc\n"
                                                  ".size vfork, .-vfork\n");
#endif
