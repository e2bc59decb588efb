/* SPDX-License-Identifier: MIT */
/*
 * host/host.h - the host contract: every libc function libpipeprof.so interposes lives in host/,
 * one file per concern, and each file's header says what the host may rely on:
 *
 *   threads.c    pthread_create
 *   blocking.c   nanosleep clock_nanosleep usleep sleep poll ppoll select epoll_wait epoll_pwait
 *                read recv recvfrom accept accept4 pthread_cond_wait pthread_cond_timedwait
 *                pthread_join
 *   eintr.c      pselect sigtimedwait sigwaitinfo sem_wait sem_timedwait sem_clockwait
 *                epoll_pwait2 recvmsg recvmmsg pause sigsuspend semop semtimedop msgrcv
 *                msgsnd
 *                (and the waits fds.c's syscall passes to it)
 *   writes.c     write writev send sendto sendmsg getrandom sendfile sendfile64
 *   signals.c    pthread_sigmask sigprocmask sigaction signal bsd_signal sysv_signal raise
 *                pthread_kill pthread_sigqueue tgkill
 *   exit.c       _exit _Exit vfork
 *   exec.c       execve execv execvp execvpe execl execlp execle posix_spawn posix_spawnp
 *                system
 *   creds.c      setuid setgid seteuid setegid setreuid setregid setresuid setresgid setgroups
 *   ns.c         unshare setns
 *   sockets.c    bind connect listen unlink
 *   seccomp.c    prctl (and the SYS_seccomp fds.c's syscall passes to it)
 *   dl.c         dl_iterate_phdr dlclose
 *   fds.c        close close_range closefrom dup2 dup3 syscall eventfd epoll_create
 *                epoll_create1 socket socketpair pipe pipe2 open open64 __open_2 __open64_2
 *                openat openat64 __openat_2 __openat64_2 creat creat64 dup memfd_create fopen
 *                fopen64 fclose opendir closedir readdir readdir64 readdir_r readdir64_r
 *                scandir scandir64 readlink stat stat64 lstat lstat64 access timerfd_create
 * signalfd inotify_init inotify_init1 pidfd_open mkstemp mkstemp64 mkostemp mkostemp64 mkstemps
 *                mkstemps64 mkostemps mkostemps64 tmpfile tmpfile64 freopen freopen64 fcntl
 *                fcntl64 pidfd_getfd posix_openpt getpt shm_open mq_open fanotify_init
 *                open_by_handle_at openpty forkpty popen openlog syslog vsyslog __syslog_chk
 *                __vsyslog_chk setmntent setutent getutent getutid getutline pututline
 *                getutent_r getutid_r getutline_r setutxent getutxent getutxid getutxline
 *                pututxline setpwent getpwent getpwent_r setgrent getgrent getgrent_r setspent
 *                getspent getspent_r sethostent gethostent gethostent_r setnetent getnetent
 *                getnetent_r setprotoent getprotoent getprotoent_r setservent getservent
 *                getservent_r setrpcent getrpcent getrpcent_r setaliasent getaliasent
 *                getaliasent_r res_query __res_query res_search __res_search res_querydomain
 *                __res_querydomain res_send __res_send res_nquery __res_nquery res_nsearch
 *                __res_nsearch res_nquerydomain __res_nquerydomain res_nsend __res_nsend
 *                gethostbyname gethostbyname2 gethostbyaddr gethostbyname_r gethostbyname2_r
 *                gethostbyaddr_r getaddrinfo getnameinfo getnetbyname getnetbyaddr
 *                getnetbyname_r getnetbyaddr_r fstatat fstatat64 lseek lseek64 fsync fdatasync
 *                fchmod fchown ftruncate ftruncate64 flock posix_fadvise posix_fadvise64
 *                shutdown setsockopt
 *                fchdir statx pread pread64 readv fstatfs fstatfs64 fgetxattr __fxstat
 *                __fxstat64 pwrite pwrite64 preadv preadv64 pwritev pwritev64 preadv2 preadv64v2
 *                pwritev2 pwritev64v2 splice sendmmsg fsetxattr fstatvfs fstatvfs64 fchmodat
 *                fchownat tee vmsplice copy_file_range fremovexattr flistxattr futimens futimes
 *                fexecve getdents64 inotify_add_watch inotify_rm_watch epoll_ctl timerfd_gettime
 *                sync_file_range fallocate fallocate64 syncfs lockf lockf64 fanotify_mark mkdirat
 *                unlinkat renameat renameat2 linkat symlinkat readlinkat faccessat mknodat mkfifoat
 *                utimensat futimesat name_to_handle_at execveat timerfd_settime move_mount
 *                mount_setattr fsconfig fsopen open_tree open_tree_attr fspick fsmount mmap mmap64
 *                getrlimit getrlimit64 setrlimit setrlimit64 prlimit prlimit64 getdtablesize
 *                sysconf
 *
 * Direction: host/ depends on libc only. The agent, the shim (and through the shim the IPC
 * server) call into it through this header; host/ calls back into them only through the two
 * hook tables below, which they install. Without hooks every interposer passes its call
 * through to libc unchanged. Context: the interposers run on the host's threads, in whatever
 * state the host calls them from; they pass errno and results through unchanged.
 */
#ifndef HOST_HOST_H
#define HOST_HOST_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The real pthread_sigmask or sigprocmask, as the signals.c interposers found it. */
typedef int (*host_sigmask_fn)(int how, const sigset_t *set, sigset_t *old);

/*
 * What the sampling agent adds to threads.c, blocking.c and signals.c (agent/host-hooks.c).
 * Every hook is called on the host thread that made the interposed call, never in a signal
 * handler; fa is the interposer's (or the new thread's trampoline's) __builtin_frame_address(0),
 * whose frame record leads to the host's call site.
 */
struct host_agent_hooks {
    /* 1 when the interposers do the agent's work for the calling thread (the agent runs and the
     * thread is the host's). Read on every interposed call: cheap and lock-free. */
    int (*active)(void);
    /* A thread pthread_create started, before its start routine fn: registers it. stack_size
     * is the size of the stack it was created with (its attributes', else the process's
     * default; 0 when not known), so that its bounds need no pthread_getattr_np (which
     * allocates, where the host's thread may never allocate). */
    void (*thread_started)(void *(*fn)(void *), uint64_t fa, uint64_t stack_size);
    /* Before a blocking call: records the caller's stack under leaf, the address of the libc
     * function the interposer calls (0: none), so that the stack names the call it waits in; the
     * token goes to blocking_leave. */
    void *(*blocking_enter)(uint64_t fa, uint64_t leaf);
    void (*blocking_leave)(void *token);
    /* How many of the agent's signals the calling thread has handled: a count that changed
     * across a call that failed with EINTR says the agent interrupted it. */
    uint32_t (*signals_handled)(void);
    /* Counts one EINTR the interposers retried instead of returning. */
    void (*eintr_absorbed)(void);
    /* Changes the calling thread's mask through real, with the agent's bookkeeping of its
     * sampling signal around it; returns real's result (errno as real left it). Called only
     * while active() and for a change (set not NULL): else the call goes straight to real. */
    int (*change_mask)(host_sigmask_fn real, int how, const sigset_t *set, sigset_t *old,
                       uint64_t fa);
    /* Around a send of the library's signal to thread tid of this process, not the caller
     * (pthread_kill, pthread_sigqueue, tgkill): send_begin before the real send, with the
     * si_code and value the host's handler is to get (value NULL: none); send_end after it
     * with its token, the same tid, and whether the send succeeded. The kernel merges the send
     * into one of the agent's instances pending there, if any; the agent's handler then runs
     * the host's disposition for it (agent/sig-handler.c). Lock-free and errno left as found: a
     * host's signal handler may send. A NULL token: not a thread the agent knows. */
    void *(*send_begin)(int32_t tid, int code, const union sigval *value);
    void (*send_end)(void *token, int32_t tid, int sent);
    /* Before a dlclose and after it returned (dl.c), whatever it did: the agent rescans its
     * module list, so that the library is known first and, if the call unloaded it, gone as of
     * now (agent/modules.c). Called whether or not the agent runs; errno is restored around it. */
    void (*dlclosed)(void);
    /* Just before an exec (exec.c), after the server's sessions_end: nothing of the agent's is
     * pending for the calling thread or sent to it any more (the new image's disposition of the
     * signal is SIG_DFL until its own agent claims it, if it has one; agent/host-hooks.c says
     * why). Returns the token for exec_back, which the exec calls if it failed (the thread is
     * sampled again). Called whether or not the agent runs; errno is kept. */
    int (*exec_prepare)(void);
    void (*exec_back)(int token);
};

/* Which call a socket name is for (sockets.c). */
enum host_socket_op {
    HOST_SOCKET_BIND,
    HOST_SOCKET_CONNECT,
    HOST_SOCKET_UNLINK,
};

/*
 * What the diagnostic server's owner (shim/shim.c) adds to exit.c, exec.c, creds.c, ns.c,
 * sockets.c and seccomp.c. Called on the host thread that made the call.
 */
struct host_server_hooks {
    /* Ends every session with rundown within a bounded wait (exit, exec); 1 when this
     * process's own server was stopped (a vfork child finds its parent's: 0). */
    int (*sessions_end)(void);
    /* After an exec that failed, when sessions_end returned 1: the image serves again. */
    void (*exec_failed)(void);
    /* Before a credential change: stops the agent and the server; 1 when they were running. */
    int (*creds_before)(void);
    /* After it, when creds_before returned 1: starts them again with the new credentials. */
    void (*creds_after)(void);
    /* Before a call that may install a seccomp filter or strict mode (seccomp.c): stops the
     * agent and the server for good, with no later start in this process or its fork()ed
     * children (creds_after, exec_failed and a fork child's start do nothing after it). */
    void (*seccomp_before)(void);
    /* The path a socket name of a bind, connect or unlink goes to instead, written into out
     * (size bytes); 1 when it is redirected, 0 to leave the call alone. */
    int (*socket_redirect)(enum host_socket_op op, const char *path, char *out, size_t size);
    /* In the parent, after vfork() returned (its child has exec'd or ended), on the thread that
     * called it; errno is kept by the caller. May be NULL. */
    void (*vfork_parent)(void);
};

/*
 * Install a hook table (static storage, never freed); the last one installed is used. Each
 * also links the concern files it serves into a program that uses host/ as a static archive
 * (host/host.c says why). Context: any thread; an atomic store.
 */
void host_set_agent_hooks(const struct host_agent_hooks *hooks);
void host_set_server_hooks(const struct host_server_hooks *hooks);

/*
 * The next definition of a libc function after ours (dlsym(RTLD_NEXT)), looked up once and kept
 * in *slot; NULL when there is none. Context: any thread but a signal handler (the first call
 * takes the loader's lock).
 */
void *host_real(_Atomic(void *) *slot, const char *name);

/* The real pthread_create (threads.c), for threads of the library's own. */
typedef int (*host_pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                      void *);
host_pthread_create_fn host_real_pthread_create(void);

/*
 * Starts a thread of the library's own (the agent's, the shim's): the real pthread_create, every
 * signal blocked in the new thread (it inherits the mask), never registered with the agent.
 * Under ASan the new thread clears its stack's shadow before fn runs (threads.c says why).
 * attr may be NULL. Returns 0 or -errno. Context: any thread but a signal handler.
 */
int host_thread_spawn(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/*
 * The library's signal (signals.c, sig-chain.c). host_signal_claim installs handler for signo
 * (SA_SIGINFO | SA_RESTART) with the real sigaction; the disposition found there (SIG_DFL, an
 * inherited SIG_IGN, a handler installed before) becomes the host's, and so does every later
 * sigaction, signal, bsd_signal or sysv_signal of signo by the host: recorded and reported back
 * in oldact, never installed. Host handlers with SA_ONSTACK get signo added to their mask, so
 * that it never lands on a small alternate stack. Returns 0 or -errno. The claim holds for the
 * life of the process: the agent's stop leaves handler installed, so handler must drop the
 * library's own instances once it no longer samples and pass the host's to host_signal_chain.
 * Any change of the real disposition while one of the library's instances may be in flight is a
 * harm under qemu-user, which takes a signal from the kernel into a queue of its own and acts on
 * it later (SIG_IGN does not empty that queue), by the disposition of that later moment: SIG_DFL
 * there ended the process by SIGPROF, and a change between its two reads of the handler sent the
 * thread to address 1 (SIG_IGN) or 0. A claim of another signal than the one held gives that one
 * back first (SIG_IGN discards its pending instances, then the host's disposition goes in).
 * Context: any thread but a signal handler, one caller at a time (the agent's life lock).
 */
int host_signal_claim(int signo, void (*handler)(int, siginfo_t *, void *));
/* SIGNAL CONTEXT: the library's handler got an instance of its signal it did not send (a kill,
 * the host's timer or setitimer): it goes where the host's disposition says (its handler with
 * its mask and flags, on its alternate stack for SA_ONSTACK; nothing for SIG_IGN, the default
 * action for SIG_DFL). Without the host's SA_RESTART, *uctx of a call the kernel restarted is
 * turned into the EINTR bare returns (x86-64). */
void host_signal_chain(int signo, siginfo_t *info, void *uctx);

/* The real pthread_sigmask (signals.c), for the library's own masking on host threads: the
 * interposer's bookkeeping is for the host's. Returns 0 or an error number, as libc's. */
int host_sigmask_raw(int how, const sigset_t *set, sigset_t *old);

/*
 * The library's own file descriptors (fds.c). An fd the library creates through eventfd,
 * epoll_create*, socket, pipe2, open, open64, accept or accept4 (from its own code, from an object
 * it trusts, or on one of its threads) is moved to a high number and registered by the interposers
 * themselves; one it opens otherwise goes through host_fd_take(). A registered fd is closed by
 * the library with close() or syscall(SYS_close), which forget it; host_fd_forget() is for one
 * closed another way. Context: any thread but a signal handler.
 */
/* Moves fd to a high number (close-on-exec) and registers it; returns the fd to use from now on
 * (fd itself, registered, when it cannot move). A negative fd is returned unchanged. */
int host_fd_take(int fd);
void host_fd_forget(int fd);
/* Around a creation the interposers do not see (perf_event_open through syscall()) up to its
 * host_fd_take(): the host's closes wait meanwhile, so none takes the new fd's low number before
 * it moves (fds.c, "the moment of a move"). Not across a blocking call. */
void host_fds_hold(void);
void host_fds_release(void);
/* The calls made from code of the object that holds code are the library's (libuv, libelf) on
 * the library's threads and, on a host thread, between host_fds_library_span(1) and (0): where
 * the library runs that code there (the shim's start, stop and exit, libuv's fork handler in a
 * child). Elsewhere that code is the host's, which may run libuv itself; its data calls on the
 * library's fds pass (libuv's signal lock, one pipe per process). Spans nest. Context: the
 * calling thread; not a signal handler. */
void host_fds_trust(const void *code);
void host_fds_library_span(int on);
/* In a fork()ed child, its first handler: the parent's fds are inherited copies, still the
 * library's (left out of listings, EBADF to the host's calls) until host_fds_inherited_close,
 * its last handler, closes those nothing of the library took or closed in between (libuv's
 * handler makes its signal lock pipe anew). A bare child has none of them. Context: the
 * child's only thread. */
void host_fds_forked_child(void);
void host_fds_inherited_close(void);
/* fork()'s prepare and parent handlers: the fork in the fd gate as a host's close, so that no
 * library creation is under way at it (its fd in the child, its mark not). */
void host_fds_fork_prepare(void);
void host_fds_fork_parent(void);
/* Registers those two and a child handler, once per process, whoever asks first: the shim first
 * of all, with its own child handler (which calls host_fds_forked_child first thing); the agent,
 * for a process whose agent came without the shim (linked in: its child handler closes the
 * parent's scan files through the close interposer, which takes the mark lock), with NULL, for
 * host_fds_forked_child itself. Context: not signal-safe. */
void host_fds_atfork_register(void (*child)(void));
/* The same handlers registered again, whatever was registered before: after a vfork()ed child's
 * exit() unregistered every handler of the library (__cxa_finalize of its object, in the memory
 * the parent shares; shim/shim.c, shim_vfork_parent). Context: not signal-safe. */
void host_fds_atfork_register_again(void (*child)(void));
/* The calling thread is the library's: its calls are the library's. */
void host_thread_mark_library(void);
/* What fds.c calls on the host's thread when the host dup2()s or dup3()s onto fd, one of the
 * library's: stop whatever holds it (one line on stderr); the host's call proceeds after. The
 * shim installs it; without it the fd is only forgotten. */
void host_fds_set_taken(void (*taken)(int fd));
/* 0 when fd, one of the library's, is the library's file in the caller's fd table too (the same
 * table, a copy kept at the caller's unshare, or one put back where the caller's number is free);
 * -errno when it is not (the host's own file there: -EBADF). Async-signal-safe. */
int host_fds_library_here(int fd);

/*
 * The library's calls into the loader that take its list lock (dl.c says why): dl_iterate_phdr,
 * dlopen and dlclose of the library's own code go through these, never straight to libc, so that
 * no fork of the host's lands while one of them holds that lock. host_loader_enter and _leave
 * hold it around other such calls (they nest). host_loader_atfork_register is for a library part
 * that takes its own lock around the loader's in its fork handlers: called before that part
 * registers them, so that the loader lock's prepare runs after its own. host_loader_close is the
 * real dlclose, without the agent's rescan. Context: any thread but a signal handler.
 */
struct dl_phdr_info;
void host_loader_atfork_register(void);
/* Its handlers registered again (as host_fds_atfork_register_again, which says when). */
void host_loader_atfork_register_again(void);
void host_loader_enter(void);
void host_loader_leave(void);
int host_loader_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);
void *host_loader_open(const char *file, int flags);
int host_loader_close(void *handle);
/* For a fork's prepare handler, on the forking thread: 1 when host_loader_lock's holder (a
 * library call) cannot let go of it before this thread's own loader call returns: this thread is
 * in the host's dl_iterate_phdr (its callback forks: glibc's list lock is this thread's), or in
 * the host's dlclose (a destructor forks: dl_load_lock is this thread's) while the holder is in a
 * dlopen or dlclose of libc's; or this thread has looked at the same library dlopen or dlclose
 * for 1 s (CLOCK_MONOTONIC) since its first look: it may be in a constructor of the host's dlopen,
 * which no counter tells (dl.c). Each call is one look. The prepare handler of host_loader_lock
 * then leaves it and the child makes it anew; a lock taken around loader calls (the agent's module
 * lock) may be left too when its holder is in one (dl.c's header says why). 0 otherwise, and while
 * it is free. */
int host_loader_fork_stuck(void);
/* The pause between two looks of a prepare handler that polls a lock: 200 us, by a raw system
 * call (the host's errno and the library's sleep interposers untouched). */
void host_loader_fork_pause(void);
/* For a fork()ed child's handler: 1 when a thread of the parent's (this one included) was inside
 * the host's dl_iterate_phdr at the fork, or an ancestor's was at an earlier fork this process
 * comes from. The child's loader list lock is then held for good (by a thread the child does not
 * have, or by this one under its old tid), so nothing in that child may walk the loaded objects,
 * or dlopen or dlclose one (bare, the host's own would wait forever too). Also 1 when the fork's
 * prepare handlers left host_loader_lock to a library dlopen or dlclose after their bound (dl.c:
 * the holder may have held the list lock). Now and then 1 for a child whose fork fell just
 * before or after such a walk held the lock. */
int host_loader_list_lost(void);

/*
 * A process that started under an inherited seccomp filter (host.c says why): 1 when system call n
 * is one the library leaves out there (the caller then acts as on a filter's EPERM; errno is not
 * touched: some callers run in the host's calls); 0 otherwise
 * (and always where /proc/self/status said no filter). host_filter_note_start reads that once, in
 * the library's first constructor (the shim's, or fds.c's in a program that links the library);
 * later calls return at once. Context: host_filter_refuses anywhere, a signal handler too (a load
 * and a switch); host_filter_note_start a constructor.
 */
void host_filter_note_start(void);
int host_filter_refuses(long n);
/* Under such a filter: the name of a call of the library's that the filter kills (host.c's probe,
 * run by host_filter_note_start), where the library must not start; NULL otherwise. */
const char *host_filter_killed(void);

#endif /* HOST_HOST_H */
