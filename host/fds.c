/* SPDX-License-Identifier: MIT */
/*
 * host/fds.c - file descriptors: the library's own stay its own.
 *
 *   close close_range closefrom dup2 dup3
 *                    interposed because a daemon closes every fd it did not open (a loop over
 *                    3..4095, close_range(3, ~0U, 0), closefrom(3)) or dup2()s a log file over
 *                    low numbers, after the library started. Without this the agent's manager
 *                    read the host's new pipe (8 to 41 % of its bytes lost), libuv aborted at
 *                    exit on its closed epoll fd (status 134), and nettrace bytes or an eventfd
 *                    counter went into the host's log file.
 *   fopen fclose opendir closedir
 *                    interposed for the library's own reads of /proc files and directories:
 *                    its read-only fopen and its opendir open the fd here (high, registered),
 *                    and fclose and closedir forget it; the host's are libc's, in the gate below.
 *   readdir readdir64 readdir_r readdir64_r scandir scandir64 readlink stat stat64 lstat
 *                    lstat64 access
 *                    and the opens, fopen, fopen64, opendir, readlinkat, fstatat, fstatat64, statx,
 * faccessat, getdents64 and syscall()'s SYS_getdents64: this process's own fd directory
 *                    (/proc/self/fd/N, /proc/thread-self/fd/N, /proc/<pid>/fd/N with the pid or
 *                    the caller's thread id, /proc/<pid>/task/<tid>/fd/N, /dev/fd/N, and fdinfo/;
 *                    N alone at a dirfd, or the working directory, that is one) answers ENOENT
 *                    for a library fd's N, as bare, and its listings leave those entries out
 *                    ("The fd directory" below). Before, under record in CPU mode each listing
 *                    held 14 library numbers (768..781), readlink and stat answered for all 14
 *                    and open opened 8 of them, the library's /proc/PID/task and pipes among them
 *                    (host-contract-fds-fdlist). Not covered: getdents64 made without libc or
 *                    syscall() (Go), glibc's internal listings and opens (scandirat, nftw,
 *                    realpath, freopen), a relative path with a directory part, /proc/<tid>/fd of
 * another thread, another thread's private fd table, the path calls not listed. The same
 *                    listings of this process's task directory (/proc/self/task, /proc/<pid>/task)
 *                    leave the library's threads out (host_library_tids): before, the host's 4
 *                    threads listed 5 entries preloaded and 6 under record (Python's
 *                    os.listdir('/proc/self/task'); host-contract-fds-tasklist); the thread
 *                    count of /proc/self/stat and /proc/self/status is host/procstat.c's, which
 *                    the opens and fopen call (host_procstat_maybe). Not covered there: a path
 *                    under a library thread's entry, /proc/<tid> of a library thread.
 *                    freopen freopen64
 *                    interposed because glibc's dup3()s its new file onto the stream's number,
 *                    a close of whatever holds it: the host's counts itself in as a close.
 *   syscall          interposed for the fd calls that programs make without libc's wrappers,
 *                    each as the interposer of its libc name (one switch on the number picks
 *                    them: host_fds_syscall_kind): SYS_close (libuv closes its fds so; a host's
 *                    raw close of a library fd gets the EBADF of close() too), SYS_close_range
 *                    (programs built for a glibc before 2.34, which has no close_range: a
 *                    daemon's syscall(SYS_close_range, 3, ~0U, 0) closed the library's fds and
 *                    libuv aborted the host, status 134 preloaded, in listen mode and under
 *                    record in CPU and wall mode, with CLOSE_RANGE_UNSHARE too), SYS_dup2 and
 *                    SYS_dup3 (onto 768..800 the same abort), SYS_fcntl (F_DUPFD and
 *                    F_DUPFD_CLOEXEC as creators; its other commands as fcntl's: EBADF for a
 *                    library fd), SYS_recvmsg and SYS_recvmmsg (the fds SCM_RIGHTS brings, as
 *                    eintr.c's recvmsg's, and retried after the agent's EINTR as eintr.c's are:
 *                    on a socket with SO_RCVTIMEO the wall signal ended 33 and 34 of 40 raw
 *                    recvmsg waits per run at 1000 Hz, and 1 to 3 of 20000 raw recvmmsg waits),
 *                    and the system calls that create fds (open, openat,
 *                    openat2, creat, dup, memfd_create, eventfd, eventfd2, epoll_create*, socket,
 *                    accept, accept4, pipe, pipe2, socketpair, timerfd_create, signalfd* of -1,
 *                    inotify_init*, pidfd_open, pidfd_getfd, fanotify_init, open_by_handle_at,
 *                    mq_open, userfaultfd, perf_event_open, io_uring_setup, memfd_secret, fsopen,
 *                    fsmount, fspick, open_tree, open_tree_attr, bpf's commands that return an fd,
 * seccomp's SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_NEW_LISTENER, whose result is its
 * notification listener, and landlock_create_ruleset without flags, whose result is a ruleset: with
 * LANDLOCK_CREATE_RULESET_VERSION it is a version, never moved); a host's SYS_tgkill, SYS_tkill and
 *                    SYS_rt_tgsigqueueinfo go to signals.c's host_syscall_send and the waits to
 *                    eintr.c; SYS_seccomp first goes to seccomp.c (host_seccomp_hook: the library
 *                    stops before a filter is installed, then the listener's fd as above); every
 *                    other system call passes through with its six arguments.
 *   eventfd epoll_create epoll_create1 socket socketpair pipe pipe2 open open64 __open_2
 *   __open64_2 openat openat64 __openat_2 __openat64_2 creat creat64 dup memfd_create fopen64
 *   timerfd_create signalfd inotify_init inotify_init1 pidfd_open mkstemp mkstemp64 mkostemp
 *   mkostemp64 mkstemps mkstemps64 mkostemps mkostemps64 tmpfile tmpfile64 fcntl fcntl64
 *   pidfd_getfd posix_openpt getpt shm_open mq_open fanotify_init open_by_handle_at openpty
 *   forkpty popen
 *                    interposed so that an fd the library creates (libuv's epoll fd, async
 *                    eventfd, signal pipes and the spare /dev/null it keeps for EMFILE, the IPC
 *                    sockets, the files it reads; accept and accept4 of
 *                    blocking.c do the same for connections, eintr.c's recvmsg and recvmmsg
 *                    for fds an SCM_RIGHTS message brings) moves to a high number (F_DUPFD_CLOEXEC
 * from the host's soft RLIMIT_NOFILE where the hard limit allows, else a quarter below it or 768:
 * host_fds_base); fcntl and signalfd create only for
 * F_DUPFD* and for fd -1, and pass everything else through and is registered in a lock-free set:
 * the host's low numbers are its own, as bare. host_fd_take() does the same for fds the library
 * opens by other means (perf_event_open). fcntl's (and fcntl64's, and syscall()'s SYS_fcntl's)
 * other commands of the host's on a registered number fail with EBADF, as bare, and change
 * nothing of the library's (host_fds_fcntl_other): a scan of 3..4095 with F_GETFD, F_GETFL,
 * F_SETFD, F_SETFL, F_GETLK... got 15 successes a command under record in CPU mode, bare 0.
 *   openlog syslog vsyslog __syslog_chk __vsyslog_chk
 *                    interposed because glibc opens syslog's socket inside them and keeps it at
 *                    its number: the host's call counts itself in as a close (the gate below),
 *                    so that no library fd is low across it and the socket gets bare's number
 *                    (without it, 190 to 229 of 497 to 634 calls a kind got the next number
 *                    under host-contract-fds-create's knob, CPU mode).
 *   setmntent setutent getutent getutid getutline pututline getutent_r getutid_r getutline_r
 *   setutxent getutxent getutxid getutxline pututxline setpwent getpwent getpwent_r setgrent
 *   getgrent getgrent_r setspent getspent getspent_r
 *                    interposed because glibc opens a file inside them and keeps it at its
 *                    number (setmntent's stream, the utmp file, NSS's passwd, group and shadow
 *                    enumeration streams): counted in the gate as a close, as syslog's (without
 *                    it, under host-contract-fds-create's knob, getpwent, setmntent and getutent
 *                    calls got the next number: figures in the "Still open" paragraph below).
 *   sethostent gethostent gethostent_r setnetent getnetent getnetent_r setprotoent getprotoent
 *   getprotoent_r setservent getservent getservent_r setrpcent getrpcent getrpcent_r setaliasent
 *   getaliasent getaliasent_r
 *                    interposed for the same reason: NSS's other enumeration streams (hosts,
 *                    networks, protocols, services, rpc, aliases), counted in as those above
 *                    (without it, under the knob, 0 to 593 of 103 to 2305 gethostent,
 *                    sethostent(1), getnetent, getprotoent, getservent, setservent(1) and
 *                    getrpcent calls a kind got the next number, CPU and wall mode).
 *   res_query __res_query res_search __res_search res_querydomain __res_querydomain res_send
 *   __res_send res_nquery __res_nquery res_nsearch __res_nsearch res_nquerydomain
 *   __res_nquerydomain res_nsend __res_nsend gethostbyname gethostbyname2 gethostbyaddr
 *   gethostbyname_r gethostbyname2_r gethostbyaddr_r getaddrinfo getnameinfo getnetbyname
 *   getnetbyaddr getnetbyname_r getnetbyaddr_r
 *                    interposed because the resolver keeps its socket open across calls when
 *                    its state has RES_STAYOPEN: counted in as a close only then (without it,
 *                    under the knob, 0 to 484 of 32 to 1960 res_query, gethostbyname and
 *                    getaddrinfo calls a kind got the next number, CPU and wall mode).
 *   fstatat fstatat64 lseek lseek64 fsync fdatasync fchmod fchown ftruncate ftruncate64 flock
 *   posix_fadvise posix_fadvise64
 *                    interposed because a host that probes numbers (a daemon that checks each fd
 *                    before it closes it, a test harness's fstat loop) saw the library's fds where
 *                    bare has none: a scan of 3..4095 under record in CPU mode got 11 to 14 fewer
 *                    EBADF a call than bare (fstat 14 successes where bare 3, ctest's own fds;
 *                    flock 15; fsync 14 EINVAL where bare 2), through syscall() too. The host's
 *                    call on a library fd fails with EBADF (posix_fadvise returns it) and touches
 *                    nothing of the library's, as fcntl's other commands (HOST_FDS_ON_FD:
 *                    host_fds_fcntl_other, whose fast path is one bit test and one load); fstatat
 *                    looks at its fd only for a relative path or an empty one with AT_EMPTY_PATH
 *                    (host_fds_at_fd). syscall()'s SYS_fstat, SYS_newfstatat, SYS_lseek,
 *                    SYS_ioctl, SYS_fsync, SYS_fdatasync, SYS_fchmod, SYS_fchown, SYS_ftruncate,
 *                    SYS_flock, SYS_fadvise64, SYS_getsockopt, SYS_getsockname and SYS_getpeername
 *                    the same (host_fds_syscall_kind). On another number the host's call waits
 *                    (the host's bound) while a library fd is in its low moment, as fcntl's.
 *                    libc's fstat, fstat64, ioctl, getsockopt, getsockname and getpeername are not
 *                    interposed: the sanitizers' runtimes intercept them (ASan the last four, TSan
 *                    all six), and the library's own calls (libuv's) then reach an interposer here
 *                    from the runtime's code, not told from a host's: under ASan libuv's listen
 *                    failed with EBADF and no session started. Their syscall() forms have no such
 *                    runtime in between.
 *   shutdown setsockopt fchdir statx
 *                    interposed as those, for the same host and for a host that acts on a number
 *                    it closed (a stale fd of its own, a bug bare gets EBADF for): its shutdown
 *                    or setsockopt reached the library's sockets, its fchdir a directory the
 *                    library keeps open (under record one fchdir of the scan below succeeded:
 *                    the host's working directory moved into the library's directory). A scan
 *                    of 3..4095 got 8 fewer EBADF a call than bare preloaded without a session
 *                    and 12 fewer under record in CPU mode, through syscall() too
 *                    (host-contract-fds-datacalls). statx looks at its fd only for a relative
 *                    path or an empty one with AT_EMPTY_PATH, as fstatat. None of the
 *                    sanitizers' runtimes intercepts them.
 *   pread pread64 readv fstatfs fstatfs64 fgetxattr __fxstat __fxstat64
 *                    and writes.c's write, writev, send, sendto and sendmsg, blocking.c's read,
 *                    recv and recvfrom and eintr.c's recvmsg, the data calls: a host's write to a
 *                    stale number reached the library's socket or pipe (the scan's writes are of
 *                    0 bytes; a host's bytes would join the library's protocol), a read took the
 *                    library's (in the scan above, 2 of its 1-byte reads got a byte the library
 *                    was to read), fstatfs and __fxstat (the fstat of binaries
 *                    built for a glibc before 2.33) answered for its files: 5 to 8 fewer EBADF a
 *                    call than bare preloaded, 7 to 12 under record. The host's call on a library
 *                    fd fails with EBADF and moves nothing; the fast path is one bit test of the
 *                    number (HOST_FD_DATA_REFUSED, host/internal.h: read and write are hot), and
 *                    the caller is looked at only for a library fd (host_fds_data_refused). A
 *                    library fd's low moment (marked) is the bit's; the instant before it, from
 *                    the creating system call's return to host_fd_take's mark, is waited for:
 *                    the fast path also loads host_fds_creating_n, the library creations in that
 *                    instant, and while it is not 0 the host's call on an unmarked number waits
 *                    (sched_yield, at most the host's creations' bound) and looks at the bit
 *                    again (host-contract-fds-datacalls-lowmoment, each such instant held 2 ms:
 *                    before, 3000 to 7000 of a call's answers in 1.5 s were not EBADF; a
 *                    fresh-clone CI run of -datacalls met one unheld, a pread's ESPIPE). Left: a
 *                    creation that begins after the host's look and whose system call returns
 *                    before the host's own (the host's thread preempted between the two, as a
 *                    library thread's wakeup does: 0 or 1 answer in 1.5 s in that test), and the
 *                    creations outside the gate (a library's blocking accept, its recvmsg of
 *                    fds). The library's close of a marked fd clears the bit after the close
 *                    (host_fds_close_marked). The sanitizers' runtimes intercept these
 *                    (ASan all but __fxstat, TSan all), and their interceptors call the
 *                    definition here from the runtime's code for the library's calls and the
 *                    host's alike: libuv's on the host's
 *                    threads (the server's start in the constructor, its stop at exit) look like
 *                    the host's, and an EBADF makes libuv abort (without the rule below the host
 *                    died at its start under ASan, status 134, in host-contract-fds-closeloop,
 *                    -datacalls and cli-record). So a call whose return address is in
 *                    an object whose definition of such a name comes before this library's
 *                    (host_fds_ahead_find: a sanitizer's runtime, another preloaded wrapper,
 *                    found once at the constructor) passes as it is: under ASan and TSan the
 *                    host's libc data calls on a library fd reach it, as before; their syscall()
 *                    forms are covered there too (SYS_read, SYS_write, SYS_pread64, SYS_readv,
 *                    SYS_writev, SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_shutdown,
 *                    SYS_setsockopt, SYS_mmap of an fd, SYS_fstatfs, SYS_statx, SYS_fchdir,
 *                    SYS_fgetxattr: host_fds_syscall_on_fd, with the wait of the calls above).
 *                    libc's mmap is covered below.
 *   pwrite pwrite64 preadv preadv64 pwritev pwritev64 preadv2 preadv64v2 pwritev2 pwritev64v2
 *   splice sendmmsg fsetxattr fstatvfs fstatvfs64
 *                    and writes.c's sendfile and sendfile64 and eintr.c's recvmmsg: the rest of
 *                    the data calls, as those (HOST_FD_DATA_REFUSED, the ahead rule; splice and
 *                    sendfile on either of their two numbers). The same scan (0-byte positioned
 *                    and vector writes and reads, a 1-byte splice of a number to itself, a 0-byte
 *                    sendfile, recvmmsg and sendmmsg of no message, fsetxattr replacing an
 *                    attribute no file has, fstatvfs) got 3 to 8 fewer EBADF a call than bare
 *                    preloaded without a session (fstatvfs 10 successes where bare 2), the same
 *                    through syscall() (SYS_pwrite64, SYS_preadv, SYS_pwritev, SYS_preadv2,
 *                    SYS_pwritev2, SYS_splice, SYS_sendfile, SYS_sendmmsg, SYS_fsetxattr, and
 *                    SYS_recvmsg and SYS_recvmmsg ahead of their receive: host_fds_syscall_fd).
 *                    Under ASan and TSan the libc forms their runtimes intercept pass as the
 *                    calls above do (gcc 12's both define pwrite, pwrite64, preadv, preadv64,
 *                    pwritev, pwritev64, recvmmsg, sendmmsg, fstatvfs and fstatvfs64); the others
 *                    (the *2 names, splice, sendfile, fsetxattr) are covered there too: 3 to 8
 *                    fewer EBADF a call than bare under ASan preloaded before.
 *   fchmodat fchownat
 *                    interposed as fstatat (HOST_FDS_ON_FD, looking at the fd only for a relative
 *                    path or an empty one with AT_EMPTY_PATH; no sanitizer's runtime intercepts
 *                    them): a relative name that is not there got ENOENT or ENOTDIR instead of
 *                    bare's EBADF on 8 numbers preloaded (a name that is there, under a
 *                    directory the library keeps open, would have been changed); syscall()'s
 *                    SYS_fchmodat, SYS_fchmodat2 and SYS_fchownat the same (fchmodat2 by its
 *                    number, 452, where the headers lack it: before, syscall(452) of a relative
 *                    name on a library fd reached the kernel, 14 numbers off bare's EBADF).
 *   tee vmsplice copy_file_range fremovexattr flistxattr futimens futimes fexecve getdents64
 *   inotify_add_watch inotify_rm_watch epoll_ctl timerfd_gettime sync_file_range fallocate
 *   fallocate64 syncfs lockf lockf64 fanotify_mark mkdirat unlinkat renameat renameat2 linkat
 *   symlinkat readlinkat faccessat mknodat mkfifoat utimensat futimesat name_to_handle_at execveat
 *                    and openat's, openat64's, __openat_2's and __openat64_2's dirfd, and
 *                    sockets.c's bind and connect: the other calls on an fd's number, as the data
 *                    calls (HOST_FDS_DATA_AT: HOST_FD_DATA_REFUSED's bit test and wait, the ahead
 *                    rule; tee, copy_file_range, epoll_ctl, renameat* and linkat on either of
 *                    their two numbers; the *at calls on their dirfd only for a relative path, or
 *                    an empty one with AT_EMPTY_PATH, readlinkat's empty path always, utimensat's
 *                    and futimesat's NULL one the fd itself; fanotify_mark on its group and on its
 *                    dirfd). A scan of 3..4095 (tests/hosts/fds.c's datacalls, fdprobe: a 1-byte
 *                    tee of a number to itself, vmsplice of no segment, copy_file_range of 0
 *                    bytes, fremovexattr of an attribute no file has, flistxattr of size 0,
 *                    futimens of the access time, fexecve with an argv the kernel cannot read,
 *                    getdents64 of 0 bytes, an inotify watch of a path that is not there and the
 *                    removal of watch -1, epoll_ctl's DEL of the number from itself,
 *                    timerfd_gettime, sync_file_range without flags, fallocate of 0 bytes, syncfs,
 *                    lockf's F_TEST, bind and connect of 0 bytes, fanotify_mark of a path that is
 *                    not there, and each *at call, openat's and openat2's too, of a relative name
 *                    that is not there) got 8 fewer EBADF a call than bare preloaded without a
 *                    session (a relative name: ENOENT or ENOTDIR instead; under a library
 *                    directory a mkdirat, symlinkat, renameat or unlinkat of a name that is there
 *                    would have acted on it; vmsplice, flistxattr, syncfs and lockf 10 successes
 *                    where bare 2), 14 to 17 fewer under record in CPU mode, the same through
 *                    syscall() (SYS_tee, SYS_vmsplice, SYS_copy_file_range, SYS_fremovexattr,
 *                    SYS_flistxattr, SYS_utimensat, SYS_futimesat, SYS_execveat, SYS_getdents64,
 *                    SYS_getdents, SYS_inotify_add_watch, SYS_inotify_rm_watch, SYS_epoll_ctl,
 *                    SYS_timerfd_gettime, SYS_sync_file_range, SYS_fallocate, SYS_syncfs,
 *                    SYS_bind, SYS_connect, SYS_fanotify_mark, SYS_mkdirat, SYS_unlinkat,
 *                    SYS_renameat, SYS_renameat2, SYS_linkat, SYS_symlinkat, SYS_readlinkat,
 *                    SYS_faccessat, SYS_faccessat2, SYS_mknodat, SYS_name_to_handle_at, and
 *                    SYS_openat's and SYS_openat2's dirfd: host_fds_syscall_on_fd, with the wait
 *                    of fstat's, and host_fds_syscall_create). gcc 12's ASan runtime intercepts
 *                    flistxattr, name_to_handle_at, readlinkat and timerfd_gettime, its TSan
 *                    runtime those and epoll_ctl, bind and connect: the ahead rule passes the
 *                    library's calls (and the host's) through their interceptors.
 *   timerfd_settime move_mount mount_setattr fsconfig fsopen open_tree open_tree_attr fspick
 * fsmount mmap mmap64 and blocking.c's accept, accept4, epoll_wait and epoll_pwait, eintr.c's
 *                    epoll_pwait2, sockets.c's listen and signalfd's of a number above: the calls
 *                    that act on what a library fd's number holds where they succeed, as the
 *                    data calls (HOST_FD_DATA_REFUSED, the ahead rule). An accept took a
 *                    connection meant for the library's listener: a server's loop of non-blocking
 *                    accept4 over 3..1023 broke the first session of pipeprof collect against it
 *                    in 2 of 2 runs ("CollectTracing failed: Broken pipe", "ResumeRuntime
 *                    failed"), and under record got 41834 more errors other than EBADF than bare
 *                    in its 3000 passes (host-contract-fds-acceptloop). A listen sets the
 *                    listener's backlog, an epoll wait may take an edge-triggered event of
 *                    libuv's epoll, signalfd of a number sets a signalfd's mask and
 *                    timerfd_settime a timer's, an mmap of a perf event fd maps its ring. Their
 *                    scan (tests/hosts/fds.c's fdprobe_acting: listen with the backlog of the
 *                    library's own listener, accept and accept4 while no session connects, the
 *                    epoll waits of 0 ms into a page the kernel cannot write, which puts a ready
 *                    event back, signalfd and timerfd_settime, which the library keeps none of,
 *                    mmap of 0 bytes, the mount calls of a relative name that is not there or on
 *                    a number only fsopen makes) got 8 fewer EBADF a call than bare preloaded
 *                    without a session (listen and the epoll waits 1 success each: the library's
 *                    listener, libuv's epoll) and 12 to 15 fewer under record in CPU mode, the
 *                    same through syscall() (SYS_listen, SYS_accept, SYS_accept4,
 *                    SYS_epoll_wait, SYS_epoll_pwait, SYS_epoll_pwait2, SYS_signalfd and
 *                    SYS_signalfd4 of a number, SYS_timerfd_settime, SYS_open_tree, SYS_fspick,
 *                    SYS_fsmount, SYS_move_mount, SYS_mount_setattr, SYS_fsconfig:
 *                    host_fds_syscall_on_fd and host_fds_syscall_create_on; and where the
 *                    headers have their numbers, not these, SYS_getxattrat, SYS_setxattrat,
 *                    SYS_listxattrat, SYS_removexattrat, SYS_file_getattr and SYS_file_setattr,
 *                    not measured). The *at ones look at their dirfd only for a relative path,
 *                    or an empty one with their flag for it (AT_EMPTY_PATH, MOVE_MOUNT_F_ and
 *                    _T_EMPTY_PATH, FSPICK_EMPTY_PATH); move_mount at either of its two; fsopen,
 *                    open_tree, fspick and fsmount are creators as openat (glibc 2.36 has them;
 *                    before, they were made without the creators' wait), and so is
 *                    open_tree_attr (Linux 6.15, glibc 2.42; its number, 467 on x86_64 and
 *                    arm64, is after the headers of 6.1 and written here:
 *                    HOST_FDS_SYS_OPEN_TREE_ATTR; before, syscall(467) of a relative name at a
 *                    library directory fd, such as the thread scan's /proc/self/task, passed,
 *                    where bare it fails with EBADF). mmap looks at its fd
 *                    only without MAP_ANONYMOUS, and never looks up the real mmap: every mapping
 *                    of the host's allocators passes here, some before the constructor ran, and
 *                    dlsym may allocate (host_fds_mmap says how it calls the kernel until then).
 *                    signalfd, timerfd_settime, mmap, the mount calls (open_tree_attr's too),
 * fsmount, epoll_pwait and epoll_pwait2 (and their system calls through syscall()) check other
 *                    arguments before their fd: a bad flag, fsconfig's command, mmap's offset
 *                    (libc's check), the epoll waits' signal mask and timeout. A refused one
 *                    is made with HOST_FD_NEVER, a number no fd has, in the library fd's place,
 *                    so that the host gets bare's errno, EINVAL (EOPNOTSUPP) where bare gets it,
 *                    else EBADF; with EBADF for every library fd, 8 numbers a call preloaded and
 *                    11 under record answered so where bare answered EINVAL
 *                    (host-contract-fds-argsfirst). So are the older calls that check another
 *                    argument first (Linux 6.18 by its source, and as run bare on a free number:
 *                    not EBADF): openat, openat64, __openat_2, __openat64_2 and openat2 (flags,
 *                    O_TMPFILE without a write access, openat2's how), the positioned reads and
 *                    writes and their 64 names (a negative offset), fstatat, statx, faccessat,
 *                    fchmodat, fchownat, linkat, unlinkat, renameat2, utimensat,
 *                    name_to_handle_at, execveat (flags; faccessat's mode), readlinkat (size 0),
 *                    mknodat (its type), splice, tee, vmsplice, fanotify_mark (flags),
 *                    inotify_add_watch (mask 0), epoll_ctl (its event, read first), sendfile
 *                    (its offset, read first: writes.c), lockf (libc's command check),
 *                    fgetxattr and fsetxattr (the name, flags), and syscall()'s forms of those
 *                    (host_fds_syscall_never); before, 12 to 14 numbers a call under record
 *                    answered EBADF where bare answered EINVAL, EFAULT or ERANGE. The others
 *                    here look at their fd first (accept4's flags, epoll_wait's count of events,
 *                    copy_file_range's, sync_file_range's and fallocate's flags, futimesat's
 *                    times, getdents64's size, readv's count: run bare, EBADF).
 *                    gcc 12's ASan runtime intercepts accept, accept4, mmap, mmap64 and
 *                    timerfd_settime, its TSan runtime those and listen, epoll_wait, epoll_pwait
 *                    and signalfd: under them the host's libc calls of those pass, as the data
 *                    calls' do.
 *   getrlimit getrlimit64 setrlimit setrlimit64 prlimit prlimit64 getdtablesize sysconf
 *                    interposed for RLIMIT_NOFILE (sysconf for _SC_OPEN_MAX; the rest passes to
 *                    libc): the library's fds go at or above the host's soft limit, with the
 *                    soft limit raised for the moment of their move (host_fds_base), and the
 *                    host's get and set of the limit count themselves in the gate below as a
 *                    close does, so that a read never answers the raised limit and a set is
 *                    never undone by the move's restore (host_fds_rlimit).
 *
 * A call is the library's when it comes from one of the library's threads
 * (host_thread_mark_library), from the code of libpipeprof.so, or from the code of an object it
 * trusts (host_fds_trust: libuv, and libelf once agent/symtab.c loads it: its elf_begin checks its
 * fd with fcntl(F_GETFD), which fails for a host's call on a library fd) inside one of the
 * library's spans on a host thread (host_fds_library_span: the shim's starts and stops, libuv's
 * fork child handler); every other call is the host's. A host may run libuv itself, the same
 * object (linked against libuv.so.1) or one whose uv_* names the library's bind to (Node), and
 * its libuv's fds are its own. The data calls and fcntl's other commands from a trusted object's
 * code pass on a library fd anywhere: libelf's F_GETFD wherever the agent symbolizes, and libuv's
 * global signal lock, one pipe, the library's (its loop made it first), that the host's libuv uses
 * too (host_fds_library_data_call; docs/architecture.md, the fd section).
 *
 * What the host may rely on: close() of a number it does not own fails with EBADF, exactly as
 * bare (where that number was free), and closes nothing; close_range and closefrom close every
 * fd of the host's in the range and none of the library's (their result is libc's);
 * eventfd, epoll_create*, socket and pipe2 called by the host behave as libc's and return the
 * numbers libc gives. dup2/dup3 onto a library fd is the one call that cannot be hidden: the
 * number is the host's to take, so the library stops (agent and server, one line on stderr, the
 * server's fd_taken hook) and the host's dup2 then proceeds on a free number; without the hook
 * the fd is forgotten and the host's call proceeds. The same holds for these calls made through
 * syscall(). fcntl's commands other than F_DUPFD* on a library fd fail with EBADF, as bare; on
 * another number the host's call first waits (the host's bound) while a library fd is in its low
 * moment, so that it does not answer for one held low (a library creation that begins between the
 * look and the call is still met: a few instants, no wait counted in). Not covered: system calls
 * made without libc's functions (inline assembly, the Go runtime) see the library's fds as any
 * other, and syscall(2) is watched for the closes, dups, fcntl, receives and creators above only
 * among the fd calls and the calls on an fd's number above; the other calls on an fd's number
 * (libc's fstat, ioctl, getsockopt, getsockname and getpeername, above; under the sanitizers
 * libc's data calls and the acting calls their runtimes intercept, above; glibc's internal calls,
 * such as posix_fallocate's and the __xmknodat of binaries built for a glibc before 2.33, no
 * interposer sees; open_by_handle_at's mount fd, privileged; the calls of kernels newer than the
 * headers the library was built with whose numbers are not written here, such as getxattrat and
 * its kin with headers before 6.13; io_uring's operations that name an fd's number where uring.c
 * does not see them: its header's "Not covered") reach a library fd as any other: fstat of its
 * number succeeds where bare it fails with EBADF (tests/hosts/fds.c's openpty part tells a library
 * fd held low so). fcntl(F_GETFD) and fstat are the common probes of whether a number is open, and
 * close the common act on one. fcntl(F_DUPFD) onto a high number simply gets the next free one.
 * close_range with CLOSE_RANGE_UNSHARE (libc's or syscall()'s) gives the calling thread an fd
 * table of its own (its threads started after share it), which keeps the library's fds of that
 * moment (closed around, as with flags 0) but not those the library makes after in the process's
 * table; and the fds the library makes on such a thread (the CPU timer's perf fd of a thread it
 * started, which registers itself) are in that table only. Kept so: the library's code that runs
 * on that thread later (the server's and agent's stop at its exit) needs the copies of its fds
 * (with them closed, libuv aborted at exit: status 134), and the thread sees no
 * fd of the library's made since, as bare. The signal handler, which runs on that thread too,
 * touches no fd: its wake of the manager is a futex (agent/internal.h, ag_manager_wake). It was an
 * eventfd's write, to the number the thread's own table held: after a later session started, that
 * could be another file of the library's copied at the unshare, such as a connection's socket,
 * whose gone peer would have raised SIGPIPE in the host. What is left is the library's own
 * bookkeeping across the two tables: the manager, in the process's table, may open the perf fd of
 * such a thread, or a thread may close its own at a number its table holds for another, which
 * can cost samples (not measured), not the host's fds (its numbers in that table are below the
 * library's, which are all the library's there). A library creation's low number is marked in
 * its moment for the table it was made in only (host_fds_low); a host's unshare that met such a
 * number closes the private table's copy of it (host_fds_unshared_low). The private table's copy
 * of a high library fd that the library closes later in the process's table (a churned /proc
 * file, a connection) stays the library's there by the unshare's record of the marks, which holds
 * high numbers only (host_fds_unshared_record; one run of host-contract-fds-unshare-low in listen
 * mode had counted one fd open after the unshare in 3..4095 before that record was merged; the
 * test counts 3..511 and lists the rest on stderr). Measured:
 * host-contract-fds-unshare-threads (20 pairs of threads that register from both tables, also while
 * sessions start and stop) and -unshare-exit (the exit's stop on the unsharing thread while a
 * thread of the process's table burns), with the perf and the timer CPU engine: output and status
 * as bare in every run. The library's high numbers are marked process-wide, and are the
 * library's in such a table only where they hold its file (host_fds_table_elsewhere): the host's
 * dup2 or dup3 there replaces what its own table holds, and the profiler goes on (it stopped, and
 * the host died of SIGPIPE); the exit's stop on that thread puts the wake's eventfd back where the
 * host closed its copy (host_fds_library_here; libuv aborted on its write). Measured:
 * host-contract-fds-unshare-high. A copy whose fd the library closes after the unshare in its
 * table loses its process-wide mark but stays the library's in the unsharing thread's table
 * (host_fds_unshared_record: the marks of the unshare's moment, per thread, 4 slots) until that
 * thread dups over it or closes it (the copy closed there, EBADF as bare); the data calls
 * (HOST_FD_DATA_REFUSED) look at that record too once a thread unshared. unshare(CLONE_FILES)
 * (ns.c's unshare, syscall()'s SYS_unshare) is recorded the same way (host_fds_unshare_files). The
 * host's
 * pidfd_getfd (libc's or syscall()'s) of a library fd in its own process fails with EBADF, as bare,
 * where it got a copy of the library's file (host_fds_getfd_checked: kcmp tells it is the
 * library's; without kcmp, as under a seccomp filter that forbids it, the copy is still given).
 *
 * The moment of a move: the kernel gives every new fd the lowest free number, and no call creates
 * one at a chosen number, so a library fd is low from its creation until host_fd_take() has
 * duplicated it high and closed the low number (two system calls, a few microseconds; the wall
 * thread keeps its /proc files open, so after a session's first passes this happens at thread
 * starts, connections and session starts). The host's closes are kept out of that moment by a
 * gate (host_fds_gate): while the library creates and moves fds the host's close, close_range,
 * closefrom, dup2 and dup3 (libc's or syscall()'s) wait, and while one of those runs the
 * library's creations wait. Without it a daemon's close_range(3, ~0U, 0) at its start met the
 * session's first fds under `record --mode wall` in 13 of 30 runs at a load of 20: the low
 * number closed before it moved, libuv got -1 from eventfd or epoll_create and aborted the host
 * (status 134). Each side waits at most a bound (HOST_FDS_GATE_HOST_NS for the host, whose
 * signal handler may interrupt the library's creation on the same thread; the library's longer,
 * as a host's close of a lingering socket may block), then goes ahead as before the gate. A
 * host's creation not made through an interposer here (below) in that moment gets the next
 * number instead of the low one (the kernel's choice; an fd received by SCM_RIGHTS or taken by
 * pidfd_getfd gets the lowest free number too, and only dup2, dup3 and F_DUPFD choose one, which
 * need the fd in the table already). Ways to be born high were weighed: a private fd table for the
 * library's threads (unshare(CLONE_FILES)) would hide their fds from the host, but the server's
 * loop and sockets are created on the host thread that starts it (the constructor) and used from
 * the loop thread; checking the low number with kcmp(KCMP_FILE) before the close only moves the
 * window to the next system call. The host's own creations through the interposers here (the
 * creators above, syscall()'s, fopen, opendir, tmpfile, blocking.c's accept and accept4, eintr.c's
 * recvmsg and recvmmsg) wait for that moment to end (host_fds_creating, which says why they do not
 * count themselves in, and how one that a library creation met anyway has its fd moved down): a
 * host's open after a close loop got fd 4 where bare gets 3 in two fresh-clone CI runs
 * (host-contract-fds-dup3 in CPU mode, -sysclose's pipe in wall mode, ASan stage). fopen's and
 * tmpfile's fd is moved down through glibc's FILE, opendir's before fdopendir wraps it, F_DUPFD's
 * to the lowest free number from its minimum. The host's freopen keeps the stream's number (bare's)
 * and counts itself in as a close instead: glibc's dup3 of its new file onto that number replaced a
 * library fd held there (a daemon's close(0), then freopen of stdin), and the library's move then
 * closed the host's fd. The library's own creations no interposer sees hold the gate as library
 * creations (host_fds_hold): perf_event_open, the loader's opens in the dlopen of a library loaded
 * on demand (libelf, cJSON, zlib, http-parser), and pthread_getattr_np's read of /proc/self/maps
 * for the main thread (agent/threads.c); a creation the thread makes with it held (an
 * interposed one inside) goes in without waiting (host_fds_gate_depth). glibc's other opens
 * inside the library's calls are avoided: nettrace's writer counted the CPUs with sysconf, which
 * reads /sys/devices/system/cpu/online, on the IPC loop thread at every session start (fd 3,
 * never moved; strace -f of a record showed it as the one such open, not an arena's first
 * malloc); it asks sched_getaffinity now. host-contract-fds-library-opens checks under strace
 * that every open of the library's threads moves high at once (tests/library-opens.py). openpty
 * opens its master and slave in two system calls: when a library fd took the master's number and
 * moved away before the slave's open, the slave is moved above the master before both move down
 * (host_fds_pair_created), so they keep bare's order. sem_open needs nothing: glibc closes the
 * file it opens before it returns, so no number of the host's changes. Still open: the host's
 * creations made without the interposers get bare's number except in a library fd's low moment,
 * which they do not wait for (they get the next number then): the fds NSS modules other than
 * files and dns keep across calls (NIS's binding, sssd's socket: any lookup may open them), the
 * resolver's socket with RES_STAYOPEN when glibc looks up inside another of its calls (rcmd,
 * rexec and their kin call gethostbyname_r and getaddrinfo inside, past the interposers;
 * syslog's, setmntent's, the utmp file's, NSS's enumerations' and the resolver's socket through
 * its calls are interposed above: without that, under host-contract-fds-create's knob, 18 to 239
 * of 384 to 1203 getpwent, getgrent, setmntent, getutent and getutxent calls a kind got the next
 * number, CPU and wall mode, 0 with it; and 7049 of 28165 gethostent, sethostent(1), getnetent,
 * getprotoent, getservent, setservent(1) and getrpcent calls (0 to 593 a kind and run) and 1967 of
 * 10014 res_query, gethostbyname and getaddrinfo calls with RES_STAYOPEN (0 to 484), two CPU and
 * two wall runs at a load average of 12 to 20; with it 2 of 26281 and 0 of 14922 in four of each,
 * 1 of 341 gethostent and 1 of 135 sethostent(1) calls in one wall run at a load average of 19,
 * where the host's wait, bounded at 50 ms, can end before a preempted library thread moves), the
 * fds a read of a fanotify group makes for its events, the fds io_uring's own opens and accepts
 * install (IORING_OP_OPENAT, _ACCEPT, _SOCKET without a fixed file: the kernel installs them, maybe
 * from its own worker), and those a seccomp listener's SECCOMP_IOCTL_NOTIF_ADDFD installs in the
 * process it watches (the host is such a process when a supervisor adds fds to it; without
 * SECCOMP_ADDFD_FLAG_SETFD the kernel takes the lowest free number, as for an open; with it, at a
 * library fd's number, the library's file is replaced as by a dup2 no interposer sees). The host's
 * own ioctl(SECCOMP_IOCTL_NOTIF_ADDFD) as a supervisor needs nothing: its result is the number in
 * the target's table, which the library here does not touch (a target that runs the library is this
 * same case on its side). host-contract-fds-uninterposed makes each of these (io_uring by raw
 * system calls, getpwent, setmntent, getutent, a fanotify event's fd, ADDFD into its own process)
 * once the library's first 1.5 s are past: every number bare's, as the library's fds are above
 * the host's range and none stays low. Fixed for it: the thread scan opened /proc/self/task and
 * each thread's comm every 100 ms (agent/threads.c keeps them open now: the directory and at most
 * AG_NAME_CACHE, 32, comm files by tid, while the agent runs; the directory alone kept open left 9
 * of 98896 off in 12 runs), and 9 of 80603 such creations met one in 12 record runs (0 of 72417
 * after; the case itself passed 4 of 4 runs with those opens: it holds that no library fd stays
 * low, and meets a moment only by chance, which it allows alone, never two creations in a row,
 * and at most one plus one per 25 made: CI runs had 1 of 1408 and 1 of 470 ADDFDs off, one at load
 * 4 to 5 15 of 1088). In a low moment they do not wait: with PIPEPROF_TEST_FD_LOW_MS=2 (a library
 * fd held low 2 ms in 5) 13 to 20 of 926 to 1357 io_uring opens and 7 to 13 of 1060 to 1116 ADDFDs
 * got the next number (getpwent, setmntent and getutent, before their interposers, 175 to 660), CPU
 * and wall mode (fanotify's 0: the host's open that makes the event waits first). Such moments
 * remain at a session's start, a thread's start (its CPU timer, its stat files), a new module's
 * files (the code of getpwent's NSS modules) and the CFI cache's files.  io_uring's and fanotify's
 * fds are made by the kernel. Also open: the host's pidfd_getfd of a library fd of another process
 * that runs the library (its numbers are not known here).
 *
 * Held by: host-contract-fds-fcntl (fcntl, fcntl64 and syscall(SYS_fcntl) with F_GETFD, F_GETFL,
 * F_SETFD, F_SETFL, F_GETLK, F_OFD_GETLK, F_GETOWN and F_GETSIG of 3..4095: before, 15 successes
 * a command under record in CPU mode where bare has 0), host-contract-fds-fdcalls (fstat,
 * fstatat(AT_EMPTY_PATH), lseek, ioctl(FIONREAD), ioctl(TCGETS), fsync, fdatasync, fchmod, fchown,
 * ftruncate, flock, posix_fadvise, getsockopt and getsockname of 3..4095, through libc and
 * syscall(): before, 11 to 14 fewer EBADF a call under record in CPU mode than bare's),
 * host-contract-fds-datacalls (read of 0 bytes and of 1 byte, write, pread, readv and writev of
 * 0 bytes, send and recv of 0 bytes with MSG_DONTWAIT, shutdown with a `how` no socket takes,
 * setsockopt at a level no protocol has, mmap of 0 bytes through syscall(), fstatfs,
 * statx(AT_EMPTY_PATH), fchdir, fgetxattr, __fxstat and __fxstat64 of 3..4095, through libc and
 * syscall(): before, 5 to 8 fewer EBADF a call than bare preloaded, 7 to 13 under record in CPU
 * mode; the positioned and vector calls, splice, sendfile, the mmsg calls, fsetxattr, fstatvfs,
 * fchmodat and fchownat above; and fdprobe's 36 other calls on an fd's number above, before 8
 * fewer EBADF a call preloaded, 14 to 17 under record; and its 14 acting calls above, libc's mmap
 * among the data calls; in a sanitized build libc's intercepted ones are not probed, said on the
 * output), host-contract-fds-acceptloop (a server's accept4 loop while sessions start and stop),
 * host-contract-fds-mmapearly (mmap of a file, an anonymous region, a number not open and an odd
 * offset from a library's constructor that runs before this one's: bare's results through
 * host_fds_mmap_sys; with its result replaced by ENOMEM the case fails),
 * host-contract-eintr (syscall()'s recvmsg and recvmmsg), host-contract-fds-uninterposed and
 * -unshare-* (above), host-contract-fds-* (tests/hosts/fds.c: closing loops through close and
 * syscall(SYS_close), close_range, closefrom, dup2 and dup3 over 3..40 and over 768..800, and
 * syscall()'s close_range (flags 0 and CLOSE_RANGE_UNSHARE), dup2 and dup3 over the same
 * (-sysrange, -sysrange-unshare, -sysdup2, -sysdup2high, -sysdup3, -sysdup3high: without their
 * handling here, each but the two low dups aborted the host, status 134), then a pipe and files
 * of the host's own, bare against preloaded, CPU and wall, record, listen mode and no session:
 * same output, same per-call error counts, exit 0); host-contract-fds-create (each creator in a
 * loop against a library fd held low on demand, PIPEPROF_TEST_FD_LOW_MS: 60 kinds, syslog's
 * socket by openlog(LOG_NDELAY) and by a first message (syslog, vsyslog, __syslog_chk and
 * __vsyslog_chk in turn) on a thread whose /dev is a tmpfs with a /dev/log of the host's (root
 * only, skipped elsewhere), getpwent, getgrent, setmntent, getutent and getutxent (of an empty
 * utmp file of the host's), gethostent, sethostent(1), getnetent, getprotoent, getservent,
 * setservent(1) with getservbyname, getrpcent, and res_query, gethostbyname and getaddrinfo
 * with RES_STAYOPEN against a DNS server of the host's own on loopback (NXDOMAIN to all),
 * freopen of a stream whose fd was closed, recvmsg and recvmmsg of an fd passed by SCM_RIGHTS,
 * syscall()'s openat, openat2, memfd_create, eventfd2, pipe2, fcntl(F_DUPFD_CLOEXEC), recvmsg,
 * recvmmsg, seccomp's listener and landlock_create_ruleset (3 to 15 of 77 to 453 calls a kind got a
 * number bare does not give without their handling, CPU mode), popen, openpty, forkpty, mq_open,
 * fanotify_init and open_by_handle_at (each skipped, on the host's output, where the call fails
 * at once with ENOSYS, EPERM, EOPNOTSUPP, EACCES or EINVAL), and pidfd_getfd, and syscall()'s
 * dup and fcntl(F_DUPFD_CLOEXEC), of 64..1023 of the host's own process, EBADF for each as bare
 * (F_DUPFD_CLOEXEC's 18 and 19 copies of the library's fds without its handling here), among them;
 * openpty's slave opened below its master, 12 of 12 calls under a seccomp notifier that holds the
 * two opens until a library fd took and left the host's number, put back in bare's order:
 * host_fds_pair_created).
 */
#include <aliases.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <link.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <mntent.h>
#include <mqueue.h>
#include <netdb.h>
#include <pthread.h>
#include <pty.h>
#include <pwd.h>
#include <resolv.h>
#include <rpc/netdb.h>
#include <sched.h>
#include <shadow.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>
#include <utmp.h>
#include <utmpx.h>

#include "host/internal.h"

/* <resolv.h> names its printing helpers by macros; p_type is a field of ELF program headers. */
#undef p_type

HOST_ANCHOR(fds);

#define HOST_FDS_WORDS              (HOST_FDS_MAX / 64)
/* <linux/mount.h>'s flags for an empty path: MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH,
 * FSPICK_EMPTY_PATH (open_tree's and mount_setattr's is AT_EMPTY_PATH) */
#define HOST_FDS_MOVE_MOUNT_F_EMPTY 0x04u
#define HOST_FDS_MOVE_MOUNT_T_EMPTY 0x40u
#define HOST_FDS_FSPICK_EMPTY       0x08u
#define HOST_FDS_CODE               4 /* objects whose calls are the library's */
/* open_tree_attr (6.15): 467 on x86_64 and arm64 alike, after the headers (6.1) */
#if defined(SYS_open_tree_attr)
#define HOST_FDS_SYS_OPEN_TREE_ATTR SYS_open_tree_attr
#elif defined(__x86_64__) || defined(__aarch64__)
#define HOST_FDS_SYS_OPEN_TREE_ATTR 467
#endif
/* fchmodat2 (6.6): 452 on every architecture, after glibc 2.36's headers */
#if defined(SYS_fchmodat2)
#define HOST_FDS_SYS_FCHMODAT2 SYS_fchmodat2
#elif defined(__x86_64__) || defined(__aarch64__)
#define HOST_FDS_SYS_FCHMODAT2 452
#endif
/* IORING_SETUP_REGISTERED_FD_ONLY (6.5): io_uring_setup's result is an index, not an fd */
#define HOST_FDS_URING_FD_ONLY (1u << 15)

_Atomic uint64_t host_fds_owned[HOST_FDS_WORDS];
static _Atomic int host_fds_count;

/* The executable ranges of libpipeprof.so and of the objects it trusts: [lo, hi). */
static _Atomic uintptr_t host_fds_code_lo[HOST_FDS_CODE], host_fds_code_hi[HOST_FDS_CODE];
static _Atomic int host_fds_code_n;

/* The executable ranges of the objects whose definition of a data call (HOST_FD_DATA_REFUSED)
 * the dynamic linker finds before this library's: a sanitizer's runtime (preloaded first, or
 * linked into the program), another preloaded wrapper. Their definition calls this one from
 * their own code for the library's calls and the host's alike: [lo, hi). */
#define HOST_FDS_AHEAD 4
static _Atomic uintptr_t host_fds_ahead_lo[HOST_FDS_AHEAD], host_fds_ahead_hi[HOST_FDS_AHEAD];
static _Atomic int host_fds_ahead_n;

static _Thread_local int host_library_thread;

/*
 * A count, on a host thread, of the library's spans there that run the code of the objects it
 * trusts (host_fds_library_span: the shim's start, stop and exit, libuv's fork handler in a
 * child). Outside them that code is the host's: a host may run libuv itself, and where its libuv
 * is the library's object (linked against the system's libuv.so.1, as Debian's nodejs is) or
 * exports the uv_* names the library's references bind to (nodesource's node, whose whole text
 * is then "libuv's"), every fd its own libuv code made was taken as the library's (moved high:
 * Node's fs.openSync gave 788 where bare gives 18).
 */
static _Thread_local int host_library_span;

/*
 * A library thread whose fd table is the one the library's marked numbers are in (the process's):
 * the first to mark itself (the server's loop thread), another when that one is gone. A host
 * thread's close_range(CLOSE_RANGE_UNSHARE) gives it a table of its own that holds the library's
 * fds of that moment and none made since, although those numbers are marked process-wide
 * (host_fds_table_elsewhere).
 */
static _Atomic long host_fds_ref_tid;

/*
 * The ids of the library's live threads (those host_thread_mark_library marked), for the host's
 * listings of this process's task directory, which leave them out ("The fd directory" below): a
 * fixed table, a slot taken at the mark and given back by a thread-specific key's destructor at
 * the thread's exit; a fork's child keeps only its own thread's (host_fds_forked_child). A
 * library thread beyond the table's 64 stays listed.
 */
#define HOST_LIBRARY_TIDS 64
static _Atomic long host_library_tids[HOST_LIBRARY_TIDS];
static _Atomic int host_library_tids_n; /* slots ever used: a listing looks at these */
static pthread_key_t host_library_tid_key;
static pthread_once_t host_library_tid_once = PTHREAD_ONCE_INIT;
static int host_library_tid_key_ok;

/*
 * The library's threads that gave their slot back (host_library_tid_forget, a thread-specific
 * key's destructor, runs before the thread's exit is through): the kernel lists such a thread in
 * /proc/self/task until then. A fork()ed child's start thread exits as soon as its agent runs,
 * and Perl's child under record listed 2 tasks in 1 real-hosts run of 6 (5 tests at once). Its
 * id stays the library's for HOST_LIBRARY_GONE_NS of CLOCK_MONOTONIC after: the kernel gives
 * ids in turn, not the same one again that soon. A small ring: an entry is looked at (and the
 * clock read) only for a name that is its id.
 */
#define HOST_LIBRARY_GONE    16
#define HOST_LIBRARY_GONE_NS 1000000000ull
static struct {
    _Atomic long tid;
    _Atomic uint64_t ns;
} host_library_gone[HOST_LIBRARY_GONE];
static _Atomic unsigned host_library_gone_next;

static void host_fds_ref_hand_over(long tid);

static void
host_library_tid_forget(void *p)
{
    long tid = (long)(intptr_t)p;
    unsigned at = atomic_fetch_add(&host_library_gone_next, 1) % HOST_LIBRARY_GONE;
    int i;

    host_fds_ref_hand_over(tid);

    atomic_store(&host_library_gone[at].tid, 0);
    atomic_store(&host_library_gone[at].ns, host_now_ns());
    atomic_store(&host_library_gone[at].tid, tid);
    for (i = 0; i < HOST_LIBRARY_TIDS; i++) {
        long cur = tid;

        if (atomic_compare_exchange_strong(&host_library_tids[i], &cur, 0)) {
            return;
        }
    }
}

static void
host_library_tid_key_init(void)
{
    host_library_tid_key_ok =
            pthread_key_create(&host_library_tid_key, host_library_tid_forget) == 0;
}

static void
host_library_tid_add(long tid)
{
    int i;

    pthread_once(&host_library_tid_once, host_library_tid_key_init);
    if (!host_library_tid_key_ok) {
        return; /* it could not be given back at its exit: listed, as before */
    }
    for (i = 0; i < HOST_LIBRARY_TIDS; i++) {
        long none = 0;
        int n = atomic_load(&host_library_tids_n);

        if (atomic_compare_exchange_strong(&host_library_tids[i], &none, tid)) {
            while (n <= i && !atomic_compare_exchange_weak(&host_library_tids_n, &n, i + 1)) {
            }
            (void)pthread_setspecific(host_library_tid_key, (void *)(intptr_t)tid);
            return;
        }
    }
}

/* 1 when tid is one of the library's live threads. */
static int
host_library_tid_is(long tid)
{
    int i, n = atomic_load_explicit(&host_library_tids_n, memory_order_acquire);

    for (i = 0; i < n; i++) {
        if (atomic_load_explicit(&host_library_tids[i], memory_order_relaxed) == tid) {
            return 1;
        }
    }
    for (i = 0; i < HOST_LIBRARY_GONE; i++) {
        if (atomic_load_explicit(&host_library_gone[i].tid, memory_order_acquire) == tid &&
            host_now_ns() - atomic_load(&host_library_gone[i].ns) < HOST_LIBRARY_GONE_NS) {
            return 1; /* exiting: still listed by the kernel (above) */
        }
    }
    return 0;
}

/*
 * The reference thread exits (its key's destructor, above): another live library thread of the
 * list becomes the reference, or none (0: the next thread marked). A fork()ed child's first
 * marked thread is its start thread, which exits once its agent and server run: the reference
 * stayed its id, gone, for the child's life, and a host thread's private table went unseen
 * there (host_fds_table_private answers 0 for a reference that is gone).
 */
static void
host_fds_ref_hand_over(long tid)
{
    long ref = tid, next = 0;
    int i, n = atomic_load_explicit(&host_library_tids_n, memory_order_acquire);

    for (i = 0; i < n && next == 0; i++) {
        next = atomic_load_explicit(&host_library_tids[i], memory_order_relaxed);
        next = next == tid ? 0 : next;
    }
    atomic_compare_exchange_strong_explicit(&host_fds_ref_tid, &ref, next, memory_order_acq_rel,
                                            memory_order_acquire);
}

/* host_thread_list_library() listed the calling thread's id (host_library_tid_add) */
static _Thread_local int host_library_listed;

void
host_thread_list_library(void)
{
    if (!host_library_thread && !host_library_listed) {
        host_library_tid_add(host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0));
        host_library_listed = 1;
    }
}

void
host_thread_mark_library(void)
{
    long ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire);
    long self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);

    if (!host_library_thread && !host_library_listed) {
        host_library_tid_add(self);
    }
    host_library_thread = 1;
    host_thread_library_add(self);
    if (ref == 0 || host_raw_syscall(SYS_tgkill, host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0),
                                     ref, 0, 0, 0, 0) < 0) {
        atomic_compare_exchange_strong_explicit(&host_fds_ref_tid, &ref, self, memory_order_acq_rel,
                                                memory_order_acquire);
    }
}

/* kcmp(2) of the library's (raw), left out under an inherited filter (host.c): -1, as a filter
 * that refuses it (errno untouched: every caller keeps the host's). */
static long
host_fds_kcmp(long a, long b, long type, long c, long d, long e)
{
    return host_filter_refuses(SYS_kcmp) ? -1 : host_raw_syscall(SYS_kcmp, a, b, type, c, d, e);
}

/* 1 when the caller (a host thread) has an fd table of its own, not the library's (above). */
static int
host_fds_table_private(void)
{
    long ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire);
    long self, rc;
    int err;

    if (ref <= 0 || host_library_thread) {
        return 0;
    }
    err = errno;
    self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
    /* a reference of this process (not of a fork()ed or vfork()ed child's parent) */
    rc = self == ref ? 0
         : host_raw_syscall(SYS_tgkill, host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0), ref, 0, 0,
                            0, 0) != 0
                 ? 0
                 : host_fds_kcmp(ref, self, KCMP_FILES, 0, 0, 0);
    errno = err;
    return rc > 0;
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9: a pidfd of a thread, not of its process */
#endif

/*
 * A host thread with an fd table of its own (its close_range(CLOSE_RANGE_UNSHARE)) that runs the
 * library's stop (its exit's, its _exit's) wakes the server's loop by a write to the loop's
 * eventfd by number, in its own table: the copy its unshare kept. Where the host dup2()ed over
 * that copy and closed it, libuv aborted on the write's EBADF (status 134, host-contract-fds-
 * unshare-high); where it keeps its own file there, the write would be 8 bytes into the host's
 * file. So: where the caller's number holds no file the copy is put back from the reference
 * thread's table (pidfd_open(PIDFD_THREAD), pidfd_getfd, dup3: raw calls, each fd gone before the
 * return but the copy, close-on-exec); where it holds the host's file, -EBADF and the caller
 * does not wake.
 */
int
host_fds_library_here(int fd)
{
    long ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire), self, rc;
    long pidfd, copy;
    int err = errno;

    if (!host_fds_table_private()) {
        return 0;
    }
    self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
    rc = host_fds_kcmp(ref, self, KCMP_FILE, fd, fd, 0);
    if (rc == 0) {
        goto out; /* the copy is there */
    }
    if (host_raw_syscall(SYS_fcntl, fd, F_GETFD, 0, 0, 0, 0) >= 0) {
        /* Two files compared and found different: the host's own here. kcmp's error instead
         * (EBADF: the reference has no file at fd) is a reference that exits, whose table is
         * gone while tgkill still finds it (host_fds_table_private took that NULL table for
         * another): the caller's table is the library's, as for a reference already gone. Before,
         * a fork()ed child's exit() as its start thread (the reference) exited said "did not stop
         * within 10000 ms" at once and left its session without its end (bash under record). */
        rc = rc > 0 ? -EBADF : 0;
        goto out;
    }
    if (host_filter_refuses(SYS_pidfd_open)) {
        rc = -EPERM; /* as a filter that refuses it */
        goto out;
    }
    pidfd = host_raw_syscall(SYS_pidfd_open, ref, PIDFD_THREAD, 0, 0, 0, 0);
    if (pidfd < 0) {
        rc = -errno;
        goto out;
    }
    copy = host_raw_syscall(SYS_pidfd_getfd, pidfd, fd, 0, 0, 0, 0);
    host_raw_syscall(SYS_close, pidfd, 0, 0, 0, 0, 0);
    if (copy < 0) {
        rc = -errno;
        goto out;
    }
    rc = host_raw_syscall(SYS_dup3, copy, fd, O_CLOEXEC, 0, 0, 0) < 0 ? -errno : 0;
    host_raw_syscall(SYS_close, copy, 0, 0, 0, 0, 0);
out:
    errno = err;
    return (int)rc;
}

/*
 * 1 when the caller (a host thread) has an fd table other than the library's reference thread's
 * and its fd at this marked number is not the library's file there (a number the library took
 * after the caller's unshare, free in the caller's table or holding the host's own fd): the
 * number is not the library's in the caller's table. Two kcmp calls at most, made only for a
 * marked number off the library's threads; where kcmp cannot answer (ENOSYS, a seccomp filter's
 * EPERM, the reference gone) the number counts as the library's, as before.
 * host-contract-fds-unshare-high.
 */
static int
host_fds_table_elsewhere(int fd)
{
    long ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire);
    long rc;
    int err;

    if (!host_fds_table_private()) {
        return 0;
    }
    err = errno;
    /* 0: the caller's copy of the library's file (kept at the unshare): the library's */
    rc = host_fds_kcmp(ref, host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0), KCMP_FILE, fd, fd, 0);
    errno = err;
    return rc != 0;
}

/*
 * A library fd's low moment, with the thread whose creation it is: its number is marked from the
 * creation's return until the move's close (host_fd_take), and that mark is true of the fd table
 * the creation was made in only. A host thread's close_range(CLOSE_RANGE_UNSHARE) gives it a
 * table of its own (fds.c's header) whose low numbers are the host's: the pipe that
 * host-contract-fds-unshare-threads opens at 3 and 4 after its unshare. The manager's open of a
 * /proc file at 3 in the process's table marked 3, and the host's read of its pipe at 3 in its own
 * table was refused with EBADF (the host then waited on a full pipe for good, 1 run in 3 with
 * PIPEPROF_TEST_FD_LOW_MS=2; a write refused so cut the pipe's data at 40960 bytes of 4 MiB in a
 * fresh-clone CI run under `pipeprof collect -p`). So the slot keeps the creating thread's id, and
 * a host call on a number marked so asks the kernel whether the caller's fd table is the
 * creator's (kcmp KCMP_FILES, one system call, made only for a number in its low moment): where
 * it is not, the number is not the library's there. Where kcmp cannot answer (ENOSYS, a seccomp
 * filter's EPERM, the creator gone) the number counts as the library's, as before. Slots are set
 * and cleared under host_fds_mark_lock; read lock-free, a signal handler's too. A creation that
 * finds no free slot (more than HOST_FDS_LOW_SLOTS library threads in the moment at once) is
 * marked in every table, as before.
 */
#define HOST_FDS_LOW_SLOTS 8
static struct {
    _Atomic int fd1; /* the fd + 1; 0 when the slot is free */
    _Atomic long tid;
} host_fds_low[HOST_FDS_LOW_SLOTS];
static _Atomic int host_fds_low_n; /* slots in use */

int
host_fds_low_elsewhere(int fd)
{
    long tid = 0, self, rc;
    int i, err;

    if (atomic_load_explicit(&host_fds_low_n, memory_order_acquire) == 0) {
        return 0;
    }
    for (i = 0; i < HOST_FDS_LOW_SLOTS; i++) {
        if (atomic_load_explicit(&host_fds_low[i].fd1, memory_order_acquire) == fd + 1) {
            tid = atomic_load_explicit(&host_fds_low[i].tid, memory_order_relaxed);
            break;
        }
    }
    if (tid <= 0) {
        return 0;
    }
    err = errno;
    self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
    rc = self == tid ? 0 : host_fds_kcmp(tid, self, KCMP_FILES, 0, 0, 0);
    errno = err;
    return rc > 0; /* 1 or 2: two tables; 0 the same; -1 cannot tell */
}

/*
 * The library's numbers marked when a host thread unshared its fd table (close_range with
 * CLOSE_RANGE_UNSHARE, libc's or syscall()'s): its table holds copies of those fds, which stay the
 * library's there after the library closes its own (the mark cleared) until the thread itself
 * closes them or dups over them. A small fixed table (no malloc; the unshare is not reachable from
 * a signal handler); a slot whose thread is gone or shares the library's table (its id reused)
 * is taken again. host_fds_unshared_n is 0 until a first unshare, and a thread that did not
 * unshare looks at its own thread-local flag only: the cost of the common case.
 * host-contract-fds-unshare-high.
 */
#define HOST_FDS_UNSHARED_SLOTS 4

static struct {
    _Atomic long tid;
    _Atomic uint64_t bits[HOST_FDS_WORDS];
} host_fds_unshared[HOST_FDS_UNSHARED_SLOTS];
_Atomic int host_fds_unshared_n; /* internal.h: host_fd_data_refused_by */

/* 1 once the caller recorded an unshare (or a vfork()ed child did, on its parent's stack and
 * thread-local memory); 0, the common case: a thread that never unshared looks at no slot, so
 * that after a first unshare anywhere its fd calls do not pay a gettid each (fdcost: fcntl(F_GETFD)
 * of a host fd from another thread 1.9x libc's). A fork's child inherits it with its thread,
 * whose id is not the slot's. */
static _Thread_local int host_fds_unshared_here;

/* The caller's slot as last found (its thread id and the reference thread's then): while the
 * slot still holds that id and the reference is the same, the slot is the caller's and its table
 * private (a thread's table, once its own, stays so) without the four system calls of the look
 * (fdcost: fcntl(F_GETFD) of a host fd from the unsharing thread 7 to 30x libc's). A fork's child
 * forgets it (host_fds_forked_child); a vfork()ed child shares it, and its table is a copy of the
 * private one, with the same copies. */
static _Thread_local struct {
    long tid, ref;
    int slot;
} host_fds_unshared_seen;

/* The caller's slot (-1: none); a slot of a table no longer private is freed. */
static int
host_fds_unshared_slot(void)
{
    long self, ref;
    int i;

    /* the count first: no thread-local access before a first unshare */
    if (atomic_load_explicit(&host_fds_unshared_n, memory_order_acquire) == 0 ||
        !host_fds_unshared_here || host_library_thread) {
        return -1;
    }
    ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire);
    i = host_fds_unshared_seen.slot;
    if (host_fds_unshared_seen.tid > 0 && host_fds_unshared_seen.ref == ref &&
        atomic_load_explicit(&host_fds_unshared[i].tid, memory_order_acquire) ==
                host_fds_unshared_seen.tid) {
        return i;
    }
    self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
    for (i = 0; i < HOST_FDS_UNSHARED_SLOTS; i++) {
        if (atomic_load_explicit(&host_fds_unshared[i].tid, memory_order_acquire) == self) {
            if (host_fds_table_private()) {
                host_fds_unshared_seen.tid = self;
                host_fds_unshared_seen.ref = ref;
                host_fds_unshared_seen.slot = i;
                return i;
            }
            atomic_store_explicit(&host_fds_unshared[i].tid, 0, memory_order_release);
            return -1;
        }
    }
    return -1;
}

/* 1 when the live thread tid shares the library's reference thread's fd table: a thread id an
 * unsharing thread had, reused by a thread that never unshared (it never looks at the slot). */
static int
host_fds_tid_shares_table(long tid)
{
    long ref = atomic_load_explicit(&host_fds_ref_tid, memory_order_acquire);
    int err = errno;
    long rc;

    if (ref <= 0 || tid <= 0) {
        return 0;
    }
    rc = ref == tid ? 0 : host_fds_kcmp(ref, tid, KCMP_FILES, 0, 0, 0);
    errno = err;
    return rc == 0;
}

/* Records the caller's unshare: before, the marks just before it; the marks after it are added
 * (a number marked in between is free in the caller's table, and a probe's EBADF there is bare's).
 */
static int host_fds_base(void);

static void
host_fds_unshared_record(const uint64_t *before)
{
    long self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
    unsigned base = (unsigned)host_fds_base();
    int i, slot = -1;

    for (i = 0; i < HOST_FDS_UNSHARED_SLOTS && slot < 0; i++) {
        long tid = atomic_load_explicit(&host_fds_unshared[i].tid, memory_order_acquire);

        if (tid == self) {
            slot = i;
        } else if (tid != 0 &&
                   (host_raw_syscall(SYS_tgkill, host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0),
                                     tid, 0, 0, 0, 0) < 0 ||
                    host_fds_tid_shares_table(tid))) {
            atomic_compare_exchange_strong_explicit(&host_fds_unshared[i].tid, &tid, 0,
                                                    memory_order_acq_rel, memory_order_acquire);
        }
    }
    for (i = 0; i < HOST_FDS_UNSHARED_SLOTS && slot < 0; i++) {
        long zero = 0;

        if (atomic_compare_exchange_strong_explicit(&host_fds_unshared[i].tid, &zero, -1,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            slot = i;
        }
    }
    if (slot < 0) {
        return; /* no slot: the copies lose their marks with the library's closes, as before */
    }
    for (i = 0; i < HOST_FDS_WORDS; i++) {
        /* High numbers only: a low one the unshare kept is a library fd's low moment, its copy
         * closed there (host_fds_unshared_low) unless the library's number stays low. */
        unsigned first = (unsigned)i * 64;
        uint64_t high = first >= base        ? ~(uint64_t)0
                        : first + 64 <= base ? 0
                                             : ~(uint64_t)0 << (base - first);

        atomic_store_explicit(
                &host_fds_unshared[slot].bits[i],
                (before[i] | atomic_load_explicit(&host_fds_owned[i], memory_order_acquire)) & high,
                memory_order_relaxed);
    }
    atomic_store_explicit(&host_fds_unshared[slot].tid, self, memory_order_release);
    host_fds_unshared_here = 1;
    atomic_fetch_add_explicit(&host_fds_unshared_n, 1, memory_order_acq_rel);
}

/* 1 when fd is a copy the caller's unshare kept of a library fd (above). */
static int
host_fds_unshared_has(int fd)
{
    int slot = host_fds_unshared_slot();

    return slot >= 0 &&
           ((atomic_load_explicit(&host_fds_unshared[slot].bits[fd / 64], memory_order_relaxed) >>
             (unsigned)(fd % 64)) &
            1u);
}

/* The caller (a host thread) replaces or closes fd in its table: no longer the library's copy
 * there. Returns 1 when it was one. */
static int
host_fds_unshared_drop(int fd)
{
    int slot;

    if (fd < 0 || fd >= HOST_FDS_MAX || (slot = host_fds_unshared_slot()) < 0) {
        return 0;
    }
    return (atomic_fetch_and_explicit(&host_fds_unshared[slot].bits[fd / 64],
                                      ~((uint64_t)1 << (unsigned)(fd % 64)),
                                      memory_order_relaxed) >>
            (unsigned)(fd % 64)) &
           1u;
}

static int
host_fd_is_owned(int fd)
{
    if (fd < 0 || fd >= HOST_FDS_MAX) {
        return 0;
    }
    if (((atomic_load_explicit(&host_fds_owned[fd / 64], memory_order_acquire) >>
          (unsigned)(fd % 64)) &
         1u) &&
        !host_fds_low_elsewhere(fd) && !host_fds_table_elsewhere(fd)) {
        return 1;
    }
    return atomic_load_explicit(&host_fds_unshared_n, memory_order_relaxed) != 0 &&
           host_fds_unshared_has(fd);
}

/*
 * The library's fds a fork()ed child inherited from its parent (host_fds_forked_child, its first
 * fork handler), until its last handler closes them (host_fds_inherited_close): the parent's
 * server's epoll fd, eventfd, signal pipes, listening socket and spare /dev/null, its sessions'
 * connections, an output file. The child has no thread of the parent's server and never uses
 * them; bare it has none of them. Before, the child forgot their marks and kept them open: a
 * preloaded process's fork()ed child listed 768 and 771..775 in /proc/self/fd where bare lists
 * none (Python's multiprocessing workers, a shell's subshells and command substitutions), under
 * record up to 10 more, for the child's whole life. A number the library closes or makes anew
 * in between (libuv's child handler closes its signal lock pipe and makes another, which may
 * take the same number) leaves the set (host_fd_mark). host_fds_inherited_n is 0 but in that
 * span: the cost of host_fd_mark's common case is one relaxed load.
 */
static _Atomic uint64_t host_fds_inherited[HOST_FDS_WORDS];
static _Atomic int host_fds_inherited_n;

static void
host_fd_mark(int fd, int owned)
{
    uint64_t bit = (uint64_t)1 << (unsigned)(fd % 64);

    if (atomic_load_explicit(&host_fds_inherited_n, memory_order_relaxed) != 0) {
        atomic_fetch_and_explicit(&host_fds_inherited[fd / 64], ~bit, memory_order_relaxed);
    }
    if (owned) {
        /* counted once: a creation the interposers moved high may be taken again by its caller
         * (agent/cfi-cache.c's mkstemp) */
        if (!(atomic_fetch_or_explicit(&host_fds_owned[fd / 64], bit, memory_order_acq_rel) &
              bit)) {
            atomic_fetch_add_explicit(&host_fds_count, 1, memory_order_relaxed);
        }
    } else if (atomic_fetch_and_explicit(&host_fds_owned[fd / 64], ~bit, memory_order_acq_rel) &
               bit) {
        atomic_fetch_sub_explicit(&host_fds_count, 1, memory_order_relaxed);
    }
}

struct host_fds_find {
    uintptr_t addr, lo, hi;
};

static int
host_fds_find_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct host_fds_find *f = arg;
    int i;

    (void)size;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->addr >= lo &&
            f->addr < lo + ph->p_memsz) {
            f->lo = lo;
            f->hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static void host_fds_trust_one(const void *code);

static int
host_fds_in(const _Atomic uintptr_t *lo, const _Atomic uintptr_t *hi, int n, uintptr_t addr)
{
    int i;

    for (i = 0; i < n; i++) {
        if (addr >= atomic_load_explicit(&lo[i], memory_order_relaxed) &&
            addr < atomic_load_explicit(&hi[i], memory_order_relaxed)) {
            return 1;
        }
    }
    return 0;
}

/* Adds the executable segment that holds addr to the n ranges [lo, hi) of at most max, unless one
 * of them holds it already (one thread at a time: the library's starts). */
static void
host_fds_range_add(_Atomic uintptr_t *lo, _Atomic uintptr_t *hi, _Atomic int *n, int max,
                   uintptr_t addr)
{
    struct host_fds_find f = { addr, 0, 0 };
    int i = atomic_load_explicit(n, memory_order_acquire);

    if (addr == 0 || i == max || host_fds_in(lo, hi, i, addr) ||
        host_loader_iterate(host_fds_find_segment, &f) == 0) {
        return;
    }
    atomic_store_explicit(&lo[i], f.lo, memory_order_relaxed);
    atomic_store_explicit(&hi[i], f.hi, memory_order_relaxed);
    atomic_store_explicit(n, i + 1, memory_order_release);
}

/* Finds the objects ahead of this library for the data calls (host_fds_ahead_lo): the object of
 * each name's first definition, when it is not this library's. */
static void
host_fds_ahead_find(void)
{
    static const char *const names[] = {
        "read", "write", "readv", "writev", "pread", "pread64", "recv", "recvfrom", "recvmsg",
        "send", "sendto", "sendmsg", "fstatfs", "fstatfs64", "fgetxattr", "__fxstat", "__fxstat64",
        "pwrite", "pwrite64", "preadv", "preadv64", "pwritev", "pwritev64", "preadv2", "preadv64v2",
        "pwritev2", "pwritev64v2", "splice", "sendfile", "sendfile64", "recvmmsg", "sendmmsg",
        "fsetxattr", "fstatvfs", "fstatvfs64",
        /* the other calls on an fd's number (HOST_FDS_DATA_AT) */
        "tee", "vmsplice", "copy_file_range", "fremovexattr", "flistxattr", "futimens", "futimes",
        "fexecve", "getdents64", "inotify_add_watch", "inotify_rm_watch", "epoll_ctl",
        "timerfd_gettime", "sync_file_range", "fallocate", "fallocate64", "syncfs", "lockf",
        "lockf64", "fanotify_mark", "mkdirat", "unlinkat", "renameat", "renameat2", "linkat",
        "symlinkat", "readlinkat", "faccessat", "mknodat", "mkfifoat", "utimensat", "futimesat",
        "name_to_handle_at", "execveat", "openat", "openat64", "__openat_2", "__openat64_2", "bind",
        "connect",
        /* the calls that act on what a number holds */
        "listen", "accept", "accept4", "epoll_wait", "epoll_pwait", "epoll_pwait2", "signalfd",
        "timerfd_settime", "mmap", "mmap64", "move_mount", "mount_setattr", "fsconfig", "open_tree",
        "open_tree_attr", "fspick", "fsmount"
    };
    size_t k;

    for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        uintptr_t addr = (uintptr_t)dlsym(RTLD_DEFAULT, names[k]);

        if (!host_fds_in(host_fds_code_lo, host_fds_code_hi, 1, addr)) {
            host_fds_range_add(host_fds_ahead_lo, host_fds_ahead_hi, &host_fds_ahead_n,
                               HOST_FDS_AHEAD, addr);
        }
    }
}

/* libpipeprof.so itself (or the program host/ is linked into) comes first; then the objects ahead
 * of it for the data calls. */
static void
host_fds_trust_self(void)
{
    if (atomic_load_explicit(&host_fds_code_n, memory_order_acquire) == 0) {
        host_fds_trust_one((const void *)host_fds_trust_self);
        host_fds_ahead_find();
    }
}

void
host_fds_trust(const void *code)
{
    host_fds_trust_self();
    host_fds_trust_one(code);
}

static void
host_fds_trust_one(const void *code)
{
    host_fds_range_add(host_fds_code_lo, host_fds_code_hi, &host_fds_code_n, HOST_FDS_CODE,
                       (uintptr_t)code);
}

void
host_fds_library_span(int on)
{
    host_library_span += on ? 1 : host_library_span > 0 ? -1 : 0;
}

/* ra: the interposer's return address. The library's when it comes from one of its threads, from
 * its own code (range 0), or from the code of an object it trusts inside one of its spans on this
 * thread (host_library_span). */
static int
host_fds_library_call(const void *ra)
{
    int n = atomic_load_explicit(&host_fds_code_n, memory_order_acquire);

    if (host_library_thread) {
        return 1;
    }
    return n > 0 &&
           (host_fds_in(host_fds_code_lo, host_fds_code_hi, 1, (uintptr_t)ra) ||
            (host_library_span > 0 &&
             host_fds_in(host_fds_code_lo + 1, host_fds_code_hi + 1, n - 1, (uintptr_t)ra)));
}

/* A data call's caller: the library's as above, or the code of a trusted object anywhere. libuv's
 * global signal lock is a pipe that the first loop makes, the library's loop where the host's
 * libuv is the library's; the host's uv_signal_start and libuv's signal handler read and write it
 * on the host's threads (refused, libuv aborted). */
static int
host_fds_library_data_call(const void *ra)
{
    int n = atomic_load_explicit(&host_fds_code_n, memory_order_acquire);

    return host_library_thread || host_fds_in(host_fds_code_lo, host_fds_code_hi, n, (uintptr_t)ra);
}

int
host_fds_sealed_call(int fd, const void *ra)
{
    int n;

    if (__builtin_expect(!atomic_load_explicit(&host_seccomp_sealed, memory_order_relaxed), 1)) {
        return 0;
    }
    n = atomic_load_explicit(&host_fds_ahead_n, memory_order_acquire);
    /* the bit alone: host_fd_is_owned() may ask the kernel (tgkill, kcmp), which the filter
     * refuses */
    return host_fds_library_call(ra) ||
           host_fds_in(host_fds_ahead_lo, host_fds_ahead_hi, n, (uintptr_t)ra) ||
           ((fd == HOST_FD_NEVER || host_fd_is_library(fd)) && host_fds_library_data_call(ra));
}

int
host_fds_is_library_call(const void *ra)
{
    return host_fds_library_call(ra);
}

int
host_fds_is_ahead_call(const void *ra)
{
    int n = atomic_load_explicit(&host_fds_ahead_n, memory_order_acquire);

    return n > 0 && host_fds_in(host_fds_ahead_lo, host_fds_ahead_hi, n, (uintptr_t)ra);
}

static int host_fds_data_waited(void);

/* HOST_FD_DATA_REFUSED's slow half, for a library fd: the host's call fails with EBADF. The
 * library's passes (its thread, its code), and so does one that came through a definition ahead
 * of this library's (ra in host_fds_ahead_lo): that object's code calls this for the library's
 * calls as for the host's (under ASan and TSan, libuv's write to its async eventfd in the host's
 * thread at exit reaches here from the runtime's interceptor), and whose it is cannot be told.
 * The host's call on an unmarked number while a library creation is between its system call and
 * its mark (host_fds_creating_n) first waits for it, then looks at the mark again. */
int
host_fds_data_refused(int fd, const void *ra)
{
    int n = atomic_load_explicit(&host_fds_ahead_n, memory_order_acquire);

    if (host_fds_library_data_call(ra) ||
        host_fds_in(host_fds_ahead_lo, host_fds_ahead_hi, n, (uintptr_t)ra)) {
        return 0;
    }
    if (!host_fd_is_owned(fd) && !(host_fds_data_waited() && host_fd_is_owned(fd))) {
        return 0;
    }
    errno = EBADF;
    return 1;
}

/*
 * Where the library's fds go. Where the hard limit allows (the soft RLIMIT_NOFILE below the hard
 * one, the common 1024:524288, and at most HOST_FDS_ABOVE_SOFT_MAX), at or above the host's soft
 * limit: the move raises the soft limit for its dup alone (host_fds_move_high), and the host keeps
 * every number below its limit, as bare (before, a host that opened up to a soft limit of 64 got
 * EMFILE 8 fds early preloaded, 14 under record: the library's fds took its numbers). Fds above
 * the soft limit stay valid after the restore: the kernel checks the limit at allocation only.
 * Otherwise (soft == hard, docker's 1048576:1048576; a raise refused once; a larger soft limit)
 * a quarter below RLIMIT_NOFILE, and never above HOST_FDS_TOP: the host then loses the library's
 * numbers at the top of its range. Both bounds are the fd table's: the kernel sizes a process's
 * table to its highest number (a power of two), and copies it at every fork and frees it at every
 * exit; at 15000 (a 20000 limit) 200 short children of a shell took 4.6 s instead of 2.3.
 */
#define HOST_FDS_TOP            1024
#define HOST_FDS_ABOVE_SOFT_MAX 4096u /* soft limits above which the library's fds go */
#define HOST_FDS_ABOVE          4096u /* a move's raise: how far above the soft limit */

/*
 * RLIMIT_NOFILE while a move raises it (host_fds_move_high, under host_fds_nofile_lock): seq is
 * odd from just before the raise to just after the restore, and soft holds the host's soft limit
 * across it. refused: a raise failed (a seccomp filter, a security module), today's placement from
 * then on.
 */
static _Atomic unsigned host_fds_nofile_seq;
static _Atomic unsigned long host_fds_nofile_soft;
static _Atomic int host_fds_nofile_refused;
static atomic_flag host_fds_nofile_lock = ATOMIC_FLAG_INIT;
/* Set by host_fds_init: before it the host's get and set of the limit skip the gate
 * (host_fds_prlimit), as a sanitizer's runtime makes them before its own initialisation ends. */
static _Atomic int host_fds_rlimit_ready;
/* Tests only: PIPEPROF_TEST_NOFILE_RAISE_MS=N (1..999, read by host_fds_init) holds each raise N
 * ms, so that a host's read or set of the limit meets one on demand: host-contract-fds-nofile-raise
 * (without host_fds_rlimit's gate and check, its reads answered the raised limit). */
static _Atomic unsigned host_fds_test_raise_ms;
static void host_fds_test_sleep_ms(unsigned ms);

/* prlimit64 of this process's RLIMIT_NOFILE: the system call, no interposer's, no libc's. */
static int
host_fds_nofile_raw(const struct rlimit *set, struct rlimit *old)
{
    return host_raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)set, (long)old, 0, 0) == 0 ? 0
                                                                                              : -1;
}

/* prlimit64 of this process's RLIMIT_NOFILE whose old soft limit is the host's: a read that
 * overlapped a move's raise answers the soft limit from before it. */
static int
host_fds_nofile_call(const struct rlimit *set, struct rlimit *old)
{
    unsigned seq = atomic_load(&host_fds_nofile_seq);

    if (host_fds_nofile_raw(set, old) != 0) {
        return -1;
    }
    if (old != NULL && ((seq & 1u) != 0 || atomic_load(&host_fds_nofile_seq) != seq)) {
        old->rlim_cur = (rlim_t)atomic_load(&host_fds_nofile_soft);
    }
    return 0;
}

/* Whether the library's fds go above the soft limit of rl (above). */
static int
host_fds_above(const struct rlimit *rl)
{
    return !atomic_load_explicit(&host_fds_nofile_refused, memory_order_relaxed) &&
           rl->rlim_cur < rl->rlim_max && rl->rlim_cur <= HOST_FDS_ABOVE_SOFT_MAX;
}

/* Today's placement under rl (NULL: not known): a quarter below the soft limit, at most 768. */
static int
host_fds_below(const struct rlimit *rl)
{
    rlim_t top = HOST_FDS_TOP;

    if (rl != NULL && rl->rlim_cur < top) {
        top = rl->rlim_cur;
    }
    return top < 64 ? -1 : (int)(top - top / 4);
}

static int
host_fds_base(void)
{
    struct rlimit rl;

    if (host_fds_nofile_call(NULL, &rl) != 0) {
        return host_fds_below(NULL);
    }
    return host_fds_above(&rl) ? (int)rl.rlim_cur : host_fds_below(&rl);
}

/* A spin lock of fds.c's (the nofile lock here, the mark lock below): library threads only. */
static void
host_fds_spin_take(atomic_flag *lock)
{
    while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire)) {
        sched_yield();
    }
}

static void
host_fds_spin_drop(atomic_flag *lock)
{
    atomic_flag_clear_explicit(lock, memory_order_release);
}

static void
host_fds_nofile_lock_take(void)
{
    host_fds_spin_take(&host_fds_nofile_lock);
}

static void
host_fds_nofile_lock_drop(void)
{
    host_fds_spin_drop(&host_fds_nofile_lock);
}

/* fork() child: a fork of another thread inside a move's raise gave the child the raised soft
 * limit, which its exec'd programs would inherit: the host's is put back. The lock's holder is
 * not in the child. */
static void
host_fds_nofile_forked_child(void)
{
    struct rlimit rl;

    if ((atomic_load(&host_fds_nofile_seq) & 1u) != 0 && host_fds_nofile_raw(NULL, &rl) == 0) {
        rl.rlim_cur = (rlim_t)atomic_load(&host_fds_nofile_soft);
        (void)host_fds_nofile_raw(&rl, NULL);
        atomic_fetch_add(&host_fds_nofile_seq, 1);
    }
    host_fds_nofile_lock_drop();
}

static int host_fds_fcntl(int fd, int cmd, long arg);

/*
 * The move's dup of a library fd (host_fd_take, in its creation's low moment, inside the gate):
 * F_DUPFD_CLOEXEC to the host's soft limit or above, with the soft limit raised for that one
 * system call and restored at once, or to today's placement (host_fds_base). Several library
 * threads move at once: the lock keeps one raise at a time. The host's creations wait while a
 * library creation is in the gate (host_fds_creating), so they do not meet the raised limit, and
 * the host's get and set of RLIMIT_NOFILE count themselves in as closes do (host_fds_rlimit);
 * the restore leaves a limit it did not set (a host's set made past the gate's bound).
 */
static int
host_fds_move_high(int fd)
{
    struct rlimit rl, raised, now;
    int high, err;

    host_fds_nofile_lock_take();
    if (host_fds_nofile_raw(NULL, &rl) != 0) {
        host_fds_nofile_lock_drop();
        return host_fds_fcntl(fd, F_DUPFD_CLOEXEC, host_fds_below(NULL));
    }
    if (!host_fds_above(&rl)) {
        host_fds_nofile_lock_drop();
        return host_fds_fcntl(fd, F_DUPFD_CLOEXEC, host_fds_below(&rl));
    }
    raised = rl;
    raised.rlim_cur =
            rl.rlim_max - rl.rlim_cur > HOST_FDS_ABOVE ? rl.rlim_cur + HOST_FDS_ABOVE : rl.rlim_max;
    atomic_store(&host_fds_nofile_soft, (unsigned long)rl.rlim_cur);
    atomic_fetch_add(&host_fds_nofile_seq, 1);
    if (host_fds_nofile_raw(&raised, NULL) != 0) {
        atomic_store(&host_fds_nofile_refused, 1);
        atomic_fetch_add(&host_fds_nofile_seq, 1);
        host_fds_nofile_lock_drop();
        return host_fds_fcntl(fd, F_DUPFD_CLOEXEC, host_fds_below(&rl));
    }
    if (atomic_load_explicit(&host_fds_test_raise_ms, memory_order_relaxed) != 0) {
        host_fds_test_sleep_ms(atomic_load_explicit(&host_fds_test_raise_ms, memory_order_relaxed));
    }
    high = host_fds_fcntl(fd, F_DUPFD_CLOEXEC, (long)rl.rlim_cur);
    err = errno;
    if (host_fds_nofile_raw(NULL, &now) == 0 && now.rlim_cur == raised.rlim_cur &&
        now.rlim_max == raised.rlim_max) {
        (void)host_fds_nofile_raw(&rl, NULL);
    }
    atomic_fetch_add(&host_fds_nofile_seq, 1);
    host_fds_nofile_lock_drop();
    errno = err;
    return high;
}

static _Atomic(void *) host_fds_real_close;

/* libc's close, so that a sanitizer's interceptor sees the fd go (ThreadSanitizer tracks fds, and
 * a number closed behind its back and reused looked like a race between its two owners). */
static int
host_fds_close_real(int fd)
{
    int (*real)(int) = (int (*)(int))host_real(&host_fds_real_close, "close");

    return real != NULL ? real(fd) : (int)syscall(SYS_close, fd);
}

/*
 * The fd directory (fdlist): a path that names a library fd in this process's own fd or fdinfo
 * directory answers ENOENT to the host's call, as bare (where the number is free), and a listing
 * of that directory leaves the library's numbers out. Before, /proc/self/fd listed 768..780 under
 * record, readlink("/proc/self/fd/768") gave "/proc/PID/task" and open("/proc/self/fd/770") gave
 * the host a second handle on the library's pipe. Fast path: a name that does not begin "/p" or
 * "/d", or whose last component is not a library number, costs a compare or two; what the
 * directory is (a readlink of /proc/self/fd/<dirfd> or /proc/self/cwd through the raw system call)
 * is looked at only for a library number.
 */

/*
 * A listing is the kernel's picture of the moment it was read, looked at after: a library fd open
 * then and closed by the library before the look is no longer marked, and was listed (a host of
 * 1000 threads under record --mode wall, whose stat files the wall thread opens and closes at each
 * pass: its listing of /proc/self/fd held 852 in 3 of 6 runs). Each close of a marked fd by the
 * library takes the next number of host_fds_close_seq and leaves it at its fd's host_fds_closed_at
 * (under the mark lock, host_fds_close_marked_slot); a listing reads the sequence before the kernel
 * reads the directory, and an entry the library closed since is the library's too. The cost: one
 * atomic load a listing, and for an entry whose number is not marked, one more (an array of
 * HOST_FDS_MAX counters, pages touched only at the library's numbers). A host fd at that number
 * closed, given to the library and closed by it within the one listing was the host's as the kernel
 * listed it and is left out: the host closed it while listing, where bare lists it or not by the
 * instant.
 */
static _Atomic unsigned host_fds_close_seq;
static _Atomic unsigned host_fds_closed_at[HOST_FDS_MAX];

/* The sequence a listing begins at (read before the kernel lists). */
static unsigned
host_fds_listing_begins(void)
{
    if (!host_library_thread) {
        host_thread_library_started_wait(); /* one that would be listed in /proc/self/task */
    }
    return atomic_load_explicit(&host_fds_close_seq, memory_order_acquire);
}

/* host_fds_close_marked_slot's note of the library's close of fd, under the mark lock. */
static void
host_fds_note_library_close(int fd)
{
    unsigned seq = atomic_load_explicit(&host_fds_close_seq, memory_order_relaxed) + 1;

    if (seq == 0) { /* 0 is "never closed" */
        seq = 1;
    }
    atomic_store_explicit(&host_fds_closed_at[fd], seq, memory_order_relaxed);
    atomic_store_explicit(&host_fds_close_seq, seq, memory_order_release);
}

/* 1 when the library closed fd after a listing that began at since. */
static int
host_fds_closed_since(unsigned fd, unsigned since)
{
    unsigned at = atomic_load_explicit(&host_fds_closed_at[fd], memory_order_acquire);

    return at != 0 && (int)(at - since) > 0;
}

/* The number a directory entry's name is (decimal, no leading zero, as the kernel's fd directory
 * names them), or -1. */
static int
host_fds_name_number(const char *name)
{
    unsigned n = 0;
    const char *p = name;

    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0')) {
        return -1;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n >= HOST_FDS_MAX) {
            return -1;
        }
    }
    return *p == '\0' ? (int)n : -1;
}

/* The number a directory entry's name is when it is a library fd's; -1 otherwise. */
static int
host_fds_name_library(const char *name)
{
    int n = host_fds_name_number(name);

    return n >= 0 && host_fd_is_library(n) ? n : -1;
}

static int host_fds_creations_waited(void);

/* Whether fd is open in the calling thread's table (the raw fcntl). errno kept. */
static int
host_fds_open_now(int fd)
{
    int err = errno;
    long rc = host_raw_syscall(SYS_fcntl, fd, F_GETFD, 0, 0, 0, 0);

    errno = err;
    return rc >= 0;
}

/* 1 when a listing that began at since (host_fds_listing_begins) holds name as a library fd's:
 * marked now, or closed by the library since and not open now (the host's own creation inside
 * the listing may have taken the number after the library's close: scandir's opendir does). A
 * number neither may be a library fd the kernel listed before its mark (a creation's return, then
 * its mark; the loader's opens under host_fds_hold, never marked): with a creation in the gate,
 * the host's look waits for it to end, and then the number is the library's when it is marked or
 * no longer open (up to 4 waits while creations follow one another). */
static int
host_fds_name_listed_library(const char *name, unsigned since)
{
    int n = host_fds_name_number(name);

    if (n < 0) {
        return 0;
    }
    for (int waits = 0;; waits++) {
        if (host_fd_is_library(n) ||
            ((waits > 0 || host_fds_closed_since((unsigned)n, since)) && !host_fds_open_now(n))) {
            return 1;
        }
        /* a creation in the gate may hold the number unmarked (again, after a wait: the library
         * reuses its lowest free high number at each of its opens) */
        if (waits == 4 || !host_fds_creations_waited()) {
            return 0;
        }
    }
}

/* A decimal number at *p (advanced past it), or -1. */
static long
host_fds_decimal(const char **p)
{
    long n = 0;
    const char *s = *p;

    if (*s < '0' || *s > '9') {
        return -1;
    }
    for (; *s >= '0' && *s <= '9' && n < (1L << 40); s++) {
        n = n * 10 + (*s - '0');
    }
    *p = s;
    return n;
}

/* The rest of p after a prefix naming this process's own fd or fdinfo directory and a '/'
 * ("/proc/self/fd/", "/proc/thread-self/fdinfo/", "/proc/<pid>/task/<tid>/fd/", "/dev/fd/"), or
 * NULL. The pid is compared last (one getpid), a thread's pid with the caller's only. */
static const char *
host_fds_fd_dir_rest(const char *p)
{
    long pid = 0;

    if (strncmp(p, "/dev/fd/", 8) == 0) {
        return p + 8;
    }
    if (strncmp(p, "/proc/", 6) != 0) {
        return NULL;
    }
    p += 6;
    if (strncmp(p, "self/", 5) == 0) {
        p += 5;
    } else if (strncmp(p, "thread-self/", 12) == 0) {
        p += 12;
        pid = -1;
    } else if ((pid = host_fds_decimal(&p)) >= 0 && *p == '/') {
        p++;
    } else {
        return NULL;
    }
    if (pid >= 0 && strncmp(p, "task/", 5) == 0) {
        p += 5;
        if (host_fds_decimal(&p) < 0 || *p != '/') {
            return NULL;
        }
        p++;
    }
    if (strncmp(p, "fd/", 3) == 0) {
        p += 3;
    } else if (strncmp(p, "fdinfo/", 7) == 0) {
        p += 7;
    } else {
        return NULL;
    }
    if (pid > 0 && pid != (long)getpid() && pid != host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0)) {
        return NULL;
    }
    return p;
}

/* 1 when dirfd (AT_FDCWD: the working directory) is this process's fd or fdinfo directory: its
 * link, read through the raw system call. errno kept. */
static int
host_fds_is_fd_dir(int dirfd)
{
    char link[40], target[96];
    const char *rest;
    int saved = errno;
    long n;

    if (dirfd == AT_FDCWD) {
        memcpy(link, "/proc/self/cwd", sizeof("/proc/self/cwd"));
    } else {
        (void)snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
    }
    n = host_raw_syscall(SYS_readlinkat, AT_FDCWD, (long)link, (long)target,
                         (long)sizeof(target) - 2, 0, 0);
    errno = saved;
    if (n <= 0) {
        return 0;
    }
    target[n] = '/';
    target[n + 1] = '\0';
    rest = host_fds_fd_dir_rest(target);
    return rest != NULL && *rest == '\0';
}

/* 1 when the host's call of path at dirfd (AT_FDCWD for a call without one) names a library fd in
 * this process's fd or fdinfo directory. The path is read only after the kernel read it (rc, err:
 * the real call's result and errno; EFAULT: not readable) or when the caller knows it readable.
 * The library's calls (ra) pass; a call through a sanitizer's interceptor (ASan's readlink and
 * readlinkat) is looked at as the host's: the library names no fd of its own so. */
static int
host_fds_path_hidden(int dirfd, const char *path, long rc, int err, const void *ra)
{
    const char *rest;
    int n;

    if (path == NULL || (rc < 0 && err == EFAULT)) {
        return 0;
    }
    if (path[0] == '/') {
        if (path[1] != 'p' && path[1] != 'd') {
            return 0;
        }
        rest = host_fds_fd_dir_rest(path);
        if (rest == NULL || host_fds_name_library(rest) < 0) {
            return 0;
        }
    } else if ((n = host_fds_name_library(path)) < 0 || !host_fds_is_fd_dir(dirfd)) {
        return 0;
    }
    return !host_fds_library_call(ra);
}

/* The first size - 1 bytes of the host's path at most, read without faulting (host_read_user, in
 * two reads where the path crosses a 4 KiB boundary, since one read fails as a whole on an
 * unmapped page), into buf with its NUL: 0, or -EFAULT when what was read is unreadable or holds
 * no NUL (no name of this process's fd directory is that long). */
static int
host_fds_path_copy(char *buf, size_t size, const char *path)
{
    size_t to_boundary = 4096 - ((uintptr_t)path & 4095), n = size - 1;

    if (to_boundary < n) {
        n = to_boundary;
    }
    if (host_read_user(buf, path, n) != 0) {
        return -EFAULT;
    }
    if (memchr(buf, '\0', n) == NULL && n < size - 1 &&
        host_read_user(buf + n, path + n, size - 1 - n) != 0) {
        return -EFAULT;
    }
    buf[size - 1] = '\0';
    return memchr(buf, '\0', size - 1) != NULL ? 0 : -EFAULT;
}

/* A result the host's call of path gets: rc as it is, or -1 with ENOENT when the path names a
 * library fd (rc an fd the call opened: closed). */
static long
host_fds_path_result(int dirfd, const char *path, long rc, int opened, const void *ra)
{
    if (!host_fds_path_hidden(dirfd, path, rc, errno, ra)) {
        return rc;
    }
    if (opened && rc >= 0) {
        host_fds_close_real((int)rc);
    }
    errno = ENOENT;
    return -1;
}

/* 1 when name (decimal, no leading zero, as the kernel's task directory names them) is a library
 * thread's id. */
static int
host_fds_name_library_tid(const char *name)
{
    const char *p = name;
    long n;

    if (p[0] == '0' || (n = host_fds_decimal(&p)) <= 0 || *p != '\0') {
        return 0;
    }
    return host_library_tid_is(n);
}

/* 1 when dirfd is this process's task directory (/proc/<its pid>/task, which /proc/self/task
 * names): its link, read through the raw system call. errno kept. */
static int
host_fds_is_task_dir(int dirfd)
{
    char link[40], target[64];
    const char *p = target;
    int saved = errno;
    long n;

    (void)snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
    n = host_raw_syscall(SYS_readlinkat, AT_FDCWD, (long)link, (long)target,
                         (long)sizeof(target) - 1, 0, 0);
    errno = saved;
    if (n <= 0 || dirfd < 0) {
        return 0;
    }
    target[n] = '\0';
    if (strncmp(p, "/proc/", 6) != 0) {
        return 0;
    }
    p += 6;
    return host_fds_decimal(&p) == (long)getpid() && strcmp(p, "/task") == 0;
}

/* A getdents64 buffer of rc bytes that the host's call filled from dirfd in a listing that began
 * at since, with the library's entries of this process's fd or fdinfo directory taken out in place
 * (each kept entry keeps its d_off, so telldir and seekdir still find the next): the bytes left. */
static long
host_fds_dents_kept(int dirfd, void *buf, long rc, unsigned since, const void *ra)
{
    char *p = buf;
    long in = 0, out = 0;
    int dir = -1, task = -1; /* unknown until an entry's name is a library number or thread */
    int library_fd, library_tid;

    while (in < rc) {
        struct dirent64 *e = (struct dirent64 *)(void *)(p + in);
        unsigned short len = e->d_reclen;

        if (len == 0) {
            break;
        }
        /* a number can be both a library fd's and a library thread's (small tids: pid namespaces)
         */
        library_fd = host_fds_name_listed_library(e->d_name, since);
        library_tid = host_fds_name_library_tid(e->d_name);
        if (library_fd && dir < 0) {
            dir = host_fds_is_fd_dir(dirfd) && !host_fds_library_call(ra);
        }
        if (library_tid && task < 0) {
            task = host_fds_is_task_dir(dirfd) && !host_fds_library_call(ra);
        }
        if ((library_fd && dir > 0) || (library_tid && task > 0)) {
            in += len;
            continue;
        }
        if (out != in) {
            memmove(p + out, p + in, len);
        }
        out += len;
        in += len;
    }
    return out;
}

/*
 * The library's marks and its closes of marked numbers, one at a time. A library fd is marked
 * while it is open and only then: from its creation's return (its low number too, while it moves
 * high) until after its close. Before, the low number and the high one until its mark were not
 * marked, and the close cleared the bit before the close, so a host's data call on that number
 * (copy_file_range of 0 bytes, in a fresh-clone CI run in wall mode, whose stat files are opened
 * and closed at each look) reached the library's file in those instants where bare gets EBADF.
 * Clearing after the close would wipe the mark of another library thread whose creation took the
 * number just freed; under this lock its mark waits until the clearing is done. Library threads
 * only, never a signal handler; a fork's child starts it free (host_fds_forked_child).
 */
static atomic_flag host_fds_mark_lock = ATOMIC_FLAG_INIT;

static void
host_fds_mark_lock_take(void)
{
    host_fds_spin_take(&host_fds_mark_lock);
}

static void
host_fds_mark_lock_drop(void)
{
    host_fds_spin_drop(&host_fds_mark_lock);
}

/* host_fd_mark(fd, owned) of a library creation's number, under the lock. */
static void
host_fds_mark_library(int fd, int owned)
{
    if (fd >= 0 && fd < HOST_FDS_MAX) {
        host_fds_mark_lock_take();
        host_fd_mark(fd, owned);
        host_fds_mark_lock_drop();
    }
}

/* The mark of a library creation's low number (host_fds_low, above), under the lock: the slot it
 * took, or -1 when none was free (then it is marked in every table). */
static int
host_fds_mark_low(int fd)
{
    long tid;
    int i, slot = -1;

    if (fd < 0 || fd >= HOST_FDS_MAX) {
        return -1;
    }
    tid = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0); /* not under the lock others spin on */
    host_fds_mark_lock_take();
    for (i = 0; i < HOST_FDS_LOW_SLOTS; i++) {
        if (atomic_load_explicit(&host_fds_low[i].fd1, memory_order_relaxed) == 0) {
            atomic_store_explicit(&host_fds_low[i].tid, tid, memory_order_relaxed);
            atomic_store_explicit(&host_fds_low[i].fd1, fd + 1, memory_order_release);
            atomic_fetch_add_explicit(&host_fds_low_n, 1, memory_order_acq_rel);
            slot = i;
            break;
        }
    }
    host_fd_mark(fd, 1);
    host_fds_mark_lock_drop();
    return slot;
}

/* Frees slot (-1: none), under the lock. */
static void
host_fds_low_free(int slot)
{
    if (slot >= 0) {
        atomic_store_explicit(&host_fds_low[slot].fd1, 0, memory_order_release);
        atomic_fetch_sub_explicit(&host_fds_low_n, 1, memory_order_acq_rel);
    }
}

/* The end of a low moment that did not move fd high: its slot freed, and its mark cleared when
 * unmark (the number is no longer the library's), both under the lock. */
static void
host_fds_low_end(int fd, int slot, int unmark)
{
    host_fds_mark_lock_take();
    if (unmark) {
        host_fd_mark(fd, 0);
    }
    host_fds_low_free(slot);
    host_fds_mark_lock_drop();
}

/* The host's close of fd, a copy its unshare kept of a library fd (host_fds_unshared_drop): the
 * copy goes, in its table only; the caller answers EBADF, as bare had no fd there. */
static void
host_fds_close_copy(int fd)
{
    int err = errno;

    if (host_fds_unshared_drop(fd)) {
        host_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    }
    errno = err;
}

/* The library's close of its marked fd (through real, syscall()'s, or libc's close when NULL),
 * the mark cleared after it and the number's low slot (-1: none) freed, all under the lock. */
static long
host_fds_close_marked_slot(int fd, host_syscall_fn real, int slot)
{
    long rc;
    int err;

    host_fds_mark_lock_take();
    rc = real != NULL ? real(SYS_close, fd, 0, 0, 0, 0, 0) : host_fds_close_real(fd);
    err = errno;
    if (fd >= 0 && fd < HOST_FDS_MAX) {
        host_fds_note_library_close(fd); /* before the mark goes: a look in between hides it */
        host_fd_mark(fd, 0);
    }
    host_fds_low_free(slot);
    host_fds_mark_lock_drop();
    errno = err;
    return rc;
}

static long
host_fds_close_marked(int fd, host_syscall_fn real)
{
    return host_fds_close_marked_slot(fd, real, -1);
}

/* The end of the library's fclose or closedir of its marked fd, made under the mark lock: as
 * host_fds_close_marked's, the mark cleared after the close and the close noted, the lock dropped
 * (before, the mark was cleared first, and a listing in between held the number unmarked). */
static void
host_fds_library_stream_closed(int fd)
{
    if (fd >= 0 && fd < HOST_FDS_MAX) {
        host_fds_note_library_close(fd);
        host_fd_mark(fd, 0);
    }
    host_fds_mark_lock_drop();
}

static _Atomic(void *) real_fcntl_p;

/* libc's fcntl with an integer argument: fds.c's own moves do not pass through its interposer. */
static int
host_fds_fcntl(int fd, int cmd, long arg)
{
    int (*real)(int, int, ...) = (int (*)(int, int, ...))host_real(&real_fcntl_p, "fcntl");

    return real != NULL ? real(fd, cmd, arg) : (int)syscall(SYS_fcntl, fd, cmd, arg);
}

/*
 * The gate between the library's fd creations and the host's closes (the moment of a move, above):
 * how many library creations are between their system call and the move of the new fd high, and
 * how many host closes (close, close_range, closefrom, dup2, dup3) are under way. A host close
 * counts itself in, then waits for the library's to finish; a library creation goes in only when
 * no host close is counted (it steps back and waits while one is). Each side enters regardless
 * after its bound: the host's is short, as its signal handler may interrupt a creation on the
 * same thread; the library's longer, as a host's close of a lingering socket may block.
 * Sequentially consistent: each side's count is stored before the other's is read.
 */
static _Atomic int host_fds_gate_library, host_fds_gate_host;
/* Library creations that entered the gate so far (after counting themselves in): a host's
 * creation compares it across its system call (host_fds_creating). */
static _Atomic unsigned host_fds_gate_library_entries;
#define HOST_FDS_GATE_HOST_NS    50000000u  /* 50 ms */
#define HOST_FDS_GATE_LIBRARY_NS 500000000u /* 500 ms */

/*
 * Library creations between their system call and the mark of their new fds: counted in by
 * host_fds_create_begin (every creation whose fds host_fd_take, host_fds_pair_created or
 * host_fds_file_created mark: the interposers', syscall()'s, procstat.c's) after it entered the
 * gate, before the system call, and out by host_fds_create_leave once the fds are marked. Not
 * the gate's count, which host_fds_hold also takes across a dlopen (milliseconds). A host's data
 * call (HOST_FD_DATA_REFUSED, internal.h) loads it before its bit test; while it is not 0 the
 * slow half (host_fds_data_refused) waits, at most the host's creations' bound, before it tests
 * an unmarked number again: the number may be a library fd whose creation returned and whose
 * mark is not made yet (before, a host's pread of a number in that instant reached a library
 * pipe: ESPIPE in a fresh-clone CI run of host-contract-fds-datacalls).
 * The order: the creation's increment (sequentially consistent, a locked instruction) comes
 * before its system call, its mark (acq_rel) after it, its decrement (release) after the mark;
 * the host's load (acquire) comes before its bit test and its own system call. A 0 read from a
 * creation's decrement brings that creation's mark with it; a count read as not 0 waits. What is
 * left is a creation whose increment comes after the host's load: its system call takes the
 * number the host is about to use only if the whole of it (the increment, the kernel's
 * allocation) fits between the host's load and the host's own system call, a few instructions
 * that a preemption of the host's thread alone stretches. Closing that too would need the host's
 * read and write to count themselves in (a locked instruction each) and the library's creations
 * to wait for them.
 */
_Atomic int host_fds_creating_n; /* internal.h: host_fd_data_refused_by */

/* Whether the bound that *until holds (0: not started yet) has passed. */
static int
host_fds_gate_waited(uint64_t *until, uint64_t bound)
{
    uint64_t now = host_now_ns();

    if (now == 0) {
        return 1; /* no clock, no bound to wait for */
    }
    if (*until == 0) {
        *until = now + bound;
    }
    return now >= *until;
}

/* A host close counts itself in and waits, at most bound, for the library's creations. */
static void
host_fds_gate_host_enter_for(uint64_t bound)
{
    uint64_t until = 0;

    atomic_fetch_add(&host_fds_gate_host, 1);
    while (atomic_load(&host_fds_gate_library) != 0 && !host_fds_gate_waited(&until, bound)) {
        sched_yield();
    }
}

static void
host_fds_gate_host_enter(void)
{
    host_fds_gate_host_enter_for(HOST_FDS_GATE_HOST_NS);
}

static void
host_fds_gate_host_leave(void)
{
    atomic_fetch_sub(&host_fds_gate_host, 1);
}

/* How deep the calling thread is in the gate as a library creation: a creation made with the gate
 * held already (host_fds_hold, then an interposed mkstemp) goes in without waiting, since a host
 * close counted in meanwhile waits for this thread's hold to end. */
static _Thread_local int host_fds_gate_depth;

static void
host_fds_gate_library_enter(void)
{
    uint64_t until = 0;

    if (host_fds_gate_depth++ > 0) {
        atomic_fetch_add(&host_fds_gate_library, 1);
        atomic_fetch_add(&host_fds_gate_library_entries, 1);
        return;
    }
    for (;;) {
        atomic_fetch_add(&host_fds_gate_library, 1);
        if (atomic_load(&host_fds_gate_host) == 0) {
            break;
        }
        atomic_fetch_sub(&host_fds_gate_library, 1);
        while (atomic_load(&host_fds_gate_host) != 0) {
            if (host_fds_gate_waited(&until, HOST_FDS_GATE_LIBRARY_NS)) {
                atomic_fetch_add(&host_fds_gate_library, 1);
                atomic_fetch_add(&host_fds_gate_library_entries, 1);
                return;
            }
            sched_yield();
        }
    }
    atomic_fetch_add(&host_fds_gate_library_entries, 1);
}

static void
host_fds_gate_library_leave(void)
{
    host_fds_gate_depth--;
    atomic_fetch_sub(&host_fds_gate_library, 1);
}

void
host_fds_hold(void)
{
    host_fds_gate_library_enter();
}

void
host_fds_release(void)
{
    host_fds_gate_library_leave();
}

/*
 * Tests only: PIPEPROF_TEST_FD_LOW_MS=N holds each library fd in its low moment for N ms (read
 * once, by host_fds_init) and starts a thread of the library's that opens /dev/null, moves and
 * closes it every 5 ms, so that a host's creation meets a library fd held low on demand:
 * host-contract-fds-create runs with N=2 (tests/hosts/fds.c's create mode), and fails without the
 * wait of host_fds_creating. Keep N well below the host's bound.
 */
/* Both atomic (relaxed): the knobs are set in host_fds_init, after the shim's constructor may have
 * started the agent's manager, whose fd creations read them (TSan reported the plain ones as a
 * data race, host-contract-fds-create, status 66). */
static _Atomic unsigned host_fds_test_low_ms;
/* The host's creations' bound (HOST_FDS_GATE_HOST_NS); 2 s with the knob: at a load of 20 on 2
 * cores the library's thread can be preempted in its low moment for longer than 50 ms, and with
 * that bound 3 of 3 runs of host-contract-fds-create failed (one creation each), with 2 s 4 of 4
 * passed. */
static _Atomic uint64_t host_fds_create_bound_ns = HOST_FDS_GATE_HOST_NS;

/* PIPEPROF_TEST_FD_LOW_MARKED=1 with the knob above (tests only): the N ms fall after the low
 * number's mark instead of before it, so that a host's call on that number meets the mark
 * (host_fds_low) on demand: host-contract-fds-unshare-low. */
static _Atomic int host_fds_test_low_marked;

/* PIPEPROF_TEST_FD_COPY_MEET=1 with PIPEPROF_TEST_FD_LOW_MS (tests only): a host's copy of a number
 * (host_fds_copy_begin) waits, after its look at the gate and before its system call, for a
 * library creation to be in the gate (at most 20 ms), so that the copy meets a library fd in its
 * low moment on demand, as a host thread preempted between the two does by chance:
 * host-contract-fds-copies-lowmoment. */
static _Atomic int host_fds_test_copy_meet;

static unsigned
host_fds_test_low_ms_get(void)
{
    return atomic_load_explicit(&host_fds_test_low_ms, memory_order_relaxed);
}

static int
host_fds_test_low_marked_get(void)
{
    return atomic_load_explicit(&host_fds_test_low_marked, memory_order_relaxed);
}

static uint64_t
host_fds_create_bound(void)
{
    return atomic_load_explicit(&host_fds_create_bound_ns, memory_order_relaxed);
}

static void
host_fds_test_sleep_ms(unsigned ms)
{
    struct timespec ts = { 0, (long)ms * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *
host_fds_test_churn(void *arg)
{
    (void)arg;
    host_thread_mark_library();
    for (;;) {
        /* read and write: a host's call of either that reaches it succeeds (datalow) */
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (fd >= 0) {
            close(fd);
        }
        host_fds_test_sleep_ms(5);
    }
    return NULL;
}

static void
host_fds_test_start(void)
{
    const char *low = getenv("PIPEPROF_TEST_FD_LOW_MS");
    pthread_t th;

    if (low == NULL || atoi(low) <= 0 || atoi(low) >= 1000) {
        return;
    }
    atomic_store_explicit(&host_fds_create_bound_ns, 2000000000u, memory_order_relaxed);
    atomic_store_explicit(&host_fds_test_low_marked,
                          getenv("PIPEPROF_TEST_FD_LOW_MARKED") != NULL &&
                                  strcmp(getenv("PIPEPROF_TEST_FD_LOW_MARKED"), "1") == 0,
                          memory_order_relaxed);
    atomic_store_explicit(&host_fds_test_copy_meet,
                          getenv("PIPEPROF_TEST_FD_COPY_MEET") != NULL &&
                                  strcmp(getenv("PIPEPROF_TEST_FD_COPY_MEET"), "1") == 0,
                          memory_order_relaxed);
    atomic_store_explicit(&host_fds_test_low_ms, (unsigned)atoi(low), memory_order_relaxed);
    if (pthread_create(&th, NULL, host_fds_test_churn, NULL) == 0) {
        pthread_detach(th);
    }
}

int
host_fd_take(int fd)
{
    int high, base, slot, err = errno;

    if (fd < 0) {
        return fd;
    }
    host_fds_trust_self();
    base = host_fds_base();
    if (base > fd && host_fds_test_low_ms_get() != 0 && !host_fds_test_low_marked_get()) {
        host_fds_test_sleep_ms(host_fds_test_low_ms_get());
    }
    if (base <= fd) {
        host_fds_mark_library(fd, 1); /* high already */
        errno = err;
        return fd;
    }
    slot = host_fds_mark_low(fd); /* its low number too, while it moves */
    if (host_fds_test_low_ms_get() != 0 && host_fds_test_low_marked_get()) {
        host_fds_test_sleep_ms(host_fds_test_low_ms_get());
    }
    high = host_fds_move_high(fd);
    if (high >= 0 && high < HOST_FDS_MAX) {
        host_fds_mark_library(high, 1);
        (void)host_fds_close_marked_slot(fd, NULL, slot);
        fd = high;
    } else if (high < 0 && errno == EBADF) {
        /* Closed before it could move, by a host thread's close past the gate's bound: the
         * number may be the host's again already, and is not touched but for the mark. */
        host_fds_low_end(fd, slot, 1);
        return -1;
    } else {
        /* Stays low (no number free high, or one past the set): the library's in every table,
         * as before the slots. */
        if (high >= 0) {
            host_fds_close_real(high);
        }
        host_fds_low_end(fd, slot, 0);
    }
    errno = err;
    return fd;
}

void
host_fd_forget(int fd)
{
    if (fd >= 0 && fd < HOST_FDS_MAX) {
        host_fd_mark(fd, 0);
    }
}

void
host_fds_forked_child(void)
{
    int i;

    /* The marks stay: the parent's fds are open here, the library's until
     * host_fds_inherited_close() closes them. */
    for (i = 0; i < HOST_FDS_WORDS; i++) {
        atomic_store_explicit(&host_fds_inherited[i],
                              atomic_load_explicit(&host_fds_owned[i], memory_order_relaxed),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&host_fds_inherited_n, 1, memory_order_release);
    atomic_store(&host_fds_gate_library, 0);   /* held by threads the child does not have */
    atomic_store(&host_fds_creating_n, 0);     /* likewise */
    host_fds_mark_lock_drop();                 /* likewise */
    host_thread_forked_child();                /* likewise */
    for (i = 0; i < HOST_FDS_LOW_SLOTS; i++) { /* their creators are not in the child */
        atomic_store_explicit(&host_fds_low[i].fd1, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&host_fds_low_n, 0, memory_order_release);
    atomic_store(&host_fds_gate_host, 0);
    host_fds_unshared_seen.tid = 0;           /* the forking thread's: the child's id is another */
    for (i = 0; i < HOST_LIBRARY_TIDS; i++) { /* the child has only the forking thread */
        atomic_store_explicit(&host_library_tids[i], 0, memory_order_relaxed);
    }
    for (i = 0; i < HOST_LIBRARY_GONE; i++) {
        atomic_store_explicit(&host_library_gone[i].tid, 0, memory_order_relaxed);
    }
    atomic_store(&host_library_tids_n, 0);
    if (host_library_thread) {
        host_library_tid_add(host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0));
    }
    host_fds_nofile_forked_child();
}

/*
 * fork() in the gate as a host's close (its prepare and parent handlers, the shim's first
 * registered: the prepare runs last): a library creation under way at the fork has its fd in the
 * child's table but its mark, made after the fork, in the parent's memory only, and the child
 * kept that fd, unmarked, in its listings (a bash subshell listed 778 under a collect session
 * in wall mode, whose thread opens and closes a stat file at each pass: real-hosts, 1 run in 9
 * of 5 tests at once). The fork now waits for creations under way (at most the host's bound) and
 * new ones wait for it. The child's handler empties the gate (host_fds_forked_child).
 */
void
host_fds_fork_prepare(void)
{
    host_fds_gate_host_enter();
}

void
host_fds_fork_parent(void)
{
    host_fds_gate_host_leave();
}

void
host_fds_atfork_register(void (*child)(void))
{
    static atomic_int registered;

    /* A child that inherited the mark lock held (a library thread closing a scan file at the
     * fork) and had no handler to free it spun on it for good in the agent's child handler
     * (test-agent-sampling's fork case under TSan, the agent linked without the shim: gdb, the
     * child in host_fds_spin_take from closedir from ag_threads_forked_child). */
    if (atomic_exchange(&registered, 1) == 0) {
        host_fds_atfork_register_again(child);
    }
}

void
host_fds_atfork_register_again(void (*child)(void))
{
    pthread_atfork(host_fds_fork_prepare, host_fds_fork_parent,
                   child != NULL ? child : host_fds_forked_child);
}

static long host_fds_close_library(int fd, host_syscall_fn real);

void
host_fds_inherited_close(void)
{
    int i, err = errno; /* a fork handler: the host's child runs on with its errno */

    /* Under a seccomp filter the host installed (host_seccomp_sealed: the library makes no system
     * call of its own after it, its fds stay as they are) or one it started under that refuses
     * close: the fds stay, marked, as in the parent (host-contract-seccomp-kill's child died of
     * SIGSYS at this close). */
    if (atomic_load_explicit(&host_fds_inherited_n, memory_order_acquire) == 0 ||
        atomic_load_explicit(&host_seccomp_sealed, memory_order_relaxed) ||
        host_filter_refuses(SYS_close)) {
        return;
    }
    for (i = 0; i < HOST_FDS_WORDS; i++) {
        uint64_t bits = atomic_exchange_explicit(&host_fds_inherited[i], 0, memory_order_relaxed);

        while (bits != 0) {
            int fd = i * 64 + __builtin_ctzll(bits);

            bits &= bits - 1;
            if (host_fd_is_owned(fd)) {
                (void)host_fds_close_library(fd, NULL);
            }
        }
    }
    atomic_store_explicit(&host_fds_inherited_n, 0, memory_order_release);
    errno = err;
}

int
host_fds_create_begin(const void *ra)
{
    int library = host_fds_library_call(ra);

    if (library) {
        host_fds_gate_library_enter();
        /* after the gate (whose wait for a host's close may last its bound), before the system
         * call: the host's data calls wait from here (host_fds_creating_n) */
        atomic_fetch_add(&host_fds_creating_n, 1);
    }
    return library;
}

/* The end of a library creation that host_fds_create_begin began, once its new fds are marked:
 * the host's data calls go on, and the gate is left. */
static void
host_fds_create_leave(void)
{
    atomic_fetch_sub_explicit(&host_fds_creating_n, 1, memory_order_release);
    host_fds_gate_library_leave();
}

int
host_fds_create_end(int library, int fd)
{
    if (library) {
        int err = errno;

        fd = host_fd_take(fd);
        host_fds_create_leave();
        if (fd < 0) {
            errno = err;
        }
    }
    return fd;
}

/*
 * Around one of fds.c's fd-creating interposers: a library call as host_fds_create_begin/_end; a
 * host's call first waits (at most the host's bound) while a library fd is in its low moment, so
 * that it does not get the next number (a host's open after closing every fd got 4 where bare
 * gets 3: host-contract-fds-dup3 and -sysclose in fresh-clone CI runs). It does not count itself
 * in, as a close does: a host's open may block for good (the .NET runtime opens its debugger
 * FIFOs so), and the library's creations would then wait their bound at each; a server stop at
 * exit took over 10 s. So a library creation that enters the gate between the wait and the host's
 * system call can still take the low number first; the host's call sees that the gate's entries
 * moved across it (*entries, read before the last look at the gate) and host_fds_created_lower
 * then moves its fd down to the lowest free number once the library's has moved away (with
 * PIPEPROF_TEST_FD_LOW_MS=2, host-contract-fds-create met it a few times per run before this).
 */
static int
host_fds_creating(const void *ra, unsigned *entries)
{
    int library = host_fds_create_begin(ra);
    uint64_t until = 0;

    while (!library) {
        *entries = atomic_load(&host_fds_gate_library_entries);
        if (atomic_load(&host_fds_gate_library) == 0) {
            break;
        }
        if (host_fds_gate_waited(&until, host_fds_create_bound())) {
            *entries -= 1; /* went ahead: host_fds_created_met waits again after the call */
            break;
        }
        sched_yield();
    }
    return library;
}

/* Waits (at most the host's creations' bound) until *count is 0. Loads, clock_gettime and
 * sched_yield only: async-signal-safe. */
static void
host_fds_count_wait(_Atomic int *count)
{
    uint64_t until = 0;

    while (atomic_load(count) != 0 && !host_fds_gate_waited(&until, host_fds_create_bound())) {
        sched_yield();
    }
}

/* Waits (at most the host's bound) until no library fd is in its low moment. */
static void
host_fds_gate_library_wait(void)
{
    host_fds_count_wait(&host_fds_gate_library);
}

/* 1 after waiting until *count is 0, when it was not; 0 when it was, or the caller is a library
 * thread or is inside the gate itself (a host signal handler that interrupted the thread's own
 * library creation, which cannot end meanwhile). */
static int
host_fds_count_waited(_Atomic int *count)
{
    if (atomic_load(count) == 0 || host_fds_gate_depth > 0 || host_library_thread) {
        return 0;
    }
    host_fds_count_wait(count);
    return 1;
}

/* For a listing's look at an entry: 1 after waiting out the library creations in the gate, when
 * there were any (a creation in flight at the kernel's listing has ended once the count was 0);
 * 0 when there were none, or the caller is a library thread or holds the gate itself. */
static int
host_fds_creations_waited(void)
{
    return host_fds_count_waited(&host_fds_gate_library);
}

/* For a data call's look at an unmarked number (host_fds_data_refused): as above for the library
 * creations between their system call and their mark alone (host_fds_creating_n), not the gate's
 * holds. errno kept. */
static int
host_fds_data_waited(void)
{
    int err = errno, waited = host_fds_count_waited(&host_fds_creating_n);

    errno = err;
    return waited;
}

/*
 * fcntl's other commands (F_GETFD, F_SETFL, F_GETLK...) on fd, for the caller whose return address
 * is ra, when fd is a library fd or a library fd is in its low moment (the fast path's one bit
 * test and one load said so): the host's on a library fd fails with EBADF, as bare (the number was
 * free there), and changes nothing of the library's; the host's on any other number first waits
 * (at most the host's bound) for the library's fds to move, so that it does not answer for one
 * held low; the library's, as it is. *pass is set when the caller makes the call itself.
 */
static int
host_fds_fcntl_other(int fd, const void *ra, int *pass)
{
    *pass = 1;
    if (host_fds_library_call(ra)) {
        return 0;
    }
    if (!host_fd_is_owned(fd)) {
        host_fds_gate_library_wait();
    } else if (host_fds_library_data_call(ra)) {
        return 0; /* a trusted object's code anywhere, as a data call: libelf's elf_begin checks
                   * the library's fd with F_GETFD on whatever thread symbolizes */
    }
    if (host_fd_is_owned(fd)) { /* also one registered during the wait */
        *pass = 0;
        errno = EBADF;
        return -1;
    }
    return 0;
}

/* Whether fcntl's other commands on fd take host_fds_fcntl_other: fd is registered, or a library
 * creation is in the gate. */
#define HOST_FDS_FCNTL_SLOW(fd) \
    (host_fd_is_owned(fd) ||    \
     atomic_load_explicit(&host_fds_gate_library, memory_order_relaxed) != 0)

/* Tests only (PIPEPROF_TEST_FD_LOW_MS): the move down below waits, before its first dup, for a
 * library fd to be in its low moment (at most 20 ms), so that the dup meets one every time it
 * runs, as it did by chance once in a fresh-clone CI run. */
static void
host_fds_test_meet(void)
{
    uint64_t until = 0;

    while (atomic_load(&host_fds_gate_library) == 0 && !host_fds_gate_waited(&until, 20000000u)) {
        sched_yield();
    }
}

/* Tries of the move down: each needs a library creation to enter in its own few microseconds. */
#define HOST_FDS_LOWER_TRIES 8

/* The host's new fd, moved down to the lowest free number from min when one is below it (the
 * library's that met it has moved away; host_fds_creating). The dup holds one more number for a
 * moment: a creation of another host thread at that instant gets the next one, as it would beside
 * any creation of the host's own; this runs only after a library creation overlapped the call.
 * The dup itself can meet a library creation that entered the gate after the wait: the lowest
 * free number is then above that library fd (timerfd_create got 7 where bare gets 6 once in a
 * fresh-clone CI run, wall mode). So it is tried again while the gate's entries moved across
 * it: with the entries unchanged from before the wait to after the dup, no library fd was low
 * at the dup. */
static int
host_fds_created_lower_from(int fd, int min)
{
    int err = errno, flags, low, tries;
    unsigned entries;

    if ((flags = host_fds_fcntl(fd, F_GETFD, 0)) < 0) {
        return fd;
    }
    for (tries = 0; tries < HOST_FDS_LOWER_TRIES; tries++) {
        entries = atomic_load(&host_fds_gate_library_entries);
        host_fds_gate_library_wait();
        if (tries == 0 && host_fds_test_low_ms_get() != 0) {
            host_fds_test_meet();
        }
        low = host_fds_fcntl(fd, (flags & FD_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, min);
        if (low >= 0 && low < fd) {
            host_fds_close_real(fd);
            fd = low;
        } else if (low >= 0) {
            host_fds_close_real(low);
        }
        if (atomic_load(&host_fds_gate_library_entries) == entries) {
            break;
        }
    }
    errno = err;
    return fd;
}

static int
host_fds_created_lower(int fd)
{
    return host_fds_created_lower_from(fd, 0);
}

/* Whether a library creation entered the gate since *entries (the host's call may have met it);
 * then waits (at most the host's bound) until the library's fds have moved. */
static int
host_fds_created_met(unsigned entries)
{
    if (atomic_load(&host_fds_gate_library_entries) == entries) {
        return 0;
    }
    host_fds_gate_library_wait();
    return 1;
}

static int
host_fds_created_by(int library, unsigned entries, int fd)
{
    if (library) {
        return host_fds_create_end(library, fd);
    }
    return fd >= 0 && host_fds_created_met(entries) ? host_fds_created_lower(fd) : fd;
}

/* host_fds_creating for a copy of a number (dup, fcntl's F_DUPFD*, syscall()'s SYS_dup), which
 * host_fds_copy_created ends. */
static int
host_fds_copy_begin(const void *ra, unsigned *entries)
{
    int library = host_fds_creating(ra, entries);

    if (!library && atomic_load_explicit(&host_fds_test_copy_meet, memory_order_relaxed)) {
        host_fds_test_meet();
    }
    return library;
}

/*
 * host_fds_created_by for a copy newfd of srcfd made from min up. The host's look at srcfd (its
 * mark) and at the gate came before the call: a library creation that entered the gate between
 * them and the call (the host's thread preempted there) can have had its new fd at srcfd, in its
 * low moment, when the call copied it. Bare srcfd was free: the copy is closed and the call fails
 * with EBADF. Once the library's fds have moved (host_fds_created_met), a library fd that was at
 * srcfd is marked there or gone from it; a host's own fd there is neither (a host thread that
 * closes it meanwhile races its own copy, and EBADF is one of bare's answers to that). A fresh-
 * clone CI run's ASan stage: host-contract-fds-create's syscall(SYS_dup) of 64..1023 got 1 copy.
 * The mark is looked at after the call whatever the gate's entries say: the look before it came
 * before host_fds_copy_begin's wait, and a library creation the host waited for there (in the
 * gate at its look, gone at the call, so the entries did not move across the call) may have put
 * its moved fd at srcfd, marked. The copy was then a marked library fd's: 1 copy in 1 of about 12
 * runs of host-contract-fds-create under load, where the knob's thread, past a seccomp seal,
 * leaves an fd at each next high number (/dev/null at 1014, 1015); a scan of 768..4095 beside
 * that thread got 27 copies in 5 s, 0 with this look.
 */
static int
host_fds_copy_created(int library, unsigned entries, int newfd, int srcfd, int min)
{
    if (library || newfd < 0) {
        return host_fds_created_by(library, entries, newfd);
    }
    if (!host_fd_is_owned(srcfd)) {
        if (!host_fds_created_met(entries)) {
            return newfd;
        }
        if (!host_fd_is_owned(srcfd) &&
            !(host_fds_fcntl(srcfd, F_GETFD, 0) < 0 && errno == EBADF)) {
            return host_fds_created_lower_from(newfd, min);
        }
    }
    host_fds_close_real(newfd);
    errno = EBADF;
    return -1;
}

static _Atomic(void *) real_syscall;

static void host_fds_resolve(void);

/* Resolved before any signal handler can call syscall() (the first lookup takes a lock). */
__attribute__((constructor)) static void
host_fds_init(void)
{
    (void)host_real(&real_syscall, "syscall");
    host_filter_note_start(); /* before any call of the library's it may leave out */
    host_fds_resolve();
    host_fds_trust_self();
    if (getenv("PIPEPROF_TEST_NOFILE_RAISE_MS") != NULL &&
        atoi(getenv("PIPEPROF_TEST_NOFILE_RAISE_MS")) > 0 &&
        atoi(getenv("PIPEPROF_TEST_NOFILE_RAISE_MS")) < 1000) {
        atomic_store_explicit(&host_fds_test_raise_ms,
                              (unsigned)atoi(getenv("PIPEPROF_TEST_NOFILE_RAISE_MS")),
                              memory_order_relaxed);
    }
    host_fds_test_start();
    atomic_store_explicit(&host_fds_rlimit_ready, 1, memory_order_release);
}

#define HOST_REAL(type, name) ((type)host_real(&real_##name, #name))

/* The library's close of its fd (through real, syscall()'s, or libc's close when NULL): in the
 * gate as a library creation, so that a host's io_uring submission, counted in as a close
 * (host_fds_syscall_uring), never meets the close (a wall-mode session's stat files, opened and
 * closed at each look, met 2 FSYNC entries of host-contract-fds-uring's in 1 of 6 runs when the
 * bit was cleared before the close); the bit is cleared after it (host_fds_close_marked). */
static long
host_fds_close_library(int fd, host_syscall_fn real)
{
    long rc;

    host_fds_gate_library_enter();
    rc = host_fds_close_marked(fd, real);
    host_fds_gate_library_leave();
    return rc;
}

HOST_EXPORT int
close(int fd)
{
    int rc;

    if (host_fds_sealed_call(fd, __builtin_return_address(0))) {
        return 0; /* libuv's, after a seccomp filter: no system call (internal.h) */
    }
    if (host_fds_library_call(__builtin_return_address(0))) {
        if (host_fd_is_owned(fd)) {
            return (int)host_fds_close_library(fd, NULL);
        }
        return host_fds_close_real(fd);
    }
    host_fds_gate_host_enter();
    if (host_fd_is_owned(fd)) {
        host_fds_close_copy(fd);
        errno = EBADF; /* the number was free in the bare run */
        rc = -1;
    } else {
        rc = host_fds_close_real(fd);
        host_uring_closed(fd, fd);
    }
    host_fds_gate_host_leave();
    return rc;
}

/* What a system call made through syscall() is to the fds: none of them (it passes through with
 * its six arguments), a creator of one fd (its result) or of two into the int[2] of its argument
 * pipe_fds or pair_fds, a close, a close_range, a dup2 or dup3 onto a number of the caller's
 * choice, an fcntl F_DUPFD* (a creator from a minimum), or a receive whose SCM_RIGHTS messages
 * bring fds. */
enum {
    HOST_FDS_SYS_NONE,
    HOST_FDS_SYS_ONE,
    HOST_FDS_SYS_PIPE,
    HOST_FDS_SYS_SOCKETPAIR,
    HOST_FDS_SYS_CLOSE,
    HOST_FDS_SYS_CLOSE_RANGE,
    HOST_FDS_SYS_DUP2,
    HOST_FDS_SYS_DUP3,
    HOST_FDS_SYS_DUPFD,
    HOST_FDS_SYS_FCNTL,
    HOST_FDS_SYS_RECVMSG,
    HOST_FDS_SYS_RECVMMSG,
    HOST_FDS_SYS_URING
};

/* bpf(2)'s commands that return a new fd; the others return 0 or a count, never to be moved. */
static int
host_fds_bpf_creates(long cmd)
{
    switch (cmd) {
    case BPF_MAP_CREATE:
    case BPF_PROG_LOAD:
    case BPF_OBJ_GET:
    case BPF_PROG_GET_FD_BY_ID:
    case BPF_MAP_GET_FD_BY_ID:
    case BPF_RAW_TRACEPOINT_OPEN:
    case BPF_BTF_LOAD:
    case BPF_BTF_GET_FD_BY_ID:
    case BPF_LINK_CREATE:
    case BPF_LINK_GET_FD_BY_ID:
    case BPF_ENABLE_STATS:
    case BPF_ITER_CREATE:
        return HOST_FDS_SYS_ONE;
    default:
        return HOST_FDS_SYS_NONE;
    }
}

/*
 * fstatat's fd matters only for a relative path, or an empty one with AT_EMPTY_PATH (an empty one
 * without it fails with ENOENT before the fd is looked at): the number to check, or -1 (also for
 * a NULL path or one the kernel cannot read, which it refuses with EFAULT before the fd). Only a
 * library fd's path is read, and without faulting (host_read_user): the callers check no other
 * number, and a host's bad pointer is the kernel's EFAULT, as bare. (Before, every call read the
 * path's first byte: openat(AT_FDCWD, (char *)8, ...) killed a preloaded host with SIGSEGV where
 * bare gets EFAULT.)
 */
static int
host_fds_at_fd(int fd, const char *path, int flags)
{
    char first;

    if (__builtin_expect(!host_fd_is_library(fd), 1)) {
        return fd;
    }
    if (path == NULL) {
        return -1;
    }
    if (host_read_user(&first, path, 1) != 0) {
        return -1;
    }
    if (first == '/' || (first == '\0' && !(flags & AT_EMPTY_PATH))) {
        return -1;
    }
    return fd;
}

/* Of a call's two numbers, the one the library holds, if either. */
static int
host_fds_either(int a, int b)
{
    return host_fd_is_library(a) ? a : b;
}

/* The number a system call acts on without making an fd (fstat, lseek, ioctl..., the data calls:
 * read, write, their vector, positioned and socket forms, shutdown, setsockopt, mmap, fstatfs,
 * statx, fchdir, fgetxattr, and the calls that act on what it holds: listen, the epoll waits,
 * signalfd of a number, timerfd_settime, the mount calls), as the interposers of their libc names
 * check it; -1 for
 * any other call, and where the number is not looked at (an anonymous mapping; an absolute path
 * for the *at calls). */
static int
host_fds_syscall_on_fd(long n, const long a[6])
{
    switch (n) {
#ifdef SYS_fstat
    case SYS_fstat:
#endif
#ifdef SYS_lseek
    case SYS_lseek:
#endif
#ifdef SYS_ioctl
    case SYS_ioctl:
#endif
#ifdef SYS_fsync
    case SYS_fsync:
#endif
#ifdef SYS_fdatasync
    case SYS_fdatasync:
#endif
#ifdef SYS_fchmod
    case SYS_fchmod:
#endif
#ifdef SYS_fchown
    case SYS_fchown:
#endif
#ifdef SYS_ftruncate
    case SYS_ftruncate:
#endif
#ifdef SYS_flock
    case SYS_flock:
#endif
#ifdef SYS_fadvise64
    case SYS_fadvise64:
#endif
#ifdef SYS_getsockopt
    case SYS_getsockopt:
#endif
#ifdef SYS_getsockname
    case SYS_getsockname:
#endif
#ifdef SYS_getpeername
    case SYS_getpeername:
#endif
#ifdef SYS_read
    case SYS_read:
#endif
#ifdef SYS_write
    case SYS_write:
#endif
#ifdef SYS_pread64
    case SYS_pread64:
#endif
#ifdef SYS_readv
    case SYS_readv:
#endif
#ifdef SYS_writev
    case SYS_writev:
#endif
#ifdef SYS_sendto
    case SYS_sendto:
#endif
#ifdef SYS_recvfrom
    case SYS_recvfrom:
#endif
#ifdef SYS_sendmsg
    case SYS_sendmsg:
#endif
#ifdef SYS_shutdown
    case SYS_shutdown:
#endif
#ifdef SYS_setsockopt
    case SYS_setsockopt:
#endif
#ifdef SYS_fstatfs
    case SYS_fstatfs:
#endif
#ifdef SYS_fchdir
    case SYS_fchdir:
#endif
#ifdef SYS_fgetxattr
    case SYS_fgetxattr:
#endif
#ifdef SYS_pwrite64
    case SYS_pwrite64:
#endif
#ifdef SYS_preadv
    case SYS_preadv:
#endif
#ifdef SYS_pwritev
    case SYS_pwritev:
#endif
#ifdef SYS_preadv2
    case SYS_preadv2:
#endif
#ifdef SYS_pwritev2
    case SYS_pwritev2:
#endif
#ifdef SYS_sendmmsg
    case SYS_sendmmsg:
#endif
#ifdef SYS_fsetxattr
    case SYS_fsetxattr:
#endif
#ifdef SYS_vmsplice
    case SYS_vmsplice:
#endif
#ifdef SYS_fremovexattr
    case SYS_fremovexattr:
#endif
#ifdef SYS_flistxattr
    case SYS_flistxattr:
#endif
#ifdef SYS_getdents64
    case SYS_getdents64:
#endif
#ifdef SYS_getdents
    case SYS_getdents:
#endif
#ifdef SYS_inotify_add_watch
    case SYS_inotify_add_watch:
#endif
#ifdef SYS_inotify_rm_watch
    case SYS_inotify_rm_watch:
#endif
#ifdef SYS_timerfd_gettime
    case SYS_timerfd_gettime:
#endif
#ifdef SYS_sync_file_range
    case SYS_sync_file_range:
#endif
#ifdef SYS_fallocate
    case SYS_fallocate:
#endif
#ifdef SYS_syncfs
    case SYS_syncfs:
#endif
#ifdef SYS_bind
    case SYS_bind:
#endif
#ifdef SYS_connect
    case SYS_connect:
#endif
#ifdef SYS_listen
    case SYS_listen:
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
#ifdef SYS_epoll_pwait
    case SYS_epoll_pwait:
#endif
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
#ifdef SYS_timerfd_settime
    case SYS_timerfd_settime:
#endif
#ifdef SYS_signalfd
    case SYS_signalfd: /* of a number: host_fds_syscall_kind makes -1's a creation */
#endif
#ifdef SYS_signalfd4
    case SYS_signalfd4:
#endif
#ifdef SYS_fsconfig
    case SYS_fsconfig:
#endif
        return (int)a[0];
#ifdef SYS_move_mount
    case SYS_move_mount:
        return host_fds_either(
                host_fds_at_fd((int)a[0], (const char *)a[1],
                               (a[4] & HOST_FDS_MOVE_MOUNT_F_EMPTY) ? AT_EMPTY_PATH : 0),
                host_fds_at_fd((int)a[2], (const char *)a[3],
                               (a[4] & HOST_FDS_MOVE_MOUNT_T_EMPTY) ? AT_EMPTY_PATH : 0));
#endif
#ifdef SYS_mount_setattr
    case SYS_mount_setattr:
#endif
#ifdef SYS_getxattrat
    case SYS_getxattrat:
#endif
#ifdef SYS_setxattrat
    case SYS_setxattrat:
#endif
#ifdef SYS_listxattrat
    case SYS_listxattrat:
#endif
#ifdef SYS_removexattrat
    case SYS_removexattrat:
#endif
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[2]);
#ifdef SYS_file_getattr
    case SYS_file_getattr:
    case SYS_file_setattr:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[4]);
#endif
#ifdef SYS_tee
    case SYS_tee:
        return host_fds_either((int)a[0], (int)a[1]);
#endif
#ifdef SYS_copy_file_range
    case SYS_copy_file_range:
        return host_fds_either((int)a[0], (int)a[2]);
#endif
#ifdef SYS_epoll_ctl
    case SYS_epoll_ctl:
        return host_fds_either((int)a[0], (int)a[2]);
#endif
#ifdef SYS_fanotify_mark
    case SYS_fanotify_mark:
        return host_fds_either((int)a[0],
                               a[4] == 0 ? (int)a[3]
                                         : host_fds_at_fd((int)a[3], (const char *)a[4], 0));
#endif
#ifdef SYS_utimensat
    case SYS_utimensat: /* a NULL path: the fd itself (futimens) */
        return a[1] == 0 ? (int)a[0] : host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[3]);
#endif
#ifdef SYS_futimesat
    case SYS_futimesat:
        return a[1] == 0 ? (int)a[0] : host_fds_at_fd((int)a[0], (const char *)a[1], 0);
#endif
#ifdef SYS_mkdirat
    case SYS_mkdirat:
#endif
#ifdef SYS_unlinkat
    case SYS_unlinkat:
#endif
#ifdef SYS_mknodat
    case SYS_mknodat:
#endif
#ifdef SYS_faccessat
    case SYS_faccessat:
#endif
        return host_fds_at_fd((int)a[0], (const char *)a[1], 0);
#ifdef SYS_readlinkat
    case SYS_readlinkat: /* an empty path reads the fd's own link */
        return host_fds_at_fd((int)a[0], (const char *)a[1], AT_EMPTY_PATH);
#endif
#ifdef SYS_faccessat2
    case SYS_faccessat2:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[3]);
#endif
#ifdef SYS_name_to_handle_at
    case SYS_name_to_handle_at:
#endif
#ifdef SYS_execveat
    case SYS_execveat:
#endif
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[4]);
#ifdef SYS_symlinkat
    case SYS_symlinkat:
        return host_fds_at_fd((int)a[1], (const char *)a[2], 0);
#endif
#ifdef SYS_renameat
    case SYS_renameat:
#endif
#ifdef SYS_renameat2
    case SYS_renameat2:
#endif
        return host_fds_either(host_fds_at_fd((int)a[0], (const char *)a[1], 0),
                               host_fds_at_fd((int)a[2], (const char *)a[3], 0));
#ifdef SYS_linkat
    case SYS_linkat:
        return host_fds_either(host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[4]),
                               host_fds_at_fd((int)a[2], (const char *)a[3], 0));
#endif
#ifdef SYS_splice
    case SYS_splice:
        return host_fds_either((int)a[0], (int)a[2]);
#endif
#ifdef SYS_sendfile
    case SYS_sendfile:
        return host_fds_either((int)a[1], (int)a[0]);
#endif
#ifdef SYS_fchmodat
    case SYS_fchmodat:
        return host_fds_at_fd((int)a[0], (const char *)a[1], 0);
#endif
#ifdef HOST_FDS_SYS_FCHMODAT2
    case HOST_FDS_SYS_FCHMODAT2:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[3]);
#endif
#ifdef SYS_fchownat
    case SYS_fchownat:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[4]);
#endif
#ifdef SYS_mmap
    case SYS_mmap:
        return (a[3] & MAP_ANONYMOUS) ? -1 : (int)a[4];
#endif
#ifdef SYS_newfstatat
    case SYS_newfstatat:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[3]);
#endif
#ifdef SYS_statx
    case SYS_statx:
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[2]);
#endif
    default:
        return -1;
    }
}

/* One switch on the number, syscall()'s whole dispatch among the fd calls: a system call whose
 * result is a new fd when it succeeds (seccomp's only with SECCOMP_FILTER_FLAG_NEW_LISTENER, its
 * notification listener; landlock_create_ruleset's only without flags: with
 * LANDLOCK_CREATE_RULESET_VERSION or _ERRATA it is a number, never moved), the closes and dups,
 * fcntl only for F_DUPFD and F_DUPFD_CLOEXEC (every other command passes through, as fcntl's
 * interposer passes it), and the receives. The names some architectures lack (open, pipe, dup2:
 * arm64) are tested for. */
static int
host_fds_syscall_kind(long n, const long a[6])
{
    switch (n) {
    case SYS_close:
        return HOST_FDS_SYS_CLOSE;
#ifdef SYS_close_range
    case SYS_close_range:
        return HOST_FDS_SYS_CLOSE_RANGE;
#endif
#ifdef SYS_dup2
    case SYS_dup2:
        return HOST_FDS_SYS_DUP2;
#endif
    case SYS_dup3:
        return HOST_FDS_SYS_DUP3;
    case SYS_fcntl:
        if ((int)a[1] == F_DUPFD || (int)a[1] == F_DUPFD_CLOEXEC) {
            return HOST_FDS_SYS_DUPFD;
        }
        return HOST_FDS_FCNTL_SLOW((int)a[0]) ? HOST_FDS_SYS_FCNTL : HOST_FDS_SYS_NONE;
#ifdef SYS_recvmsg
    case SYS_recvmsg:
        return HOST_FDS_SYS_RECVMSG;
#endif
#ifdef SYS_recvmmsg
    case SYS_recvmmsg:
        return HOST_FDS_SYS_RECVMMSG;
#endif
#ifdef SYS_io_uring_enter
    case SYS_io_uring_enter: /* the ring's fd, and the entries it submits (uring.c) */
    case SYS_io_uring_register:
        return HOST_FDS_SYS_URING;
#endif
#if defined(SYS_seccomp) && defined(SECCOMP_FILTER_FLAG_NEW_LISTENER)
    case SYS_seccomp:
        return a[0] == SECCOMP_SET_MODE_FILTER && (a[1] & SECCOMP_FILTER_FLAG_NEW_LISTENER)
                       ? HOST_FDS_SYS_ONE
                       : HOST_FDS_SYS_NONE;
#endif
#ifdef SYS_landlock_create_ruleset
    case SYS_landlock_create_ruleset:
        return (unsigned)a[2] == 0 ? HOST_FDS_SYS_ONE : HOST_FDS_SYS_NONE;
#endif
#ifdef SYS_open
    case SYS_open:
#endif
#ifdef SYS_creat
    case SYS_creat:
#endif
#ifdef SYS_eventfd
    case SYS_eventfd:
#endif
#ifdef SYS_epoll_create
    case SYS_epoll_create:
#endif
#ifdef SYS_inotify_init
    case SYS_inotify_init:
#endif
#ifdef SYS_accept
    case SYS_accept:
#endif
#ifdef SYS_openat2
    case SYS_openat2:
#endif
#ifdef SYS_pidfd_open
    case SYS_pidfd_open:
#endif
#ifdef SYS_pidfd_getfd
    case SYS_pidfd_getfd:
#endif
#ifdef SYS_io_uring_setup
    case SYS_io_uring_setup:
#endif
#ifdef SYS_userfaultfd
    case SYS_userfaultfd:
#endif
#ifdef SYS_fsopen
    case SYS_fsopen:
    case SYS_fsmount:
    case SYS_fspick:
    case SYS_open_tree:
#endif
#ifdef SYS_memfd_secret
    case SYS_memfd_secret:
#endif
#ifdef HOST_FDS_SYS_OPEN_TREE_ATTR
    case HOST_FDS_SYS_OPEN_TREE_ATTR:
#endif
    case SYS_openat:
    case SYS_open_by_handle_at:
    case SYS_dup:
    case SYS_memfd_create:
    case SYS_eventfd2:
    case SYS_epoll_create1:
    case SYS_socket:
    case SYS_accept4:
    case SYS_timerfd_create:
    case SYS_inotify_init1:
    case SYS_fanotify_init:
    case SYS_perf_event_open:
    case SYS_mq_open:
        return HOST_FDS_SYS_ONE;
#ifdef SYS_signalfd
    case SYS_signalfd:
#endif
    case SYS_signalfd4:
        if ((int)a[0] == -1) {
            return HOST_FDS_SYS_ONE;
        }
        return HOST_FDS_FCNTL_SLOW((int)a[0]) ? HOST_FDS_SYS_FCNTL : HOST_FDS_SYS_NONE;
    case SYS_bpf:
        return host_fds_bpf_creates(a[0]);
#ifdef SYS_pipe
    case SYS_pipe:
#endif
    case SYS_pipe2:
        return HOST_FDS_SYS_PIPE;
    case SYS_socketpair:
        return HOST_FDS_SYS_SOCKETPAIR;
    default: {
        int fd = host_fds_syscall_on_fd(n, a);

        return fd >= 0 && HOST_FDS_FCNTL_SLOW(fd) ? HOST_FDS_SYS_FCNTL : HOST_FDS_SYS_NONE;
    }
    }
}

static long host_fds_syscall_fd(host_syscall_fn real, long n, const long a[6], int kind,
                                const void *ra, uint64_t fa);

/*
 * For a refused syscall() of the calls that check other arguments before their fd (as their
 * interposers: HOST_FD_NEVER): a's copy in b with HOST_FD_NEVER for each library fd among the
 * call's fd arguments (one the kernel does not look at, an absolute path's dirfd, is not read
 * either way). 1 when n is such a call, else 0 (the refusal's EBADF stands: the call looks at its
 * fd first).
 */
static int
host_fds_syscall_never(long n, const long a[6], long b[6])
{
    int at[2] = { 0, -1 };

    switch (n) {
#ifdef SYS_signalfd
    case SYS_signalfd:
#endif
    case SYS_signalfd4:
#ifdef SYS_timerfd_settime
    case SYS_timerfd_settime:
#endif
#ifdef SYS_fsconfig
    case SYS_fsconfig:
    case SYS_fsmount:
    case SYS_open_tree:
    case SYS_fspick:
#endif
#ifdef SYS_mount_setattr
    case SYS_mount_setattr:
#endif
#ifdef HOST_FDS_SYS_OPEN_TREE_ATTR
    case HOST_FDS_SYS_OPEN_TREE_ATTR:
#endif
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
    case SYS_epoll_pwait:
    case SYS_openat:
#ifdef SYS_openat2
    case SYS_openat2:
#endif
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_preadv:
    case SYS_pwritev:
    case SYS_preadv2:
    case SYS_pwritev2:
    case SYS_fgetxattr:
    case SYS_fsetxattr:
#ifdef SYS_newfstatat
    case SYS_newfstatat:
#endif
    case SYS_statx:
    case SYS_faccessat:
#ifdef SYS_faccessat2
    case SYS_faccessat2:
#endif
    case SYS_fchmodat:
#ifdef HOST_FDS_SYS_FCHMODAT2
    case HOST_FDS_SYS_FCHMODAT2:
#endif
    case SYS_fchownat:
    case SYS_unlinkat:
    case SYS_utimensat:
    case SYS_name_to_handle_at:
    case SYS_readlinkat:
    case SYS_mknodat:
    case SYS_execveat:
    case SYS_vmsplice:
    case SYS_inotify_add_watch:
        break;
    case SYS_sendfile:
    case SYS_tee:
        at[1] = 1;
        break;
#ifdef SYS_move_mount
    case SYS_move_mount:
#endif
    case SYS_linkat:
    case SYS_renameat2:
    case SYS_splice:
    case SYS_epoll_ctl:
        at[1] = 2;
        break;
    case SYS_fanotify_mark:
        at[1] = 3;
        break;
#ifdef SYS_mmap
    case SYS_mmap:
        at[0] = 4;
        break;
#endif
    default:
        return 0;
    }
    memcpy(b, a, 6 * sizeof(long));
    for (int i = 0; i < 2; i++) {
        if (at[i] >= 0 && host_fd_is_library((int)a[at[i]])) {
            b[at[i]] = HOST_FD_NEVER;
        }
    }
    return 1;
}

_Atomic(host_ns_syscall_fn) host_ns_syscall_installed;

/* host_fds_unshare_files' call for syscall()'s SYS_unshare, real being libc's syscall(). */
static long
host_fds_syscall_call(void *real, long n, const long a[6])
{
    return ((host_syscall_fn)real)(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* Six arguments are read whatever the call takes, as libc's syscall() passes six registers: the
 * last ones may lie past what the caller pushed (AddressSanitizer would call that a stack
 * underflow; the memory is the caller's stack, and the values are never used). */
HOST_EXPORT __attribute__((no_sanitize_address)) long
syscall(long n, ...)
{
    host_syscall_fn real = HOST_REAL(host_syscall_fn, syscall);
    long a[6];
    va_list ap;
    int i, kind;

    va_start(ap, n);
    for (i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
#ifdef SYS_seccomp
    if (n == SYS_seccomp) { /* seccomp.c: the library stops before a filter is installed */
        host_seccomp_fn before = atomic_load_explicit(&host_seccomp_hook, memory_order_acquire);

        if (before != NULL) {
            before(a[0], (unsigned long)a[1], (const void *)a[2]);
        }
    }
#endif
    if (n == SYS_unshare || n == SYS_setns) {
        host_ns_syscall_fn ns =
                atomic_load_explicit(&host_ns_syscall_installed, memory_order_acquire);

        if (ns != NULL) {
            return ns(real, n, a, __builtin_return_address(0));
        }
        if (n == SYS_unshare && (a[0] & CLONE_FILES)) {
            return host_fds_unshare_files(host_fds_syscall_call, (void *)real, n, a,
                                          __builtin_return_address(0));
        }
    }
    kind = host_fds_syscall_kind(n, a);
    if (kind != HOST_FDS_SYS_NONE) {
        long rc = host_fds_syscall_fd(real, n, a, kind, __builtin_return_address(0), HOST_FA);

        HOST_NO_TAIL_CALL(); /* a receive's wait records the stack from this frame */
        return rc;
    }
#ifdef SYS_getdents64
    if (n == SYS_getdents64) { /* the host's listing of its fd directory: getdents64's */
        long rc;
        unsigned since;

        do {
            since = host_fds_listing_begins();
            rc = real(n, a[0], a[1], a[2], 0, 0, 0);
        } while (rc > 0 && (rc = host_fds_dents_kept((int)a[0], (void *)a[1], rc, since,
                                                     __builtin_return_address(0))) == 0);
        return rc;
    }
#endif
    if (HOST_SYSCALL_IS_SEND(n) && !host_fds_library_call(__builtin_return_address(0))) {
        return host_syscall_send(real, n, a); /* signals.c; the agent's own sends go as they are */
    }
    if (host_syscall_is_wait(n, a)) {
        long rc = host_syscall_wait(real, n, a, HOST_FA);

        HOST_NO_TAIL_CALL();
        return rc;
    }
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* syscall(SYS_close): libuv closes its fds so; a host's raw close of a library fd gets the EBADF
 * of close(). */
static long
host_fds_syscall_close(host_syscall_fn real, int fd, const void *ra)
{
    long rc = -1;

    if (host_fds_sealed_call(fd, ra)) {
        return 0; /* libuv's, after a seccomp filter: no system call (internal.h) */
    }
    if (host_fds_library_call(ra)) {
        if (host_fd_is_owned(fd)) {
            return host_fds_close_library(fd, real);
        }
        return real(SYS_close, fd, 0, 0, 0, 0, 0);
    }
    host_fds_gate_host_enter();
    if (host_fd_is_owned(fd)) {
        host_fds_close_copy(fd);
        errno = EBADF;
    } else {
        rc = real(SYS_close, fd, 0, 0, 0, 0, 0);
        host_uring_closed(fd, fd);
    }
    host_fds_gate_host_leave();
    return rc;
}

static int
host_close_range_raw(unsigned lo, unsigned hi, int flags)
{
    static _Atomic(void *) real_close_range;
    int (*real)(unsigned, unsigned, int) = HOST_REAL(int (*)(unsigned, unsigned, int), close_range);
    host_syscall_fn raw = HOST_REAL(host_syscall_fn, syscall);

    if (real != NULL) {
        return real(lo, hi, flags);
    }
    if (raw == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return (int)raw(SYS_close_range, (long)lo, (long)hi, (long)flags, 0, 0, 0);
}

/* The numbers below the library's base that a close_range around its fds left open (a library
 * creation's low moment, or a library fd that stays low), up to HOST_FDS_KEPT_LOW; n counts them
 * all, past the array too. */
#define HOST_FDS_KEPT_LOW 16
struct host_fds_kept {
    unsigned fd[HOST_FDS_KEPT_LOW];
    unsigned n;
};

/* close_range over [lo, hi] without the library's fds: the pieces between them; the numbers below
 * the library's base that it leaves open go to *kept when not NULL. */
static int
host_close_range_around(unsigned lo, unsigned hi, int flags, struct host_fds_kept *kept)
{
    unsigned fd = lo, base = kept != NULL ? (unsigned)host_fds_base() : 0;
    int rc = 0, err = 0;

    if (lo > hi) {
        errno = EINVAL;
        return -1;
    }
    while (atomic_load_explicit(&host_fds_count, memory_order_acquire) > 0 && fd < HOST_FDS_MAX &&
           fd <= hi) {
        unsigned next = fd;

        while (next < HOST_FDS_MAX && next <= hi && !host_fd_is_owned((int)next)) {
            next++;
        }
        if (next >= HOST_FDS_MAX || next > hi) {
            break;
        }
        if (next > fd && host_close_range_raw(fd, next - 1, flags) != 0 && rc == 0) {
            rc = -1;
            err = errno;
        }
        if (kept != NULL && next < base) {
            if (kept->n < HOST_FDS_KEPT_LOW) {
                kept->fd[kept->n] = next;
            }
            kept->n++;
        }
        fd = next + 1;
        if (fd == 0) {
            return rc; /* wrapped */
        }
    }
    if (fd <= hi && host_close_range_raw(fd, hi, flags) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        errno = err;
    }
    return rc;
}

/*
 * After a host's close_range with CLOSE_RANGE_UNSHARE: the numbers below the library's base that
 * it left open (kept) are closed in the caller's new table where they are no longer the
 * library's there. Such a number was a library creation's low number, marked when the range
 * looked at it: its creator (a thread of the process's table) moves it high and closes it there
 * only, so the private table's copy at that low number was nobody's, and the host's next
 * creations there got the number after it ("pipe: fds 4 5" where bare gets "3 4",
 * host-contract-fds-unshare-low in wall mode, when the gate's bound ran out under load). Past the
 * unshare host_fd_is_owned answers for the caller's table: a low mark of another table's thread
 * is not the library's here (kcmp), nor a number whose mark was cleared; a library fd that stays
 * low in every table (no number free high) is, and stays, as a slot-less mark does. Too many kept
 * to list (kept->n past the array): every such number below the base is looked at. The close is
 * the raw system call: a sanitizer's fd model has one table, where the number is still the
 * creator's until its own close.
 */
static void
host_fds_unshared_low(unsigned lo, unsigned hi, const struct host_fds_kept *kept)
{
    unsigned i, n = kept->n, base = (unsigned)host_fds_base();
    int err = errno;

    if (n > HOST_FDS_KEPT_LOW) {
        for (i = lo; i <= hi && i < base && i < HOST_FDS_MAX; i++) {
            if (!host_fd_is_owned((int)i)) {
                (void)host_raw_syscall(SYS_close, (long)i, 0, 0, 0, 0, 0);
            }
        }
    } else {
        for (i = 0; i < n; i++) {
            if (!host_fd_is_owned((int)kept->fd[i])) {
                (void)host_raw_syscall(SYS_close, (long)kept->fd[i], 0, 0, 0, 0, 0);
            }
        }
    }
    errno = err;
}

/*
 * The marks before an unshare are HOST_FDS_WORDS words (8 KiB): mapped for the call
 * (host_scratch_map), not taken from the caller's stack, which may be a small alternate one (an
 * async-signal-safe call in a handler). Where the mapping fails, a spare in the library's data,
 * one caller at a time.
 */
static uint64_t host_fds_marks_spare[HOST_FDS_WORDS];
static atomic_flag host_fds_marks_spare_busy = ATOMIC_FLAG_INIT;

static uint64_t *
host_fds_marks_get(void)
{
    uint64_t *p = host_scratch_map(sizeof(host_fds_marks_spare));

    if (p != NULL) {
        return p;
    }
    while (atomic_flag_test_and_set_explicit(&host_fds_marks_spare_busy, memory_order_acquire)) {
        host_raw_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
    }
    return host_fds_marks_spare;
}

static void
host_fds_marks_put(uint64_t *marks)
{
    if (marks == host_fds_marks_spare) {
        atomic_flag_clear_explicit(&host_fds_marks_spare_busy, memory_order_release);
    } else {
        host_scratch_unmap(marks, sizeof(host_fds_marks_spare));
    }
}

/* The marks of the moment before a host thread's unshare of its fd table, into before. */
static void
host_fds_marks_before_unshare(uint64_t *before)
{
    for (int i = 0; i < HOST_FDS_WORDS; i++) {
        before[i] = atomic_load_explicit(&host_fds_owned[i], memory_order_acquire);
    }
}

/* After a host thread's unshare that kept the numbers of kept in [lo, hi] below the library's
 * base: their copies closed where they are not the library's (host_fds_unshared_low, before the
 * record, which holds no low number), and the record of the library's copies made. */
static void
host_fds_unshared_now(const uint64_t *before, unsigned lo, unsigned hi,
                      const struct host_fds_kept *kept)
{
    if (kept->n > 0) {
        host_fds_unshared_low(lo, hi, kept);
    }
    host_fds_unshared_record(before);
}

/*
 * unshare(2) with CLONE_FILES (libc's unshare, ns.c; syscall()'s, ns.c or fds.c's syscall() before
 * ns.c's hook is installed): the calling thread's new table is a copy of the process's, as after
 * close_range's CLOSE_RANGE_UNSHARE with nothing closed, and is recorded the same way (above): the
 * copies of the library's fds stay the library's in that table after the library closes its own,
 * and the copy of a library creation's low number is closed there. In the gate, as a host's close
 * is, so that a creation's low moment is rarely met. call(real, n, a) makes the system call; the
 * library's own (ra its) passes as it is.
 */
long
host_fds_unshare_files(long (*call)(void *, long, const long[6]), void *real, long n,
                       const long a[6], const void *ra)
{
    uint64_t *before;
    struct host_fds_kept kept = { .n = 0 };
    unsigned base;
    long rc;
    int err;

    if (host_fds_library_call(ra)) {
        return call(real, n, a);
    }
    host_fds_gate_host_enter();
    before = host_fds_marks_get();
    host_fds_marks_before_unshare(before);
    rc = call(real, n, a);
    err = errno;
    if (rc == 0) {
        base = (unsigned)host_fds_base();
        for (unsigned fd = 0; fd < base && fd < HOST_FDS_MAX; fd++) {
            if ((before[fd / 64] >> (fd % 64)) & 1u) {
                if (kept.n < HOST_FDS_KEPT_LOW) {
                    kept.fd[kept.n] = fd;
                }
                kept.n++;
            }
        }
        host_fds_unshared_now(before, 0, base > 0 ? base - 1 : 0, &kept);
    }
    host_fds_marks_put(before);
    host_fds_gate_host_leave();
    errno = err;
    return rc;
}

/* close_range of the caller whose return address is ra (the interposer's, syscall()'s): the
 * host's in the gate and around the library's fds, the library's as it is. */
static int
host_fds_close_range(unsigned lo, unsigned hi, int flags, const void *ra)
{
    struct host_fds_kept kept = { .n = 0 };
    int rc;

    if (host_fds_library_call(ra)) {
        return host_close_range_raw(lo, hi, flags);
    }
    host_fds_gate_host_enter();
    if (flags & CLOSE_RANGE_UNSHARE) {
        uint64_t *before = host_fds_marks_get();
        int err;

        host_fds_marks_before_unshare(before);
        rc = host_close_range_around(lo, hi, flags, &kept);
        err = errno;
        if (rc != 0) {
            kept.n = 0;
        }
        host_fds_unshared_now(before, lo, hi, &kept);
        host_fds_marks_put(before);
        errno = err;
    } else {
        rc = host_close_range_around(lo, hi, flags, &kept);
    }
    if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
        host_uring_closed((int)(lo > INT_MAX ? INT_MAX : lo), (int)(hi > INT_MAX ? INT_MAX : hi));
    }
    host_fds_gate_host_leave();
    return rc;
}

HOST_EXPORT int
close_range(unsigned lo, unsigned hi, int flags)
{
    return host_fds_close_range(lo, hi, flags, __builtin_return_address(0));
}

HOST_EXPORT void
closefrom(int lo)
{
    int fd, max;

    if (lo < 0) {
        lo = 0;
    }
    host_fds_gate_host_enter();
    host_uring_closed(lo, INT_MAX);
    if (host_close_range_around((unsigned)lo, ~0U, 0, NULL) != 0) {
        /* No close_range (a kernel before 5.9): one by one, as glibc's fallback would. */
        max = (int)sysconf(_SC_OPEN_MAX);
        for (fd = lo; fd < max; fd++) {
            if (!host_fd_is_owned(fd)) {
                host_fds_close_real(fd);
            }
        }
    }
    host_fds_gate_host_leave();
}

static _Atomic(void (*)(int)) host_fds_taken;

void
host_fds_set_taken(void (*taken)(int fd))
{
    atomic_store_explicit(&host_fds_taken, taken, memory_order_release);
}

/* The host takes newfd: a library fd there must go first (host_fds_set_taken). */
static void
host_fds_yield(int newfd, const void *ra)
{
    void (*taken)(int);

    if (!host_fd_is_owned(newfd) || host_fds_library_call(ra)) {
        return;
    }
    if (host_fds_table_private()) {
        /* a copy in the caller's own table (its unshare's): the library's fd at newfd, in its
         * table, stays; the host's dup replaces the copy only, and the number is the host's there
         */
        host_fds_unshared_drop(newfd);
        return;
    }
    taken = atomic_load_explicit(&host_fds_taken, memory_order_acquire);
    if (taken != NULL) {
        taken(newfd);
    }
    host_fd_forget(newfd); /* whatever still holds it was told, or is gone */
}

/* 0 when the host's dup2 or dup3 of oldfd onto newfd may go ahead (a library fd at newfd was
 * given up); -1 with EBADF when oldfd is the library's, a number that was free in the bare run. */
static int
host_fds_dup_check(int oldfd, int newfd, const void *ra)
{
    int err = errno;

    if (host_fd_is_owned(oldfd) && !host_fds_library_call(ra)) {
        errno = EBADF;
        return -1;
    }
    host_fds_yield(newfd, ra);
    errno = err;
    return 0;
}

/*
 * The kernel answers EBUSY to a dup2 or dup3 onto a number another thread is opening at that
 * moment; the library's threads open files (and move them high) while the host's run, so the
 * host could see an EBUSY the bare run never would. Retried while it lasts (an open's moment).
 */
static int
host_fds_dup_retry(int rc, int (*again)(int, int, int), int oldfd, int newfd, int flags)
{
    int tries = 0;

    while (rc < 0 && errno == EBUSY && tries++ < 1000) {
        sched_yield();
        rc = again(oldfd, newfd, flags);
    }
    return rc;
}

static int
host_fds_dup2_once(int oldfd, int newfd, int flags)
{
    static _Atomic(void *) real_dup2;
    int (*real)(int, int) = HOST_REAL(int (*)(int, int), dup2);

    (void)flags;
    if (real != NULL) {
        return real(oldfd, newfd);
    }
#ifdef SYS_dup2
    return (int)syscall(SYS_dup2, oldfd, newfd);
#else /* aarch64 has dup3 only, which refuses oldfd == newfd where dup2 checks it */
    return oldfd == newfd ? (host_fds_fcntl(oldfd, F_GETFD, 0) < 0 ? -1 : newfd)
                          : (int)syscall(SYS_dup3, oldfd, newfd, 0);
#endif
}

static int
host_fds_dup3_once(int oldfd, int newfd, int flags)
{
    static _Atomic(void *) real_dup3;
    int (*real)(int, int, int) = HOST_REAL(int (*)(int, int, int), dup3);

    return real != NULL ? real(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

/* dup2 or dup3 (once: one of the two) of the host's, in the gate; the library's, as they are. */
static int
host_fds_dup(int (*once)(int, int, int), int oldfd, int newfd, int flags, const void *ra)
{
    int rc = -1, host = !host_fds_library_call(ra);

    if (host) {
        host_fds_gate_host_enter();
    }
    if (host_fds_dup_check(oldfd, newfd, ra) == 0) {
        rc = host_fds_dup_retry(once(oldfd, newfd, flags), once, oldfd, newfd, flags);
    }
    if (host && rc >= 0 && oldfd != newfd) {
        host_uring_closed(newfd, newfd); /* what it held is closed */
    }
    if (host) {
        host_fds_gate_host_leave();
    }
    return rc;
}

HOST_EXPORT int
dup2(int oldfd, int newfd)
{
    return host_fds_dup(host_fds_dup2_once, oldfd, newfd, 0, __builtin_return_address(0));
}

HOST_EXPORT int
dup3(int oldfd, int newfd, int flags)
{
    return host_fds_dup(host_fds_dup3_once, oldfd, newfd, flags, __builtin_return_address(0));
}

/*
 * The real functions of the creators below, resolved by host_fds_init (host_fds_resolve) before a
 * host's signal handler can call one (open, openat, creat, dup, socket, socketpair and pipe are
 * async-signal-safe; the first lookup of host_real takes the loader's lock).
 */
static _Atomic(void *) real_open_p, real_open64_p, real___open_2_p, real___open64_2_p,
        real_openat_p, real_openat64_p, real___openat_2_p, real___openat64_2_p, real_creat_p,
        real_creat64_p, real_dup_p, real_eventfd_p, real_epoll_create1_p, real_epoll_create_p,
        real_socket_p, real_socketpair_p, real_memfd_create_p, real_pipe_p, real_pipe2_p,
        real_fopen_p, real_fopen64_p, real_opendir_p, real_timerfd_create_p, real_signalfd_p,
        real_inotify_init_p, real_inotify_init1_p, real_pidfd_open_p, real_mkstemp_p,
        real_mkstemp64_p, real_mkostemp_p, real_mkostemp64_p, real_mkstemps_p, real_mkstemps64_p,
        real_mkostemps_p, real_mkostemps64_p, real_tmpfile_p, real_tmpfile64_p, real_freopen_p,
        real_freopen64_p, real_fcntl64_p, real_pidfd_getfd_p, real_posix_openpt_p, real_getpt_p,
        real_shm_open_p, real_mq_open_p, real_fanotify_init_p, real_open_by_handle_at_p,
        real_openpty_p, real_forkpty_p, real_popen_p, real_openlog_p, real_vsyslog_p,
        real___vsyslog_chk_p, real_fstatat_p, real_fstatat64_p, real_lseek_p, real_lseek64_p,
        real_fsync_p, real_fdatasync_p, real_fchmod_p, real_fchown_p, real_ftruncate_p,
        real_ftruncate64_p, real_flock_p, real_posix_fadvise_p, real_posix_fadvise64_p,
        real_shutdown_p, real_setsockopt_p, real_fchdir_p, real_statx_p, real_pread_p,
        real_pread64_p, real_readv_p, real_fstatfs_p, real_fstatfs64_p, real_fgetxattr_p,
        real___fxstat_p, real___fxstat64_p, real_fchmodat_p, real_fchownat_p, real_fsopen_p,
        real_open_tree_p, real_open_tree_attr_p, real_fspick_p, real_fsmount_p, real_mmap_p,
        real_mmap64_p;
static const struct {
    _Atomic(void *) *slot;
    const char *name;
} host_fds_reals[] = {
    { &real_open_p, "open" },
    { &real_open64_p, "open64" },
    { &real___open_2_p, "__open_2" },
    { &real___open64_2_p, "__open64_2" },
    { &real_openat_p, "openat" },
    { &real_openat64_p, "openat64" },
    { &real___openat_2_p, "__openat_2" },
    { &real___openat64_2_p, "__openat64_2" },
    { &real_creat_p, "creat" },
    { &real_creat64_p, "creat64" },
    { &real_dup_p, "dup" },
    { &real_eventfd_p, "eventfd" },
    { &real_epoll_create1_p, "epoll_create1" },
    { &real_epoll_create_p, "epoll_create" },
    { &real_socket_p, "socket" },
    { &real_socketpair_p, "socketpair" },
    { &real_memfd_create_p, "memfd_create" },
    { &real_pipe_p, "pipe" },
    { &real_pipe2_p, "pipe2" },
    { &real_fopen_p, "fopen" },
    { &real_fopen64_p, "fopen64" },
    { &real_opendir_p, "opendir" },
    { &real_timerfd_create_p, "timerfd_create" },
    { &real_signalfd_p, "signalfd" },
    { &real_inotify_init_p, "inotify_init" },
    { &real_inotify_init1_p, "inotify_init1" },
    { &real_pidfd_open_p, "pidfd_open" },
    { &real_mkstemp_p, "mkstemp" },
    { &real_mkstemp64_p, "mkstemp64" },
    { &real_mkostemp_p, "mkostemp" },
    { &real_mkostemp64_p, "mkostemp64" },
    { &real_mkstemps_p, "mkstemps" },
    { &real_mkstemps64_p, "mkstemps64" },
    { &real_mkostemps_p, "mkostemps" },
    { &real_mkostemps64_p, "mkostemps64" },
    { &real_tmpfile_p, "tmpfile" },
    { &real_tmpfile64_p, "tmpfile64" },
    { &real_freopen_p, "freopen" },
    { &real_freopen64_p, "freopen64" },
    { &real_fcntl_p, "fcntl" },
    { &real_fcntl64_p, "fcntl64" },
    { &real_pidfd_getfd_p, "pidfd_getfd" },
    { &real_posix_openpt_p, "posix_openpt" },
    { &real_getpt_p, "getpt" },
    { &real_shm_open_p, "shm_open" },
    { &real_mq_open_p, "mq_open" },
    { &real_fanotify_init_p, "fanotify_init" },
    { &real_open_by_handle_at_p, "open_by_handle_at" },
    { &real_openpty_p, "openpty" },
    { &real_forkpty_p, "forkpty" },
    { &real_popen_p, "popen" },
    { &real_openlog_p, "openlog" },
    { &real_vsyslog_p, "vsyslog" },
    { &real___vsyslog_chk_p, "__vsyslog_chk" },
    { &real_fstatat_p, "fstatat" },
    { &real_fstatat64_p, "fstatat64" },
    { &real_lseek_p, "lseek" },
    { &real_lseek64_p, "lseek64" },
    { &real_fsync_p, "fsync" },
    { &real_fdatasync_p, "fdatasync" },
    { &real_fchmod_p, "fchmod" },
    { &real_fchown_p, "fchown" },
    { &real_ftruncate_p, "ftruncate" },
    { &real_ftruncate64_p, "ftruncate64" },
    { &real_flock_p, "flock" },
    { &real_posix_fadvise_p, "posix_fadvise" },
    { &real_posix_fadvise64_p, "posix_fadvise64" },
    { &real_shutdown_p, "shutdown" },
    { &real_setsockopt_p, "setsockopt" },
    { &real_fchdir_p, "fchdir" },
    { &real_statx_p, "statx" },
    { &real_pread_p, "pread" },
    { &real_pread64_p, "pread64" },
    { &real_readv_p, "readv" },
    { &real_fstatfs_p, "fstatfs" },
    { &real_fstatfs64_p, "fstatfs64" },
    { &real_fgetxattr_p, "fgetxattr" },
    { &real___fxstat_p, "__fxstat" },
    { &real___fxstat64_p, "__fxstat64" },
    { &real_fchmodat_p, "fchmodat" },
    { &real_fchownat_p, "fchownat" },
    { &real_fsopen_p, "fsopen" },
    { &real_open_tree_p, "open_tree" },
    { &real_open_tree_attr_p, "open_tree_attr" },
    { &real_fspick_p, "fspick" },
    { &real_fsmount_p, "fsmount" },
    { &real_mmap_p, "mmap" }, /* read without host_real: host_fds_mmap */
    { &real_mmap64_p, "mmap64" },
};

static void
host_fds_resolve(void)
{
    size_t i;

    for (i = 0; i < sizeof(host_fds_reals) / sizeof(host_fds_reals[0]); i++) {
        (void)host_real(host_fds_reals[i].slot, host_fds_reals[i].name);
    }
}

#define HOST_FDS_REAL(type, name) ((type)host_real(&real_##name##_p, #name))

/* Around the real call of a creator that makes one fd: the library's moves high, the host's waits
 * for the moment and moves down if one met it anyway (host_fds_creating). */
#define HOST_FDS_CREATE(call)                                                     \
    do {                                                                          \
        unsigned entries_ = 0;                                                    \
        int library_ = host_fds_creating(__builtin_return_address(0), &entries_); \
                                                                                  \
        return host_fds_created_by(library_, entries_, (call));                   \
    } while (0)

/* HOST_FDS_CREATE for an interposer whose real is resolved: ENOSYS without it, and the host's
 * call fails with EBADF, as the data calls, when dirfd_at (an openat's dirfd for a relative path;
 * -1: none) is a library fd. */
#define HOST_FDS_CREATE_AT(dirfd_at, call)    \
    do {                                      \
        if (real == NULL) {                   \
            errno = ENOSYS;                   \
            return -1;                        \
        }                                     \
        if (HOST_FD_DATA_REFUSED(dirfd_at)) { \
            return -1;                        \
        }                                     \
        HOST_FDS_CREATE(call);                \
    } while (0)

/* HOST_FDS_CREATE_AT for an open of path at dirfd (AT_FDCWD: none): a path that names a library
 * fd in this process's fd directory gets ENOENT, as bare (host_fds_path_result, after the call: the
 * kernel read the path; an O_TRUNC open looks first, at a copy read without faulting, so that it
 * truncates nothing of the library's). */
#define HOST_FDS_CREATE_PATH(dirfd, path, flags, call)                                         \
    do {                                                                                       \
        const void *ra_ = __builtin_return_address(0);                                         \
        unsigned entries_ = 0;                                                                 \
        int library_;                                                                          \
        char path_[64];                                                                        \
                                                                                               \
        if (real == NULL) {                                                                    \
            errno = ENOSYS;                                                                    \
            return -1;                                                                         \
        }                                                                                      \
        if (((flags)&O_TRUNC) && host_fds_path_copy(path_, sizeof(path_), (path)) == 0 &&      \
            host_fds_path_hidden((dirfd), path_, 0, 0, ra_)) {                                 \
            errno = ENOENT;                                                                    \
            return -1;                                                                         \
        }                                                                                      \
        library_ = host_fds_creating(ra_, &entries_);                                          \
        return host_procstat_maybe(                                                            \
                host_fds_path_result((dirfd), (path),                                          \
                                     host_fds_created_by(library_, entries_, (call)), 1, ra_), \
                (path), (flags), ra_);                                                         \
    } while (0)

/* The mode argument of an open whose flags create a file; 0 otherwise. */
#define HOST_FDS_MODE(ap, flags) \
    ((flags)&O_CREAT) || ((flags)&O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0

/* open and open64 (one function in glibc on 64-bit targets, but both names are called), and
 * openat and openat64: glibc's open of a path goes to openat in some programs' builds. never is
 * HOST_FD_NEVER_AT for openat's dirfd (its flags are checked first: O_TMPFILE without a write
 * access, EINVAL), or nothing. */
#define HOST_FDS_OPENER(name, params, types, args, never, at) \
    HOST_EXPORT int name params                               \
    {                                                         \
        int(*real) types = HOST_FDS_REAL(int(*) types, name); \
        va_list ap;                                           \
        mode_t mode;                                          \
                                                              \
        va_start(ap, flags);                                  \
        mode = HOST_FDS_MODE(ap, flags);                      \
        va_end(ap);                                           \
        never;                                                \
        HOST_FDS_CREATE_PATH(at, path, flags, real args);     \
    }

HOST_FDS_OPENER(open, (const char *path, int flags, ...), (const char *, int, ...),
                (path, flags, mode), (void)0, AT_FDCWD)
HOST_FDS_OPENER(open64, (const char *path, int flags, ...), (const char *, int, ...),
                (path, flags, mode), (void)0, AT_FDCWD)
HOST_FDS_OPENER(openat, (int dirfd, const char *path, int flags, ...),
                (int, const char *, int, ...), (dirfd, path, flags, mode),
                HOST_FD_NEVER_AT(host_fds_at_fd(dirfd, path, 0), dirfd), dirfd)
HOST_FDS_OPENER(openat64, (int dirfd, const char *path, int flags, ...),
                (int, const char *, int, ...), (dirfd, path, flags, mode),
                HOST_FD_NEVER_AT(host_fds_at_fd(dirfd, path, 0), dirfd), dirfd)

/* An interposer of a call that returns one new fd (or -1); HOST_FDS_CREATOR_AT's looks at the
 * number dirfd_at first, as the data calls (an openat's dirfd for a relative path). */
#define HOST_FDS_CREATOR_AT(name, types, params, args, dirfd_at) \
    HOST_EXPORT int name params                                  \
    {                                                            \
        int(*real) types = HOST_FDS_REAL(int(*) types, name);    \
                                                                 \
        HOST_FDS_CREATE_AT(dirfd_at, real args);                 \
    }
#define HOST_FDS_CREATOR(name, types, params, args) \
    HOST_FDS_CREATOR_AT(name, types, params, args, -1)
/* HOST_FDS_CREATOR_AT for a call that checks its flags before its fd: a refused call is made with
 * HOST_FD_NEVER for fd, the parameter fd_at names when it is looked at (bare's errno). */
#define HOST_FDS_CREATOR_ON(name, types, params, args, fd_at, fd) \
    HOST_EXPORT int name params                                   \
    {                                                             \
        int(*real) types = HOST_FDS_REAL(int(*) types, name);     \
                                                                  \
        HOST_FD_NEVER_AT(fd_at, fd);                              \
        HOST_FDS_CREATE_AT(-1, real args);                        \
    }

/* The _FORTIFY_SOURCE forms of open and openat without a mode (libuv opens its spare /dev/null
 * so). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
/* The fortified opens, as HOST_FDS_OPENER's (their flags create no file). */
#define HOST_FDS_OPENER_2(name, types, params, args, never, at) \
    HOST_EXPORT int name params                                 \
    {                                                           \
        int(*real) types = HOST_FDS_REAL(int(*) types, name);   \
                                                                \
        never;                                                  \
        HOST_FDS_CREATE_PATH(at, path, flags, real args);       \
    }
HOST_FDS_OPENER_2(__open_2, (const char *, int), (const char *path, int flags), (path, flags),
                  (void)0, AT_FDCWD)
HOST_FDS_OPENER_2(__open64_2, (const char *, int), (const char *path, int flags), (path, flags),
                  (void)0, AT_FDCWD)
HOST_FDS_OPENER_2(__openat_2, (int, const char *, int), (int dirfd, const char *path, int flags),
                  (dirfd, path, flags), HOST_FD_NEVER_AT(host_fds_at_fd(dirfd, path, 0), dirfd),
                  dirfd)
HOST_FDS_OPENER_2(__openat64_2, (int, const char *, int), (int dirfd, const char *path, int flags),
                  (dirfd, path, flags), HOST_FD_NEVER_AT(host_fds_at_fd(dirfd, path, 0), dirfd),
                  dirfd)
HOST_FDS_CREATOR(creat, (const char *, mode_t), (const char *path, mode_t mode), (path, mode))
HOST_FDS_CREATOR(creat64, (const char *, mode_t), (const char *path, mode_t mode), (path, mode))
HOST_FDS_CREATOR(eventfd, (unsigned, int), (unsigned int initval, int flags), (initval, flags))
HOST_FDS_CREATOR(epoll_create1, (int), (int flags), (flags))
HOST_FDS_CREATOR(epoll_create, (int), (int size), (size))
HOST_FDS_CREATOR(socket, (int, int, int), (int domain, int type, int protocol),
                 (domain, type, protocol))
HOST_FDS_CREATOR(memfd_create, (const char *, unsigned), (const char *name, unsigned int flags),
                 (name, flags))

HOST_FDS_CREATOR(timerfd_create, (clockid_t, int), (clockid_t clock, int flags), (clock, flags))
HOST_FDS_CREATOR(inotify_init, (void), (void), ())
HOST_FDS_CREATOR(inotify_init1, (int), (int flags), (flags))
/* glibc 2.36's wrapper: a libc without it leaves the name to the host's own (ENOSYS here) */
int pidfd_open(pid_t pid, unsigned int flags);
HOST_FDS_CREATOR(pidfd_open, (pid_t, unsigned), (pid_t pid, unsigned int flags), (pid, flags))
/* A pseudo-terminal's master and a POSIX shared memory object: opened inside libc. */
HOST_FDS_CREATOR(posix_openpt, (int), (int flags), (flags))
HOST_FDS_CREATOR(getpt, (void), (void), ())
HOST_FDS_CREATOR(shm_open, (const char *, int, mode_t), (const char *name, int flags, mode_t mode),
                 (name, flags, mode))
/* fanotify's group and a file opened by its handle: system calls that may need privileges (the
 * host's EPERM is libc's). */
HOST_FDS_CREATOR(fanotify_init, (unsigned, unsigned), (unsigned flags, unsigned event_f_flags),
                 (flags, event_f_flags))
HOST_FDS_CREATOR(open_by_handle_at, (int, struct file_handle *, int),
                 (int mount_fd, struct file_handle *handle, int flags), (mount_fd, handle, flags))
/* glibc 2.36's mount calls that make an fd: an fs context, a mount's tree; open_tree and fspick
 * on their dirfd as openat (a relative path, or an empty one with their flag for it), fsmount on
 * its fs context's number. glibc before 2.36 has none of them: the host's own then (ENOSYS here).
 */
int open_tree(int dfd, const char *path, unsigned int flags);
int fspick(int dfd, const char *path, unsigned int flags);
int fsmount(int fd, unsigned int flags, unsigned int attr_flags);
int fsopen(const char *fs_name, unsigned int flags);
HOST_FDS_CREATOR(fsopen, (const char *, unsigned), (const char *fs_name, unsigned int flags),
                 (fs_name, flags))
HOST_FDS_CREATOR_ON(open_tree, (int, const char *, unsigned),
                    (int dfd, const char *path, unsigned int flags), (dfd, path, flags),
                    host_fds_at_fd(dfd, path, (int)flags), dfd)
/* glibc 2.42's open_tree_attr: open_tree's with a mount's attributes (a kernel before 6.15 answers
 * ENOSYS; a glibc before 2.42 has none: the host's own then). Its flags are checked before its
 * dfd, as open_tree's. */
struct mount_attr;
int open_tree_attr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                   size_t size);
HOST_FDS_CREATOR_ON(open_tree_attr, (int, const char *, unsigned, struct mount_attr *, size_t),
                    (int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                     size_t size),
                    (dfd, path, flags, attr, size), host_fds_at_fd(dfd, path, (int)flags), dfd)
HOST_FDS_CREATOR_ON(fspick, (int, const char *, unsigned),
                    (int dfd, const char *path, unsigned int flags), (dfd, path, flags),
                    host_fds_at_fd(dfd, path, flags &HOST_FDS_FSPICK_EMPTY ? AT_EMPTY_PATH : 0),
                    dfd)
HOST_FDS_CREATOR_ON(fsmount, (int, unsigned, unsigned),
                    (int fd, unsigned int flags, unsigned int attr_flags), (fd, flags, attr_flags),
                    fd, fd)

/* A POSIX message queue's descriptor is an fd; its mode and attributes are read only with
 * O_CREAT, as libc reads them. */
HOST_EXPORT mqd_t
mq_open(const char *name, int flags, ...)
{
    mqd_t (*real)(const char *, int, ...) =
            HOST_FDS_REAL(mqd_t(*)(const char *, int, ...), mq_open);
    struct mq_attr *attr = NULL;
    mode_t mode = 0;
    va_list ap;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (flags & O_CREAT) {
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        attr = va_arg(ap, struct mq_attr *);
        va_end(ap);
    }
    HOST_FDS_CREATE(real(name, flags, mode, attr));
}

/* mkstemp and its kin open inside libc (no interposer sees it); the 64 names are what programs
 * built with _FILE_OFFSET_BITS=64 call. */
int mkstemp64(char *tmpl);
int mkostemp64(char *tmpl, int flags);
int mkstemps64(char *tmpl, int suffixlen);
int mkostemps64(char *tmpl, int suffixlen, int flags);
HOST_FDS_CREATOR(mkstemp, (char *), (char *tmpl), (tmpl))
HOST_FDS_CREATOR(mkstemp64, (char *), (char *tmpl), (tmpl))
HOST_FDS_CREATOR(mkostemp, (char *, int), (char *tmpl, int flags), (tmpl, flags))
HOST_FDS_CREATOR(mkostemp64, (char *, int), (char *tmpl, int flags), (tmpl, flags))
HOST_FDS_CREATOR(mkstemps, (char *, int), (char *tmpl, int suffixlen), (tmpl, suffixlen))
HOST_FDS_CREATOR(mkstemps64, (char *, int), (char *tmpl, int suffixlen), (tmpl, suffixlen))
HOST_FDS_CREATOR(mkostemps, (char *, int, int), (char *tmpl, int suffixlen, int flags),
                 (tmpl, suffixlen, flags))
HOST_FDS_CREATOR(mkostemps64, (char *, int, int), (char *tmpl, int suffixlen, int flags),
                 (tmpl, suffixlen, flags))

/* signalfd makes an fd only when given -1; with an fd of the caller's it changes that one's mask.
 */
HOST_EXPORT int
signalfd(int fd, const sigset_t *mask, int flags)
{
    int (*real)(int, const sigset_t *, int) =
            HOST_FDS_REAL(int (*)(int, const sigset_t *, int), signalfd);

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (fd != -1) {
        /* the host's on a library fd would set that signalfd's mask: bare's EBADF (or EINVAL
         * first, for bad flags) */
        return real(HOST_FD_DATA_REFUSED(fd) ? HOST_FD_NEVER : fd, mask, flags);
    }
    HOST_FDS_CREATE(real(fd, mask, flags));
}

/*
 * fcntl and fcntl64 (what programs built with _FILE_OFFSET_BITS=64 call): every command but
 * F_DUPFD and F_DUPFD_CLOEXEC passes straight through with its argument, read as libc reads it
 * (one word: an int or a pointer, per command). F_DUPFD* is dup's: the host's waits for the
 * moment and moves down (to the lowest free number from its minimum) if one met it, and gets
 * EBADF for a library fd; the library's below its high numbers moves high (ipc/upstream.c's
 * duplicate of a runtime's connection), and at or above them it is left as it is (host_fd_take's
 * callers place their fds there and register them).
 */
static int
host_fds_dupfd(int (*real)(int, int, ...), int fd, int cmd, int min, const void *ra)
{
    unsigned entries = 0;
    int library, newfd;

    if (host_fds_library_call(ra)) {
        if (min >= host_fds_base()) {
            return real(fd, cmd, min);
        }
    } else if (host_fd_is_owned(fd)) {
        errno = EBADF; /* the number was free in the bare run */
        return -1;
    }
    library = host_fds_copy_begin(ra, &entries);
    newfd = real(fd, cmd, min);
    return host_fds_copy_created(library, entries, newfd, fd, min);
}

#define HOST_FDS_FCNTL(name)                                                                   \
    HOST_EXPORT int name(int fd, int cmd, ...)                                                 \
    {                                                                                          \
        int (*real)(int, int, ...) = HOST_FDS_REAL(int (*)(int, int, ...), name);              \
        va_list ap;                                                                            \
        void *arg;                                                                             \
        int pass, rc;                                                                          \
                                                                                               \
        va_start(ap, cmd);                                                                     \
        arg = va_arg(ap, void *);                                                              \
        va_end(ap);                                                                            \
        if (real == NULL) {                                                                    \
            errno = ENOSYS;                                                                    \
            return -1;                                                                         \
        }                                                                                      \
        if (__builtin_expect(cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC, 1)) {                   \
            if (__builtin_expect(!HOST_FDS_FCNTL_SLOW(fd), 1)) {                               \
                return real(fd, cmd, arg);                                                     \
            }                                                                                  \
            rc = host_fds_fcntl_other(fd, __builtin_return_address(0), &pass);                 \
            return pass ? real(fd, cmd, arg) : rc;                                             \
        }                                                                                      \
        return host_fds_dupfd(real, fd, cmd, (int)(intptr_t)arg, __builtin_return_address(0)); \
    }

HOST_FDS_FCNTL(fcntl)
HOST_FDS_FCNTL(fcntl64)

/*
 * The calls that act on an fd's number and make no fd (fstat, lseek, ioctl, fsync...): the host's
 * on a library fd fail with EBADF, as bare (the number was free there), and touch nothing of the
 * library's; on another number they first wait while a library fd is in its low moment, as
 * fcntl's other commands (host_fds_fcntl_other, whose fast path is one bit test and one load).
 * fail is what the call returns on failure; posix_fadvise returns its error instead (errno as
 * its value).
 */
#define HOST_FDS_ON_FD(ret, name, params, args, fd, fail) \
    HOST_FDS_ON_FD_REFUSED(ret, name, params, args, fd, return fail, fail)
/* HOST_FDS_ON_FD whose refused call does refused instead (HOST_FDS_ON_FD_NEVER: its fd made
 * HOST_FD_NEVER, for the calls that check their flags first). */
#define HOST_FDS_ON_FD_REFUSED(ret, name, params, args, fd, refused, fail)      \
    HOST_EXPORT ret name params                                                 \
    {                                                                           \
        ret(*real) params = HOST_FDS_REAL(ret(*) params, name);                 \
        int pass;                                                               \
                                                                                \
        if (__builtin_expect(HOST_FDS_FCNTL_SLOW(fd), 0)) {                     \
            (void)host_fds_fcntl_other(fd, __builtin_return_address(0), &pass); \
            if (!pass) {                                                        \
                refused;                                                        \
            }                                                                   \
        }                                                                       \
        if (real == NULL) {                                                     \
            errno = ENOSYS;                                                     \
            return fail;                                                        \
        }                                                                       \
        return real args;                                                       \
    }

HOST_FDS_ON_FD(off_t, lseek, (int fd, off_t off, int whence), (fd, off, whence), fd, -1)
HOST_FDS_ON_FD(off64_t, lseek64, (int fd, off64_t off, int whence), (fd, off, whence), fd, -1)
HOST_FDS_ON_FD(int, fsync, (int fd), (fd), fd, -1)
HOST_FDS_ON_FD(int, fdatasync, (int fd), (fd), fd, -1)
HOST_FDS_ON_FD(int, fchmod, (int fd, mode_t mode), (fd, mode), fd, -1)
HOST_FDS_ON_FD(int, fchown, (int fd, uid_t uid, gid_t gid), (fd, uid, gid), fd, -1)
HOST_FDS_ON_FD(int, ftruncate, (int fd, off_t len), (fd, len), fd, -1)
HOST_FDS_ON_FD(int, ftruncate64, (int fd, off64_t len), (fd, len), fd, -1)
HOST_FDS_ON_FD(int, flock, (int fd, int op), (fd, op), fd, -1)
HOST_FDS_ON_FD(int, posix_fadvise, (int fd, off_t off, off_t len, int advice),
               (fd, off, len, advice), fd, EBADF)
HOST_FDS_ON_FD(int, posix_fadvise64, (int fd, off64_t off, off64_t len, int advice),
               (fd, off, len, advice), fd, EBADF)

/* fstatat, statx, fchmodat and fchownat check their flags (statx its mask) before their fd: a
 * refused call is made with HOST_FD_NEVER for fd (bare's EINVAL for a bad flag, else EBADF). */
#define HOST_FDS_ON_FD_NEVER(ret, name, params, args, fd_at, fd) \
    HOST_FDS_ON_FD_REFUSED(ret, name, params, args, fd_at, (fd) = HOST_FD_NEVER, -1)

/* HOST_FDS_ON_FD_NEVER for the calls of a path at fd: a path that names a library fd in this
 * process's fd directory gets ENOENT, as bare (host_fds_path_result, after the call). */
#define HOST_FDS_ON_FD_PATH(ret, name, params, args, fd_at, fd)                    \
    HOST_EXPORT ret name params                                                    \
    {                                                                              \
        ret(*real) params = HOST_FDS_REAL(ret(*) params, name);                    \
        int pass, at = fd;                                                         \
                                                                                   \
        if (__builtin_expect(HOST_FDS_FCNTL_SLOW(fd_at), 0)) {                     \
            (void)host_fds_fcntl_other(fd_at, __builtin_return_address(0), &pass); \
            if (!pass) {                                                           \
                (fd) = HOST_FD_NEVER;                                              \
            }                                                                      \
        }                                                                          \
        if (real == NULL) {                                                        \
            errno = ENOSYS;                                                        \
            return -1;                                                             \
        }                                                                          \
        return (ret)host_fds_path_result(at, path, (long)real args, 0,             \
                                         __builtin_return_address(0));             \
    }

HOST_FDS_ON_FD_PATH(int, fstatat,
                    (int fd, const char *restrict path, struct stat *restrict st, int flags),
                    (fd, path, st, flags), host_fds_at_fd(fd, path, flags), fd)
HOST_FDS_ON_FD_PATH(int, fstatat64,
                    (int fd, const char *restrict path, struct stat64 *restrict st, int flags),
                    (fd, path, st, flags), host_fds_at_fd(fd, path, flags), fd)

HOST_FDS_ON_FD(int, shutdown, (int fd, int how), (fd, how), fd, -1)
HOST_FDS_ON_FD(int, setsockopt, (int fd, int level, int name, const void *v, socklen_t len),
               (fd, level, name, v, len), fd, -1)
HOST_FDS_ON_FD(int, fchdir, (int fd), (fd), fd, -1)
HOST_FDS_ON_FD_PATH(int, statx,
                    (int fd, const char *restrict path, int flags, unsigned int mask,
                     struct statx *restrict sx),
                    (fd, path, flags, mask, sx), host_fds_at_fd(fd, path, flags), fd)

/*
 * The data calls the sanitizers' runtimes intercept too, with writes.c's, blocking.c's and
 * eintr.c's: the host's on a library fd fail with EBADF, as bare, and move nothing; the fast path
 * is one bit test (HOST_FD_DATA_REFUSED, which says who passes).
 */
#define HOST_FDS_DATA(ret, name, params, args) \
    HOST_FDS_DATA_REFUSED(ret, name, params, args, return -1)
/* HOST_FDS_DATA for a call that checks another argument before its fd (the positioned calls'
 * offset, negative: EINVAL; fgetxattr's and fsetxattr's name and flags): a refused call is made
 * with HOST_FD_NEVER for fd (bare's errno). */
#define HOST_FDS_DATA_NEVER(ret, name, params, args) \
    HOST_FDS_DATA_REFUSED(ret, name, params, args, fd = HOST_FD_NEVER)
#define HOST_FDS_DATA_REFUSED(ret, name, params, args, refused) \
    HOST_EXPORT ret name params                                 \
    {                                                           \
        if (HOST_FD_DATA_REFUSED(fd)) {                         \
            refused;                                            \
        }                                                       \
        HOST_REAL_OR_ENOSYS(ret, params, name)                  \
        return real args;                                       \
    }

/* glibc's names for fstat in binaries built for a glibc before 2.33; its headers no longer
 * declare them. */
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);

HOST_FDS_DATA_NEVER(ssize_t, pread, (int fd, void *buf, size_t len, off_t off), (fd, buf, len, off))
HOST_FDS_DATA_NEVER(ssize_t, pread64, (int fd, void *buf, size_t len, off64_t off),
                    (fd, buf, len, off))
HOST_FDS_DATA(ssize_t, readv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
HOST_FDS_DATA(int, fstatfs, (int fd, struct statfs *buf), (fd, buf))
HOST_FDS_DATA(int, fstatfs64, (int fd, struct statfs64 *buf), (fd, buf))
HOST_FDS_DATA_NEVER(ssize_t, fgetxattr, (int fd, const char *name, void *value, size_t size),
                    (fd, name, value, size))
HOST_FDS_DATA(int, __fxstat, (int ver, int fd, struct stat *st), (ver, fd, st))
HOST_FDS_DATA(int, __fxstat64, (int ver, int fd, struct stat64 *st), (ver, fd, st))
HOST_FDS_DATA_NEVER(ssize_t, pwrite, (int fd, const void *buf, size_t len, off_t off),
                    (fd, buf, len, off))
HOST_FDS_DATA_NEVER(ssize_t, pwrite64, (int fd, const void *buf, size_t len, off64_t off),
                    (fd, buf, len, off))
HOST_FDS_DATA_NEVER(ssize_t, preadv, (int fd, const struct iovec *iov, int cnt, off_t off),
                    (fd, iov, cnt, off))
HOST_FDS_DATA_NEVER(ssize_t, preadv64, (int fd, const struct iovec *iov, int cnt, off64_t off),
                    (fd, iov, cnt, off))
HOST_FDS_DATA_NEVER(ssize_t, pwritev, (int fd, const struct iovec *iov, int cnt, off_t off),
                    (fd, iov, cnt, off))
HOST_FDS_DATA_NEVER(ssize_t, pwritev64, (int fd, const struct iovec *iov, int cnt, off64_t off),
                    (fd, iov, cnt, off))
HOST_FDS_DATA_NEVER(ssize_t, preadv2,
                    (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
                    (fd, iov, cnt, off, flags))
HOST_FDS_DATA_NEVER(ssize_t, preadv64v2,
                    (int fd, const struct iovec *iov, int cnt, off64_t off, int flags),
                    (fd, iov, cnt, off, flags))
HOST_FDS_DATA_NEVER(ssize_t, pwritev2,
                    (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
                    (fd, iov, cnt, off, flags))
HOST_FDS_DATA_NEVER(ssize_t, pwritev64v2,
                    (int fd, const struct iovec *iov, int cnt, off64_t off, int flags),
                    (fd, iov, cnt, off, flags))
HOST_FDS_DATA(int, sendmmsg, (int fd, struct mmsghdr *vec, unsigned int vlen, int flags),
              (fd, vec, vlen, flags))
HOST_FDS_DATA_NEVER(int, fsetxattr,
                    (int fd, const char *name, const void *value, size_t size, int flags),
                    (fd, name, value, size, flags))
HOST_FDS_DATA(int, fstatvfs, (int fd, struct statvfs *buf), (fd, buf))
HOST_FDS_DATA(int, fstatvfs64, (int fd, struct statvfs64 *buf), (fd, buf))

/* splice's two numbers, either the library's: as the data calls', made with HOST_FD_NEVER (the
 * kernel checks its flags, and a length of 0, before its fds: bare's EINVAL, or 0). */
HOST_EXPORT ssize_t
splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int flags)
{
    HOST_FD_NEVER_AT(in, in);
    HOST_FD_NEVER_AT(out, out);
    HOST_REAL_OR_ENOSYS(ssize_t, (int, loff_t *, int, loff_t *, size_t, unsigned int), splice)
    return real(in, off_in, out, off_out, len, flags);
}

/*
 * mmap and mmap64 (one function in glibc on 64-bit targets): the host's mapping of a library fd's
 * file (a perf event fd's ring) fails with EBADF, as bare, with the data calls' one bit test; only
 * a call that names an fd (no MAP_ANONYMOUS) is looked at. Every mapping of the host's allocators
 * passes here, some before this library's constructor ran (another library's constructor, a
 * malloc's first arena): the real mmap is never looked up here, where dlsym might allocate and a
 * malloc that maps would recur. The constructor resolves it (host_fds_resolve); before that the
 * system call is made directly (host_fds_mmap_sys), as glibc's mmap makes it on x86_64 and arm64,
 * whose one check of its own (an offset not a multiple of the page: EINVAL) the kernel makes too.
 * What a call before the constructor misses: an interposer of mmap loaded after this library
 * (ThreadSanitizer's runtime, preloaded after it) does not see it. Run so: the ASan build's
 * host-contract-fds-*, -stress, cli-record and output-file, the TSan build's fds cases (with
 * HOST_FDS_MMAP_PLAIN), and valgrind of a preloaded host (50 mallocs of 1 MiB and a file's map;
 * host-fds closeloop): as bare, no report.
 */
typedef void *(*host_mmap_fn)(void *, size_t, int, int, int, off_t);

/* Not instrumented by a sanitizer: ThreadSanitizer's runtime maps through mmap from its own
 * initialisation (its symbolizer's libbacktrace, preloaded after this library), and the function
 * entry an instrumented mmap reports before that initialisation ended killed every host at its
 * start (SEGV in __tsan_func_entry, TSan build, host-contract-fds-* and cli-record). */
#define HOST_FDS_MMAP_PLAIN __attribute__((no_sanitize_address, no_sanitize_thread))

static HOST_FDS_MMAP_PLAIN void *
host_fds_mmap_sys(_Atomic(void *) *slot, const char *name, void *addr, size_t len, int prot,
                  int flags, int fd, off_t off)
{
    long rc;

    (void)slot; /* for the target without a raw call below */
    (void)name;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = flags;
    register long r8 __asm__("r8") = fd;
    register long r9 __asm__("r9") = off;

    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"((long)SYS_mmap), "D"(addr), "S"(len), "d"((long)prot), "r"(r10), "r"(r8),
                       "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_mmap;
    register long x0 __asm__("x0") = (long)addr;
    register long x1 __asm__("x1") = (long)len;
    register long x2 __asm__("x2") = prot;
    register long x3 __asm__("x3") = flags;
    register long x4 __asm__("x4") = fd;
    register long x5 __asm__("x5") = off;

    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    rc = x0;
#else
    /* no raw system call written for this target: libc's, looked up here */
    (void)rc;
    host_mmap_fn real = (host_mmap_fn)host_real(slot, name);

    if (real == NULL) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    return real(addr, len, prot, flags, fd, off);
#endif
    if (rc < 0 && rc > -4096) {
        errno = (int)-rc;
        return MAP_FAILED;
    }
    return (void *)rc;
}

/* The real mmap (slot) once the constructor resolved it, else the system call. */
static inline HOST_FDS_MMAP_PLAIN void *
host_fds_mmap(_Atomic(void *) *slot, const char *name, void *addr, size_t len, int prot, int flags,
              int fd, off_t off)
{
    host_mmap_fn real = (host_mmap_fn)atomic_load_explicit(slot, memory_order_acquire);

    if (real != NULL) {
        return real(addr, len, prot, flags, fd, off);
    }
    return host_fds_mmap_sys(slot, name, addr, len, prot, flags, fd, off);
}

HOST_EXPORT HOST_FDS_MMAP_PLAIN void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (!(flags & MAP_ANONYMOUS) && HOST_FD_DATA_REFUSED(fd)) {
        fd = HOST_FD_NEVER; /* bare's EBADF, or libc's EINVAL first for an odd offset */
    }
    return host_fds_mmap(&real_mmap_p, "mmap", addr, len, prot, flags, fd, off);
}

HOST_EXPORT HOST_FDS_MMAP_PLAIN void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    if (!(flags & MAP_ANONYMOUS) && HOST_FD_DATA_REFUSED(fd)) {
        fd = HOST_FD_NEVER; /* bare's EBADF, or libc's EINVAL first for an odd offset */
    }
    return host_fds_mmap(&real_mmap64_p, "mmap64", addr, len, prot, flags, fd, (off_t)off);
}

/* fchmodat and fchownat look at their fd only for a relative path (or an empty one with
 * AT_EMPTY_PATH), as fstatat; no sanitizer's runtime intercepts them. */
HOST_FDS_ON_FD_NEVER(int, fchmodat, (int fd, const char *path, mode_t mode, int flags),
                     (fd, path, mode, flags), host_fds_at_fd(fd, path, flags), fd)
HOST_FDS_ON_FD_NEVER(int, fchownat, (int fd, const char *path, uid_t uid, gid_t gid, int flags),
                     (fd, path, uid, gid, flags), host_fds_at_fd(fd, path, flags), fd)

/*
 * The other calls on an fd's number, as the data calls (HOST_FD_DATA_REFUSED: one bit test and a
 * load, the ahead rule, the wait for a creation not marked yet): the host's on a library fd fail
 * with EBADF, as bare. a and b are the numbers the call looks at (-1: none), an *at call's dirfd
 * only for a relative path or an empty one with AT_EMPTY_PATH (host_fds_at_fd). ASan's runtime
 * intercepts flistxattr, name_to_handle_at, readlinkat and timerfd_gettime, TSan's those and
 * epoll_ctl: the ahead rule lets the library's calls through their interceptors.
 */
#define HOST_FDS_DATA_AT(ret, name, params, args, a, b)           \
    HOST_EXPORT ret name params                                   \
    {                                                             \
        if (HOST_FD_DATA_REFUSED(a) || HOST_FD_DATA_REFUSED(b)) { \
            return -1;                                            \
        }                                                         \
        HOST_REAL_OR_ENOSYS(ret, params, name)                    \
        return real args;                                         \
    }

/* The calls of these that check other arguments before their fd (their flags, a path's name, a
 * count, a buffer they read: Linux 6.18 by its source and as run bare on a free number) are
 * HOST_FDS_ACTING_ON's: a refused call is made with HOST_FD_NEVER for fa, the parameter that a
 * (-1: none) names when it is looked at, and for b's, fb, likewise, so that its errno is bare's
 * (EINVAL for a bad flag, EFAULT, ERANGE; else EBADF). */
#define HOST_FDS_ACTING_ON(ret, name, params, args, a, fa, b, fb) \
    HOST_EXPORT ret name params                                   \
    {                                                             \
        HOST_FD_NEVER_AT(a, fa);                                  \
        HOST_FD_NEVER_AT(b, fb);                                  \
        HOST_REAL_OR_ENOSYS(ret, params, name)                    \
        return real args;                                         \
    }

/* HOST_FDS_ACTING_ON for the calls of a path at fd that answer for a library fd named in this
 * process's fd directory (HOST_FDS_ON_FD_PATH). */
#define HOST_FDS_ACTING_PATH(ret, name, params, args, a, fa)           \
    HOST_EXPORT ret name params                                        \
    {                                                                  \
        int at = fa;                                                   \
                                                                       \
        HOST_FD_NEVER_AT(a, fa);                                       \
        HOST_REAL_OR_ENOSYS(ret, params, name)                         \
        return (ret)host_fds_path_result(at, path, (long)real args, 0, \
                                         __builtin_return_address(0)); \
    }

/* The same for the calls of a path alone (the working directory for a relative one): the host's
 * readlink, stat, lstat and access of /proc/self/fd/N (glibc's own go to the kernel, not to
 * readlinkat or fstatat). */
#define HOST_FDS_PATH(ret, name, params, args)                               \
    HOST_EXPORT ret name params                                              \
    {                                                                        \
        HOST_REAL_OR_ENOSYS(ret, params, name)                               \
        return (ret)host_fds_path_result(AT_FDCWD, path, (long)real args, 0, \
                                         __builtin_return_address(0));       \
    }

HOST_FDS_PATH(ssize_t, readlink, (const char *restrict path, char *restrict buf, size_t len),
              (path, buf, len))
HOST_FDS_PATH(int, stat, (const char *restrict path, struct stat *restrict st), (path, st))
HOST_FDS_PATH(int, stat64, (const char *restrict path, struct stat64 *restrict st), (path, st))
HOST_FDS_PATH(int, lstat, (const char *restrict path, struct stat *restrict st), (path, st))
HOST_FDS_PATH(int, lstat64, (const char *restrict path, struct stat64 *restrict st), (path, st))
HOST_FDS_PATH(int, access, (const char *path, int mode), (path, mode))

/* glibc declares these only under names of its own choosing, or not at all before 2.34. */
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);

HOST_FDS_ACTING_ON(ssize_t, tee, (int in, int out, size_t len, unsigned int flags),
                   (in, out, len, flags), in, in, out, out)
HOST_FDS_ACTING_ON(ssize_t, vmsplice, (int fd, const struct iovec *iov, size_t n, unsigned flags),
                   (fd, iov, n, flags), fd, fd, -1, fd)
HOST_FDS_DATA_AT(ssize_t, copy_file_range,
                 (int in, off64_t *off_in, int out, off64_t *off_out, size_t len, unsigned flags),
                 (in, off_in, out, off_out, len, flags), in, out)
HOST_FDS_DATA_AT(int, fremovexattr, (int fd, const char *name), (fd, name), fd, -1)
HOST_FDS_DATA_AT(ssize_t, flistxattr, (int fd, char *list, size_t size), (fd, list, size), fd, -1)
HOST_FDS_DATA_AT(int, futimens, (int fd, const struct timespec ts[2]), (fd, ts), fd, -1)
HOST_FDS_DATA_AT(int, futimes, (int fd, const struct timeval tv[2]), (fd, tv), fd, -1)
HOST_FDS_DATA_AT(int, fexecve, (int fd, char *const argv[], char *const envp[]), (fd, argv, envp),
                 fd, -1)
HOST_EXPORT ssize_t
getdents64(int fd, void *buf, size_t len)
{
    const void *ra = __builtin_return_address(0);
    ssize_t rc;
    unsigned since;

    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(ssize_t, (int, void *, size_t), getdents64)
    do { /* a buffer of library entries only: the next ones */
        since = host_fds_listing_begins();
        rc = real(fd, buf, len);
    } while (rc > 0 && (rc = host_fds_dents_kept(fd, buf, rc, since, ra)) == 0);
    return rc;
}
HOST_FDS_ACTING_ON(int, inotify_add_watch, (int fd, const char *path, uint32_t mask),
                   (fd, path, mask), fd, fd, -1, fd)
HOST_FDS_DATA_AT(int, inotify_rm_watch, (int fd, int wd), (fd, wd), fd, -1)
HOST_FDS_ACTING_ON(int, epoll_ctl, (int epfd, int op, int fd, struct epoll_event *ev),
                   (epfd, op, fd, ev), epfd, epfd, fd, fd)
HOST_FDS_DATA_AT(int, timerfd_gettime, (int fd, struct itimerspec *cur), (fd, cur), fd, -1)
HOST_FDS_DATA_AT(int, sync_file_range, (int fd, off64_t off, off64_t len, unsigned int flags),
                 (fd, off, len, flags), fd, -1)
HOST_FDS_DATA_AT(int, fallocate, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len), fd,
                 -1)
HOST_FDS_DATA_AT(int, fallocate64, (int fd, int mode, off64_t off, off64_t len),
                 (fd, mode, off, len), fd, -1)
HOST_FDS_DATA_AT(int, syncfs, (int fd), (fd), fd, -1)
HOST_FDS_ACTING_ON(int, lockf, (int fd, int cmd, off_t len), (fd, cmd, len), fd, fd, -1, fd)
HOST_FDS_ACTING_ON(int, lockf64, (int fd, int cmd, off64_t len), (fd, cmd, len), fd, fd, -1, fd)
HOST_FDS_ACTING_ON(int, fanotify_mark,
                   (int fd, unsigned int flags, uint64_t mask, int dirfd, const char *path),
                   (fd, flags, mask, dirfd, path), fd, fd,
                   path == NULL ? dirfd : host_fds_at_fd(dirfd, path, 0), dirfd)
HOST_FDS_DATA_AT(int, mkdirat, (int fd, const char *path, mode_t mode), (fd, path, mode),
                 host_fds_at_fd(fd, path, 0), -1)
HOST_FDS_ACTING_ON(int, unlinkat, (int fd, const char *path, int flags), (fd, path, flags),
                   host_fds_at_fd(fd, path, 0), fd, -1, fd)
HOST_FDS_DATA_AT(int, renameat, (int oldfd, const char *old, int newfd, const char *new),
                 (oldfd, old, newfd, new), host_fds_at_fd(oldfd, old, 0),
                 host_fds_at_fd(newfd, new, 0))
HOST_FDS_ACTING_ON(int, renameat2,
                   (int oldfd, const char *old, int newfd, const char *new, unsigned int flags),
                   (oldfd, old, newfd, new, flags), host_fds_at_fd(oldfd, old, 0), oldfd,
                   host_fds_at_fd(newfd, new, 0), newfd)
HOST_FDS_ACTING_ON(int, linkat, (int oldfd, const char *old, int newfd, const char *new, int flags),
                   (oldfd, old, newfd, new, flags), host_fds_at_fd(oldfd, old, flags), oldfd,
                   host_fds_at_fd(newfd, new, 0), newfd)
HOST_FDS_DATA_AT(int, symlinkat, (const char *target, int fd, const char *path), (target, fd, path),
                 host_fds_at_fd(fd, path, 0), -1)
HOST_FDS_ACTING_PATH(ssize_t, readlinkat, (int fd, const char *path, char *buf, size_t len),
                     (fd, path, buf, len), host_fds_at_fd(fd, path, AT_EMPTY_PATH), fd)
HOST_FDS_ACTING_PATH(int, faccessat, (int fd, const char *path, int mode, int flags),
                     (fd, path, mode, flags), host_fds_at_fd(fd, path, flags), fd)
HOST_FDS_ACTING_ON(int, mknodat, (int fd, const char *path, mode_t mode, dev_t dev),
                   (fd, path, mode, dev), host_fds_at_fd(fd, path, 0), fd, -1, fd)
HOST_FDS_DATA_AT(int, mkfifoat, (int fd, const char *path, mode_t mode), (fd, path, mode),
                 host_fds_at_fd(fd, path, 0), -1)
HOST_FDS_ACTING_ON(int, utimensat,
                   (int fd, const char *path, const struct timespec ts[2], int flags),
                   (fd, path, ts, flags), host_fds_at_fd(fd, path, flags), fd, -1, fd)
HOST_FDS_DATA_AT(int, futimesat, (int fd, const char *path, const struct timeval tv[2]),
                 (fd, path, tv), path == NULL ? fd : host_fds_at_fd(fd, path, 0), -1)
HOST_FDS_ACTING_ON(int, name_to_handle_at,
                   (int fd, const char *path, struct file_handle *fh, int *mount_id, int flags),
                   (fd, path, fh, mount_id, flags), host_fds_at_fd(fd, path, flags), fd, -1, fd)
HOST_FDS_ACTING_ON(int, execveat,
                   (int fd, const char *path, char *const argv[], char *const envp[], int flags),
                   (fd, path, argv, envp, flags), host_fds_at_fd(fd, path, flags), fd, -1, fd)

/* The calls that act on what a number holds where they succeed, as those: timerfd_settime (a
 * timer's), and glibc 2.36's mount calls on their fd or dirfd (a relative path, or an empty one
 * with their flag for it); move_mount on either. */
struct mount_attr;
int move_mount(int from_dfd, const char *from_path, int to_dfd, const char *to_path,
               unsigned int flags);
int mount_setattr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                  size_t size);
int fsconfig(int fd, unsigned int cmd, const char *key, const void *value, int aux);

HOST_FDS_ACTING_ON(int, timerfd_settime,
                   (int fd, int flags, const struct itimerspec *value, struct itimerspec *old),
                   (fd, flags, value, old), fd, fd, -1, fd)
HOST_FDS_ACTING_ON(
        int, move_mount,
        (int from_dfd, const char *from_path, int to_dfd, const char *to_path, unsigned int flags),
        (from_dfd, from_path, to_dfd, to_path, flags),
        host_fds_at_fd(from_dfd, from_path, flags &HOST_FDS_MOVE_MOUNT_F_EMPTY ? AT_EMPTY_PATH : 0),
        from_dfd,
        host_fds_at_fd(to_dfd, to_path, flags &HOST_FDS_MOVE_MOUNT_T_EMPTY ? AT_EMPTY_PATH : 0),
        to_dfd)
HOST_FDS_ACTING_ON(int, mount_setattr,
                   (int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                    size_t size),
                   (dfd, path, flags, attr, size), host_fds_at_fd(dfd, path, (int)flags), dfd, -1,
                   dfd)
HOST_FDS_ACTING_ON(int, fsconfig,
                   (int fd, unsigned int cmd, const char *key, const void *value, int aux),
                   (fd, cmd, key, value, aux), fd, fd, -1, fd)

/* dup of a library fd by the host fails as dup2's does: the number was free in the bare run. */
HOST_EXPORT int
dup(int fd)
{
    int (*real)(int) = HOST_FDS_REAL(int (*)(int), dup);
    unsigned entries = 0;
    int library;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (host_fd_is_owned(fd) && !host_fds_library_call(__builtin_return_address(0))) {
        errno = EBADF;
        return -1;
    }
    library = host_fds_copy_begin(__builtin_return_address(0), &entries);
    return host_fds_copy_created(library, entries, real(fd), fd, 0);
}

/* fd moved to the lowest free number above min, its close-on-exec flag kept (fd itself when that
 * fails). */
static int
host_fds_moved_above(int fd, int min)
{
    int flags = host_fds_fcntl(fd, F_GETFD, 0), moved;

    if (flags < 0) {
        return fd;
    }
    moved = host_fds_fcntl(fd, (flags & FD_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, min + 1);
    if (moved < 0) {
        return fd;
    }
    host_fds_close_real(fd);
    return moved;
}

/* After a call that made the two fds of fds[] (rc 0): as HOST_FDS_CREATE for each, moved down in
 * their order (fds[0] below fds[1], as bare gives them). openpty makes its two in two system calls:
 * a library fd that took the master's number and moved away before the slave was opened left the
 * slave below the master; the slave is first moved above it. */
static int
host_fds_pair_created(int library, unsigned entries, int rc, int fds[2])
{
    if (rc == 0 && library) {
        fds[0] = host_fd_take(fds[0]);
        fds[1] = host_fd_take(fds[1]);
    } else if (rc == 0 && host_fds_created_met(entries)) {
        if (fds[1] < fds[0]) {
            fds[1] = host_fds_moved_above(fds[1], fds[0]);
        }
        fds[0] = host_fds_created_lower(fds[0]);
        fds[1] = host_fds_created_lower(fds[1]);
    }
    if (library) {
        host_fds_create_leave();
    }
    return rc;
}

/* An interposer of a call that makes two fds into fds[] and returns 0. pipe and pipe2 (glibc's pipe
 * does not call pipe2 through the PLT), and socketpair. */
#define HOST_FDS_PAIR(name, types, params, args)                            \
    HOST_EXPORT int name params                                             \
    {                                                                       \
        int(*real) types = HOST_FDS_REAL(int(*) types, name);               \
        unsigned entries = 0;                                               \
        int library;                                                        \
                                                                            \
        if (real == NULL) {                                                 \
            errno = ENOSYS;                                                 \
            return -1;                                                      \
        }                                                                   \
        if (host_fds_sealed_call(-1, __builtin_return_address(0))) {        \
            fds[0] = fds[1] = HOST_FD_NEVER; /* after a seccomp filter */   \
            return 0;                                                       \
        }                                                                   \
        library = host_fds_creating(__builtin_return_address(0), &entries); \
        return host_fds_pair_created(library, entries, real args, fds);     \
    }

HOST_FDS_PAIR(pipe2, (int *, int), (int fds[2], int flags), (fds, flags))
HOST_FDS_PAIR(pipe, (int *), (int fds[2]), (fds))
HOST_FDS_PAIR(socketpair, (int, int, int, int *), (int domain, int type, int protocol, int fds[2]),
              (domain, type, protocol, fds))

/*
 * pidfd_getfd of a library fd in the caller's own process gets a copy of the library's file, where
 * bare that number was free (EBADF). So a host's copy that is the library's open file (kcmp
 * KCMP_FILE: the same in the caller's process, or in a forked child that inherited it) is closed
 * and the call fails with EBADF, as bare. Without kcmp (ENOSYS, a seccomp filter's EPERM) the copy
 * stays, as before. Returns the fd to give, or -1 with errno.
 */
static int
host_fds_getfd_checked(int newfd, int targetfd, const void *ra)
{
    host_syscall_fn raw = HOST_REAL(host_syscall_fn, syscall);
    long self = (long)getpid();

    if (newfd < 0 || !host_fd_is_owned(targetfd) || host_fds_library_call(ra) || raw == NULL ||
        host_filter_refuses(SYS_kcmp) ||
        raw(SYS_kcmp, self, self, (long)KCMP_FILE, (long)newfd, (long)targetfd, 0L) != 0) {
        return newfd;
    }
    host_fds_close_real(newfd);
    errno = EBADF;
    return -1;
}

int pidfd_getfd(int pidfd, int targetfd, unsigned int flags);

HOST_EXPORT int
pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
    int (*real)(int, int, unsigned) = HOST_FDS_REAL(int (*)(int, int, unsigned), pidfd_getfd);
    const void *ra = __builtin_return_address(0);
    unsigned entries = 0;
    int library;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    library = host_fds_creating(ra, &entries);
    return host_fds_created_by(library, entries,
                               host_fds_getfd_checked(real(pidfd, targetfd, flags), targetfd, ra));
}

/* A creator made through syscall() (host_fds_syscall_creates): as the interposer of its libc
 * name; a host's raw dup of a library fd gets EBADF as dup's. */
#ifdef SYS_openat2
#define HOST_FDS_IS_OPENAT2(n) ((n) == SYS_openat2)
#else
#define HOST_FDS_IS_OPENAT2(n) 0
#endif

/* The number a creation made through syscall() looks at, as the interposer of its libc name
 * (-1: none): openat's and openat2's, open_tree's and fspick's dirfd for a relative path (or an
 * empty one with their flag for it), accept's listener, fsmount's fs context. */
static int
host_fds_syscall_create_on(long n, const long a[6])
{
    if (n == SYS_openat || HOST_FDS_IS_OPENAT2(n)) {
        return host_fds_at_fd((int)a[0], (const char *)a[1], 0);
    }
    switch (n) {
#ifdef SYS_accept
    case SYS_accept:
#endif
    case SYS_accept4:
#ifdef SYS_fsmount
    case SYS_fsmount:
#endif
        return (int)a[0];
#ifdef SYS_open_tree
    case SYS_open_tree:
#endif
#ifdef HOST_FDS_SYS_OPEN_TREE_ATTR
    case HOST_FDS_SYS_OPEN_TREE_ATTR:
#endif
#if defined(SYS_open_tree) || defined(HOST_FDS_SYS_OPEN_TREE_ATTR)
        return host_fds_at_fd((int)a[0], (const char *)a[1], (int)a[2]);
#endif
#ifdef SYS_fspick
    case SYS_fspick:
        return host_fds_at_fd((int)a[0], (const char *)a[1],
                              (a[2] & HOST_FDS_FSPICK_EMPTY) ? AT_EMPTY_PATH : 0);
#endif
    default:
        return -1;
    }
}

static long
host_fds_syscall_create(host_syscall_fn real, long n, const long a[6], int kind, const void *ra)
{
    long b[6];
    unsigned entries = 0;
    int library, fd;
    long rc;

    if (n == SYS_dup && host_fd_is_owned((int)a[0]) && !host_fds_library_call(ra)) {
        errno = EBADF;
        return -1;
    }
    fd = host_fds_syscall_create_on(n, a);
    if (host_fd_data_refused_by(fd, ra)) {
        if (!host_fds_syscall_never(n, a, b)) {
            return -1;
        }
        a = b; /* made with HOST_FD_NEVER: bare's errno */
    }
    library = n == SYS_dup ? host_fds_copy_begin(ra, &entries) : host_fds_creating(ra, &entries);
    rc = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (n == SYS_dup) {
        return host_fds_copy_created(library, entries, (int)rc, (int)a[0], 0);
    }
    if (kind == HOST_FDS_SYS_PIPE || kind == HOST_FDS_SYS_SOCKETPAIR) {
        return host_fds_pair_created(library, entries, rc == 0 ? 0 : -1,
                                     (int *)a[kind == HOST_FDS_SYS_PIPE ? 0 : 3]);
    }
#ifdef SYS_pidfd_getfd
    if (n == SYS_pidfd_getfd && rc >= 0) {
        rc = host_fds_getfd_checked((int)rc, (int)a[1], ra);
    }
#endif
#ifdef SYS_io_uring_setup
    if (n == SYS_io_uring_setup && rc >= 0 && !library) {
        const struct io_uring_params *p = (const struct io_uring_params *)a[1];

        if (p->flags & HOST_FDS_URING_FD_ONLY) {
            return rc; /* a registered ring's index, no fd */
        }
        rc = host_fds_created_by(library, entries, (int)rc);
        host_uring_created((int)rc, p);
        return rc;
    }
#endif
    return host_fds_created_by(library, entries, (int)rc);
}

/* openpty opens a pseudo-terminal's master and slave inside libc (two system calls): the pair is
 * moved as pipe's. */
HOST_EXPORT int
openpty(int *amaster, int *aslave, char *name, const struct termios *termp,
        const struct winsize *winp)
{
    int (*real)(int *, int *, char *, const struct termios *, const struct winsize *) =
            HOST_FDS_REAL(
                    int (*)(int *, int *, char *, const struct termios *, const struct winsize *),
                    openpty);
    unsigned entries = 0;
    int library, rc, fds[2];

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    library = host_fds_creating(__builtin_return_address(0), &entries);
    rc = real(&fds[0], &fds[1], name, termp, winp);
    rc = host_fds_pair_created(library, entries, rc, fds);
    if (rc == 0) {
        *amaster = fds[0];
        *aslave = fds[1];
    }
    return rc;
}

/* forkpty: openpty inside libc, then a fork; the parent keeps the master (moved as openpty's), the
 * child (0) keeps only the slave as its 0, 1 and 2, and its gate was emptied at the fork
 * (host_fds_forked_child). */
HOST_EXPORT pid_t
forkpty(int *amaster, char *name, const struct termios *termp, const struct winsize *winp)
{
    pid_t (*real)(int *, char *, const struct termios *, const struct winsize *) = HOST_FDS_REAL(
            pid_t(*)(int *, char *, const struct termios *, const struct winsize *), forkpty);
    unsigned entries = 0;
    int library, master = -1;
    pid_t pid;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    library = host_fds_creating(__builtin_return_address(0), &entries);
    pid = real(&master, name, termp, winp);
    if (pid == 0) {
        return 0;
    }
    master = host_fds_created_by(library, entries, pid > 0 ? master : -1);
    if (pid > 0) {
        *amaster = master;
    }
    return pid;
}

/* Around accept and accept4 (blocking.c) of a caller whose return address is ra: the host's
 * waits for the moment before the call (the entries to pass on), and after it its fd moves down
 * if one met it anyway; the library's fd moves high. */
unsigned
host_fds_accepting(const void *ra)
{
    unsigned entries = 0;

    if (!host_fds_library_call(ra)) {
        (void)host_fds_creating(ra, &entries);
    }
    return entries;
}

int
host_fds_accepted(int fd, const void *ra, unsigned entries)
{
    if (host_fds_library_call(ra)) {
        return host_fd_take(fd);
    }
    return host_fds_created_by(0, entries, fd);
}

ssize_t
host_fds_received(ssize_t rc, struct msghdr *msg, const void *ra, unsigned entries)
{
    int library, met = -1, err = errno;
    struct cmsghdr *cm;

    if (rc < 0 || msg->msg_control == NULL || msg->msg_controllen < sizeof(struct cmsghdr)) {
        return rc;
    }
    library = host_fds_library_call(ra);
    for (cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
        size_t i, n;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
            cm->cmsg_len < CMSG_LEN(0)) {
            continue;
        }
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (library) {
                fd = host_fd_take(fd);
            } else if (met == 1 || (met < 0 && (met = host_fds_created_met(entries)) == 1)) {
                fd = host_fds_created_lower(fd);
            }
            if (fd >= 0) {
                memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof(int));
            }
        }
    }
    errno = err;
    return rc;
}

int
host_fds_received_many(int rc, struct mmsghdr *vec, const void *ra, unsigned entries)
{
    int i;

    for (i = 0; i < rc; i++) {
        (void)host_fds_received(0, &vec[i].msg_hdr, ra, entries);
    }
    return rc;
}

/* dup2 and dup3 made through syscall(), once (host_fds_dup retries an EBUSY). */
#ifdef SYS_dup2
static int
host_fds_sys_dup2_once(int oldfd, int newfd, int flags)
{
    host_syscall_fn raw = HOST_REAL(host_syscall_fn, syscall);

    (void)flags;
    return (int)raw(SYS_dup2, oldfd, newfd, 0, 0, 0, 0);
}
#endif

static int
host_fds_sys_dup3_once(int oldfd, int newfd, int flags)
{
    host_syscall_fn raw = HOST_REAL(host_syscall_fn, syscall);

    return (int)raw(SYS_dup3, oldfd, newfd, flags, 0, 0, 0);
}

/* fcntl made through syscall() with one int argument: F_DUPFD*'s minimum (host_fds_dupfd). */
static int
host_fds_sys_fcntl(int fd, int cmd, ...)
{
    host_syscall_fn raw = HOST_REAL(host_syscall_fn, syscall);
    va_list ap;
    int arg;

    va_start(ap, cmd);
    arg = va_arg(ap, int);
    va_end(ap);
    return (int)raw(SYS_fcntl, fd, cmd, arg, 0, 0, 0);
}

#ifdef SYS_io_uring_enter
/*
 * io_uring_enter and io_uring_register made through syscall(): the host's on a library fd's
 * number (not a registered ring's index) fail with EBADF, as bare, after a wait for a library
 * fd's low moment or close (the data calls' one bit test alone let a wall session's stat file
 * answer 1 io_uring_enter of 1017 with EOPNOTSUPP in 1 of 40 runs); the host's others look at what
 * they submit or register (uring.c), counted in the gate as a close, so that no library fd is in
 * its low moment (at a number free bare) while the kernel looks the entries' numbers up: a
 * submission that also waits for completions is made as two calls, the submission in the gate
 * and the wait after it (the kernel's result is the count submitted either way, and it waits only
 * when every entry asked for was submitted), left out when the completions it asks for are in the
 * ring already (host_uring_ready: one system call a submission, as bare). The library's pass.
 */
static long
host_fds_syscall_uring(host_syscall_fn real, long n, const long a[6], const void *ra)
{
    int registered = n == SYS_io_uring_enter ? ((unsigned)a[3] & IORING_ENTER_REGISTERED_RING) != 0
                                             : ((unsigned long)a[1] & (1ul << 31)) != 0;
    long rc;

    if (host_fds_library_call(ra)) {
        return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    if (!registered) {
        int pass; /* as fcntl's other commands: a library fd's low moment or close waited for */

        rc = host_fds_fcntl_other((int)a[0], ra, &pass);
        if (!pass) {
            return rc;
        }
    }
    if (n == SYS_io_uring_register) {
        host_fds_gate_host_enter();
        rc = host_uring_register(real, a);
        host_fds_gate_host_leave();
        return rc;
    }
    if (registered || a[1] <= 0 || !host_uring_tracked((int)a[0])) {
        return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    host_fds_gate_host_enter();
    rc = host_uring_submit(real, a);
    host_fds_gate_host_leave();
    if (rc == a[1] && ((unsigned)a[3] & IORING_ENTER_GETEVENTS) &&
        !host_uring_ready((int)a[0], (unsigned)a[2])) {
        int err = errno;

        (void)real(n, a[0], 0, a[2], a[3], a[4], a[5]); /* its error is not the call's */
        errno = err;
    }
    return rc;
}
#endif

/* A system call made through syscall() that closes, takes or creates fds
 * (host_fds_syscall_kind): as the interposer of its libc name, for the caller whose return
 * address is ra. */
static long
host_fds_syscall_fd(host_syscall_fn real, long n, const long a[6], int kind, const void *ra,
                    uint64_t fa)
{
    unsigned entries;

    switch (kind) {
    case HOST_FDS_SYS_CLOSE:
        return host_fds_syscall_close(real, (int)a[0], ra);
    case HOST_FDS_SYS_CLOSE_RANGE:
        return host_fds_close_range((unsigned)a[0], (unsigned)a[1], (int)a[2], ra);
#ifdef SYS_dup2
    case HOST_FDS_SYS_DUP2:
        return host_fds_dup(host_fds_sys_dup2_once, (int)a[0], (int)a[1], 0, ra);
#endif
    case HOST_FDS_SYS_DUP3:
        return host_fds_dup(host_fds_sys_dup3_once, (int)a[0], (int)a[1], (int)a[2], ra);
    case HOST_FDS_SYS_DUPFD:
        return host_fds_dupfd(host_fds_sys_fcntl, (int)a[0], (int)a[1], (int)a[2], ra);
    case HOST_FDS_SYS_FCNTL: {
        int pass, rc = host_fds_fcntl_other(
                          n == SYS_fcntl ? (int)a[0] : host_fds_syscall_on_fd(n, a), ra, &pass);
        long b[6];

        if (!pass && host_fds_syscall_never(n, a, b)) {
            return real(n, b[0], b[1], b[2], b[3], b[4], b[5]); /* bare's errno */
        }
        return pass ? real(n, a[0], a[1], a[2], a[3], a[4], a[5]) : rc;
    }
    case HOST_FDS_SYS_RECVMSG: /* retried after the agent's EINTR, as eintr.c's recvmsg */
        if (host_fd_data_refused_by((int)a[0], ra)) {
            return -1;
        }
        entries = host_fds_accepting(ra);
        return host_fds_received(host_syscall_wait(real, n, a, fa), (struct msghdr *)a[1], ra,
                                 entries);
#ifdef SYS_io_uring_enter
    case HOST_FDS_SYS_URING:
        return host_fds_syscall_uring(real, n, a, ra);
#endif
    case HOST_FDS_SYS_RECVMMSG: /* and recvmmsg, its timeout passed again as it was */
        if (host_fd_data_refused_by((int)a[0], ra)) {
            return -1;
        }
        entries = host_fds_accepting(ra);
        return host_fds_received_many((int)host_syscall_wait(real, n, a, fa),
                                      (struct mmsghdr *)a[1], ra, entries);
    default:
        return host_fds_syscall_create(real, n, a, kind, ra);
    }
}

/*
 * The library reads /proc files and directories through stdio and dirent, whose fds libc opens
 * and closes without the calls above: a host closing every fd meanwhile closed them, and the
 * library's fclose or closedir would then close the number the host had reused. For the library's
 * own read-only fopen and its opendir the fd is opened here instead (high, registered), and
 * fclose and closedir forget it first. Every other call is libc's.
 */
/* A host's stream whose fd libc opened inside while a library creation met the call: moved down
 * as the other creators' fds, through glibc's FILE, which names its fd in the public _fileno. */
static void
host_fds_file_lower(FILE *f, unsigned entries)
{
#ifdef __GLIBC__
    if (f != NULL && f->_fileno >= 0 && host_fds_created_met(entries)) {
        f->_fileno = host_fds_created_lower(f->_fileno);
    }
#else
    (void)f;
    (void)entries;
#endif
}

/* A stream whose fd libc opened inside (tmpfile, popen), after host_fds_creating: the library's
 * moves high, the host's down if a library creation met it; the gate left as entered. */
static FILE *
host_fds_file_created(FILE *f, int library, unsigned entries)
{
    if (!library) {
        host_fds_file_lower(f, entries);
        return f;
    }
#ifdef __GLIBC__
    if (f != NULL && f->_fileno >= 0) {
        int fd = host_fd_take(f->_fileno);

        f->_fileno = fd >= 0 ? fd : f->_fileno;
    }
#endif
    host_fds_create_leave();
    return f;
}

/* fopen and fopen64: the library's read-only opens here, high; the host's wait for the moment
 * (libc opens the fd inside, without the calls above) and move down with glibc. */
static FILE *
host_fds_fopen(FILE *(*real)(const char *, const char *), const char *path, const char *mode,
               const void *ra)
{
    unsigned entries = 0;
    FILE *f;
    int fd;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    if (mode[0] != 'r' || strchr(mode, '+') != NULL || !host_fds_library_call(ra)) {
        char first;

        /* a path naming a library fd in this process's fd directory: ENOENT, as open's (a "w"
         * looks first, so that it truncates nothing of the library's) */
        if (mode[0] == 'w' && host_read_user(&first, path, 1) == 0 &&
            host_fds_path_hidden(AT_FDCWD, path, 0, 0, ra)) {
            errno = ENOENT;
            return NULL;
        }
        (void)host_fds_creating(NULL, &entries);
        f = real(path, mode);
        host_fds_file_lower(f, entries);
        if (host_fds_path_hidden(AT_FDCWD, path, f != NULL ? 0 : -1, errno, ra)) {
            if (f != NULL) {
                (void)fclose(f);
            }
            errno = ENOENT;
            return NULL;
        }
        if (f != NULL && mode[0] == 'r' && strchr(mode, '+') == NULL) {
            (void)host_procstat_maybe(fileno(f), path, strchr(mode, 'e') != NULL ? O_CLOEXEC : 0,
                                      ra);
        }
        return f;
    }
    fd = host_fd_take(open(path, O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
        return NULL;
    }
    f = fdopen(fd, mode);
    if (f == NULL) {
        host_fd_forget(fd);
        host_fds_close_real(fd);
    }
    return f;
}

HOST_EXPORT FILE *
fopen(const char *path, const char *mode)
{
    return host_fds_fopen(HOST_FDS_REAL(FILE * (*)(const char *, const char *), fopen), path, mode,
                          __builtin_return_address(0));
}

HOST_EXPORT FILE *
fopen64(const char *path, const char *mode)
{
    return host_fds_fopen(HOST_FDS_REAL(FILE * (*)(const char *, const char *), fopen64), path,
                          mode, __builtin_return_address(0));
}

/* tmpfile and tmpfile64 open inside libc: as fopen's, the host's waits and moves down through
 * glibc's FILE, the library's moves high. */
static FILE *
host_fds_tmpfile(FILE *(*real)(void), const void *ra)
{
    unsigned entries = 0;
    int library;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    library = host_fds_creating(ra, &entries);
    return host_fds_file_created(real(), library, entries);
}

HOST_EXPORT FILE *
tmpfile(void)
{
    return host_fds_tmpfile(HOST_FDS_REAL(FILE * (*)(void), tmpfile), __builtin_return_address(0));
}

HOST_EXPORT FILE *
tmpfile64(void)
{
    return host_fds_tmpfile(HOST_FDS_REAL(FILE * (*)(void), tmpfile64),
                            __builtin_return_address(0));
}

/* popen: glibc makes its pipe inside (pipe2) and starts the command with posix_spawn inside (not
 * exec.c's interposer): the stream's fd moves as tmpfile's, and the command keeps a SIG_IGN the
 * host has for the library's signal, as posix_spawn's (host_signals_spawn_begin). */
HOST_EXPORT FILE *
popen(const char *command, const char *mode)
{
    FILE *(*real)(const char *, const char *) =
            HOST_FDS_REAL(FILE * (*)(const char *, const char *), popen);
    unsigned entries = 0;
    int library, ignored;
    FILE *f;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    library = host_fds_creating(__builtin_return_address(0), &entries);
    ignored = host_signals_spawn_begin();
    f = real(command, mode);
    host_signals_spawn_end(ignored);
    return host_fds_file_created(f, library, entries);
}

/*
 * A host's call that makes an fd inside libc and keeps it at its number, which cannot be moved
 * after (freopen's, syslog's): it counts itself in as the closes do (host_fds_gate_host_enter),
 * so that no library fd is in its low moment across it and the number is bare's. Returns whether
 * the caller (return address ra) is the host's, for host_fds_kept_end.
 */
static int
host_fds_kept_begin(const void *ra)
{
    if (host_fds_library_call(ra)) {
        return 0;
    }
    /* A creation's wait, not a close's: the host's creations' bound (the close's 50 ms, 2 s with
     * PIPEPROF_TEST_FD_LOW_MS). With the close's, host-contract-fds-create's getnetent (and
     * getprotoent) got 9 where bare gets 8 in 2 of 4 runs at a load of 25: the knob's library
     * thread, preempted in its low moment, held its fd low past 50 ms. */
    host_fds_gate_host_enter_for(host_fds_create_bound());
    return 1;
}

static void
host_fds_kept_end(int host)
{
    if (host) {
        host_fds_gate_host_leave();
    }
}

/*
 * freopen and freopen64: glibc opens the new file at the lowest free number and dup3()s it onto
 * the stream's own number, which the stream keeps (its old file is not closed first). That dup3
 * is a close of whatever holds the number: a host that closed the stream's fd (a daemon's
 * close(0), then freopen("/dev/null", "r", stdin)) while a library fd sat at that number in its
 * low moment had it taken over, and the library's move then closed the host's new fd. So the
 * host's freopen counts itself in as the closes do (host_fds_kept_begin); its number is the
 * stream's, as bare, and is never moved. The library's are libc's.
 */
static FILE *
host_fds_freopen(FILE *(*real)(const char *, const char *, FILE *), const char *path,
                 const char *mode, FILE *stream, const void *ra)
{
    FILE *f;
    int host;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    host = host_fds_kept_begin(ra);
    f = real(path, mode, stream);
    host_fds_kept_end(host);
    return f;
}

HOST_EXPORT FILE *
freopen(const char *path, const char *mode, FILE *stream)
{
    return host_fds_freopen(HOST_FDS_REAL(FILE * (*)(const char *, const char *, FILE *), freopen),
                            path, mode, stream, __builtin_return_address(0));
}

HOST_EXPORT FILE *
freopen64(const char *path, const char *mode, FILE *stream)
{
    return host_fds_freopen(
            HOST_FDS_REAL(FILE * (*)(const char *, const char *, FILE *), freopen64), path, mode,
            stream, __builtin_return_address(0));
}

/*
 * openlog, syslog, vsyslog, __syslog_chk and __vsyslog_chk (what programs built with
 * _FORTIFY_SOURCE call): glibc opens its socket to /dev/log inside (openlog with LOG_NDELAY, a
 * message's call when none is connected, again after a failed send) and keeps it. A library fd in
 * its low moment then gave the socket the next number, and the host's next creation the one bare
 * gives the socket; glibc keeps the number, so it cannot be moved down after: the host's call
 * counts itself in as freopen's does (host_fds_kept_begin). syslog's and __syslog_chk's messages
 * go to libc's vsyslog and __vsyslog_chk, which make them as syslog's own do; closelog needs
 * nothing (it closes the host's own socket). errno, which %m prints, is the caller's.
 */
HOST_EXPORT void
openlog(const char *ident, int option, int facility)
{
    void (*real)(const char *, int, int) = HOST_FDS_REAL(void (*)(const char *, int, int), openlog);
    int host;

    if (real != NULL) {
        host = host_fds_kept_begin(__builtin_return_address(0));
        real(ident, option, facility);
        host_fds_kept_end(host);
    }
}

/* A message of the caller whose return address is ra, by libc's vsyslog or (chk) its
 * __vsyslog_chk with flag. */
static void
host_fds_vsyslog(const void *ra, int chk, int pri, int flag, const char *fmt, va_list ap)
{
    void (*real)(int, const char *, va_list) =
            HOST_FDS_REAL(void (*)(int, const char *, va_list), vsyslog);
    void (*real_chk)(int, int, const char *, va_list) =
            HOST_FDS_REAL(void (*)(int, int, const char *, va_list), __vsyslog_chk);
    int host;

    if (chk ? real_chk == NULL : real == NULL) {
        return;
    }
    host = host_fds_kept_begin(ra);
    if (chk) {
        real_chk(pri, flag, fmt, ap);
    } else {
        real(pri, fmt, ap);
    }
    host_fds_kept_end(host);
}

HOST_EXPORT void
vsyslog(int pri, const char *fmt, va_list ap)
{
    host_fds_vsyslog(__builtin_return_address(0), 0, pri, 0, fmt, ap);
}

HOST_EXPORT void
syslog(int pri, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    host_fds_vsyslog(__builtin_return_address(0), 0, pri, 0, fmt, ap);
    va_end(ap);
}

void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap);
void __syslog_chk(int pri, int flag, const char *fmt, ...);

HOST_EXPORT void
__vsyslog_chk(int pri, int flag, const char *fmt, va_list ap)
{
    host_fds_vsyslog(__builtin_return_address(0), 1, pri, flag, fmt, ap);
}

HOST_EXPORT void
__syslog_chk(int pri, int flag, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    host_fds_vsyslog(__builtin_return_address(0), 1, pri, flag, fmt, ap);
    va_end(ap);
}

/*
 * glibc's functions that open a file inside and keep it open across calls (held at its number, so
 * it cannot be moved after): setmntent's stream; the utmp family's file (setutent, getutent,
 * getutid, getutline, pututline and their _r and utmpx names open it lazily, on a first use or
 * after utmpname or endutent; utmpname only closes it, updwtmp opens and closes it); and the
 * enumerations of passwd, group and shadow (setpwent, getpwent, getpwent_r and the group and
 * shadow ones: NSS's files module keeps its stream across them; the by-name and by-id lookups open
 * and close theirs in one call, so no number of the host's changes). A library fd in its low
 * moment gave such a file the next number, and the host's next creation bare's. So the host's
 * call counts itself in as a close, as syslog's does (host_fds_kept_begin); when no library fd is
 * low, its cost is two atomic adds and a load. errno is libc's, kept across the gate. fail is
 * the result when libc has no such function.
 */
#define HOST_FDS_KEPT_CALL(real, fail, args) HOST_FDS_KEPT_CALL_IF(real, fail, args, 1)

/* The same, counted in only when the condition kept holds (evaluated before the call). */
#define HOST_FDS_KEPT_CALL_IF(real, fail, args, kept)                          \
    do {                                                                       \
        int host_;                                                             \
        int err_;                                                              \
                                                                               \
        if ((real) == NULL) {                                                  \
            errno = ENOSYS;                                                    \
            return fail;                                                       \
        }                                                                      \
        host_ = (kept) ? host_fds_kept_begin(__builtin_return_address(0)) : 0; \
        r_ = (real)args;                                                       \
        err_ = errno;                                                          \
        host_fds_kept_end(host_);                                              \
        errno = err_;                                                          \
        return r_;                                                             \
    } while (0)

/* An interposer of libc's name returning type, with parameters params and call arguments args. */
#define HOST_FDS_KEPT(type, name, fail, params, args)                        \
    static _Atomic(void *) real_##name##_p;                                  \
    HOST_EXPORT type name params                                             \
    {                                                                        \
        type r_;                                                             \
                                                                             \
        HOST_FDS_KEPT_CALL(HOST_FDS_REAL(type(*) params, name), fail, args); \
    }

/* The same for a function of libc's without a result, with parameters params and arguments args. */
#define HOST_FDS_KEPT_NONE(name, params, args)                       \
    static _Atomic(void *) real_##name##_p;                          \
    HOST_EXPORT void name params                                     \
    {                                                                \
        void(*real) params = HOST_FDS_REAL(void(*) params, name);    \
        int host;                                                    \
        int err;                                                     \
                                                                     \
        if (real != NULL) {                                          \
            host = host_fds_kept_begin(__builtin_return_address(0)); \
            real args;                                               \
            err = errno;                                             \
            host_fds_kept_end(host);                                 \
            errno = err;                                             \
        }                                                            \
    }
#define HOST_FDS_KEPT_VOID(name) HOST_FDS_KEPT_NONE(name, (void), ())

HOST_FDS_KEPT(FILE *, setmntent, NULL, (const char *file, const char *mode), (file, mode))
HOST_FDS_KEPT_VOID(setutent)
HOST_FDS_KEPT(struct utmp *, getutent, NULL, (void), ())
HOST_FDS_KEPT(struct utmp *, getutid, NULL, (const struct utmp *ut), (ut))
HOST_FDS_KEPT(struct utmp *, getutline, NULL, (const struct utmp *ut), (ut))
HOST_FDS_KEPT(struct utmp *, pututline, NULL, (const struct utmp *ut), (ut))
HOST_FDS_KEPT(int, getutent_r, -1, (struct utmp * buf, struct utmp **res), (buf, res))
HOST_FDS_KEPT(int, getutid_r, -1, (const struct utmp *ut, struct utmp *buf, struct utmp **res),
              (ut, buf, res))
HOST_FDS_KEPT(int, getutline_r, -1, (const struct utmp *ut, struct utmp *buf, struct utmp **res),
              (ut, buf, res))
HOST_FDS_KEPT_VOID(setutxent)
HOST_FDS_KEPT(struct utmpx *, getutxent, NULL, (void), ())
HOST_FDS_KEPT(struct utmpx *, getutxid, NULL, (const struct utmpx *ut), (ut))
HOST_FDS_KEPT(struct utmpx *, getutxline, NULL, (const struct utmpx *ut), (ut))
HOST_FDS_KEPT(struct utmpx *, pututxline, NULL, (const struct utmpx *ut), (ut))
HOST_FDS_KEPT_VOID(setpwent)
HOST_FDS_KEPT(struct passwd *, getpwent, NULL, (void), ())
HOST_FDS_KEPT(int, getpwent_r, ENOSYS,
              (struct passwd * pw, char *buf, size_t len, struct passwd **res), (pw, buf, len, res))
HOST_FDS_KEPT_VOID(setgrent)
HOST_FDS_KEPT(struct group *, getgrent, NULL, (void), ())
HOST_FDS_KEPT(int, getgrent_r, ENOSYS,
              (struct group * gr, char *buf, size_t len, struct group **res), (gr, buf, len, res))
HOST_FDS_KEPT_VOID(setspent)
HOST_FDS_KEPT(struct spwd *, getspent, NULL, (void), ())
HOST_FDS_KEPT(int, getspent_r, ENOSYS, (struct spwd * sp, char *buf, size_t len, struct spwd **res),
              (sp, buf, len, res))

/*
 * The other enumerations NSS's files module keeps a stream for across calls: hosts, networks,
 * protocols, services, rpc and aliases (/etc/hosts, /etc/networks, /etc/protocols, /etc/services,
 * /etc/rpc, /etc/aliases). Each set*ent opens its file at once, whatever its stayopen; each get*ent
 * and get*ent_r opens it on a first use or after end*ent. The by-name, by-number and by-port
 * lookups (getservbyname, getprotobynumber, gethostbyname's files part...) open and close a stream
 * of their own in one call, even after a set*ent(1): glibc 2.36 under strace and /proc/self/fd.
 * The netgroup calls keep nothing: the files module reads the group at setnetgrent and closes its
 * file (NIS's kept binding, as any NSS module's own socket, is not covered).
 */
#define HOST_FDS_KEPT_SET(name) HOST_FDS_KEPT_NONE(name, (int stayopen), (stayopen))

/* get<ent> and get<ent>_r of struct <ent>, the _r one with h_errno's pointer last or not. */
#define HOST_FDS_KEPT_GETENT(ent)                           \
    HOST_FDS_KEPT(struct ent *, get##ent, NULL, (void), ()) \
    HOST_FDS_KEPT(int, get##ent##_r, ENOSYS,                \
                  (struct ent * e, char *buf, size_t len, struct ent **res), (e, buf, len, res))
#define HOST_FDS_KEPT_GETENT_H(ent)                                                     \
    HOST_FDS_KEPT(struct ent *, get##ent, NULL, (void), ())                             \
    HOST_FDS_KEPT(int, get##ent##_r, ENOSYS,                                            \
                  (struct ent * e, char *buf, size_t len, struct ent **res, int *herr), \
                  (e, buf, len, res, herr))

HOST_FDS_KEPT_SET(sethostent)
HOST_FDS_KEPT_GETENT_H(hostent)
HOST_FDS_KEPT_SET(setnetent)
HOST_FDS_KEPT_GETENT_H(netent)
HOST_FDS_KEPT_SET(setprotoent)
HOST_FDS_KEPT_GETENT(protoent)
HOST_FDS_KEPT_SET(setservent)
HOST_FDS_KEPT_GETENT(servent)
HOST_FDS_KEPT_SET(setrpcent)
HOST_FDS_KEPT_GETENT(rpcent)
HOST_FDS_KEPT_VOID(setaliasent)
HOST_FDS_KEPT_GETENT(aliasent)

/*
 * The resolver with RES_STAYOPEN in its state's options (res_init, then _res.options |=
 * RES_STAYOPEN; glibc's sethostent(1) no longer sets it): the socket of its first query, UDP or
 * TCP, stays open at its number after the call for the next ones (until res_close or
 * res_nclose), made by the res_* calls and by every lookup that goes to DNS through the calling
 * thread's _res: gethostbyname and its kin, getaddrinfo, getnameinfo, getnetbyname and
 * getnetbyaddr (networks: dns). Counted in as a close only when the state has RES_STAYOPEN (the
 * calling thread's _res, or the res_n* calls' own): without it the socket is closed before the
 * call returns, and a lookup that waits seconds for a server would hold the library's creations
 * at their bound. With it, such a wait does: each library creation meanwhile waits its 500 ms.
 * The __res_* names are those that binaries built before glibc 2.34 call (compat versions,
 * which dlsym does not give): each calls libc's res_* name.
 */
static int
host_fds_stayopen(res_state state)
{
    return state != NULL && (state->options & RES_STAYOPEN) != 0;
}

/* libc's name, or other where libc has no name (a glibc before 2.34, whose res_* calls are
 * libresolv's __res_* names alone). */
static void *
host_fds_real_or(_Atomic(void *) *slot, const char *name, const char *other)
{
    void *p = host_real(slot, name);

    return p != NULL ? p : host_real(slot, other);
}

/* An interposer named export that calls libc's name (or other where libc has no name), counted in
 * when kept holds. */
#define HOST_FDS_KEPT_AS(type, export, name, other, fail, params, args, kept)                      \
    static _Atomic(void *) real_##export##_p;                                                      \
    HOST_EXPORT type export params                                                                 \
    {                                                                                              \
        type r_;                                                                                   \
                                                                                                   \
        HOST_FDS_KEPT_CALL_IF((type(*) params)host_fds_real_or(&real_##export##_p, #name, #other), \
                              fail, args, kept);                                                   \
    }

/* The resolver's call name, also under its __res_ name, with params (a state first when
 * stateful: state names it) and arguments args. */
#define HOST_FDS_RES(name, params, args, state)                                             \
    HOST_FDS_KEPT_AS(int, name, name, __##name, -1, params, args, host_fds_stayopen(state)) \
    HOST_FDS_KEPT_AS(int, __##name, name, __##name, -1, params, args, host_fds_stayopen(state))

int __res_query(const char *dname, int cls, int type, unsigned char *ans, int len);
int __res_search(const char *dname, int cls, int type, unsigned char *ans, int len);
int __res_querydomain(const char *name, const char *domain, int cls, int type, unsigned char *ans,
                      int len);
int __res_send(const unsigned char *msg, int msglen, unsigned char *ans, int len);
int __res_nquery(res_state st, const char *dname, int cls, int type, unsigned char *ans, int len);
int __res_nsearch(res_state st, const char *dname, int cls, int type, unsigned char *ans, int len);
int __res_nquerydomain(res_state st, const char *name, const char *domain, int cls, int type,
                       unsigned char *ans, int len);
int __res_nsend(res_state st, const unsigned char *msg, int msglen, unsigned char *ans, int len);

HOST_FDS_RES(res_query, (const char *dname, int cls, int type, unsigned char *ans, int len),
             (dname, cls, type, ans, len), __res_state())
HOST_FDS_RES(res_search, (const char *dname, int cls, int type, unsigned char *ans, int len),
             (dname, cls, type, ans, len), __res_state())
HOST_FDS_RES(res_querydomain,
             (const char *name, const char *domain, int cls, int type, unsigned char *ans, int len),
             (name, domain, cls, type, ans, len), __res_state())
HOST_FDS_RES(res_send, (const unsigned char *msg, int msglen, unsigned char *ans, int len),
             (msg, msglen, ans, len), __res_state())
HOST_FDS_RES(res_nquery,
             (res_state st, const char *dname, int cls, int type, unsigned char *ans, int len),
             (st, dname, cls, type, ans, len), st)
HOST_FDS_RES(res_nsearch,
             (res_state st, const char *dname, int cls, int type, unsigned char *ans, int len),
             (st, dname, cls, type, ans, len), st)
HOST_FDS_RES(res_nquerydomain,
             (res_state st, const char *name, const char *domain, int cls, int type,
              unsigned char *ans, int len),
             (st, name, domain, cls, type, ans, len), st)
HOST_FDS_RES(res_nsend,
             (res_state st, const unsigned char *msg, int msglen, unsigned char *ans, int len),
             (st, msg, msglen, ans, len), st)

/* A lookup that may go to DNS through the calling thread's _res. */
#define HOST_FDS_LOOKUP(type, name, fail, params, args) \
    HOST_FDS_KEPT_AS(type, name, name, name, fail, params, args, host_fds_stayopen(__res_state()))

HOST_FDS_LOOKUP(struct hostent *, gethostbyname, NULL, (const char *name), (name))
HOST_FDS_LOOKUP(struct hostent *, gethostbyname2, NULL, (const char *name, int af), (name, af))
HOST_FDS_LOOKUP(struct hostent *, gethostbyaddr, NULL, (const void *addr, socklen_t len, int type),
                (addr, len, type))
HOST_FDS_LOOKUP(int, gethostbyname_r, ENOSYS,
                (const char *name, struct hostent *he, char *buf, size_t len, struct hostent **res,
                 int *herr),
                (name, he, buf, len, res, herr))
HOST_FDS_LOOKUP(int, gethostbyname2_r, ENOSYS,
                (const char *name, int af, struct hostent *he, char *buf, size_t len,
                 struct hostent **res, int *herr),
                (name, af, he, buf, len, res, herr))
HOST_FDS_LOOKUP(int, gethostbyaddr_r, ENOSYS,
                (const void *addr, socklen_t alen, int type, struct hostent *he, char *buf,
                 size_t len, struct hostent **res, int *herr),
                (addr, alen, type, he, buf, len, res, herr))
HOST_FDS_LOOKUP(int, getaddrinfo, EAI_SYSTEM,
                (const char *node, const char *service, const struct addrinfo *hints,
                 struct addrinfo **res),
                (node, service, hints, res))
HOST_FDS_LOOKUP(int, getnameinfo, EAI_SYSTEM,
                (const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                 char *serv, socklen_t servlen, int flags),
                (sa, salen, host, hostlen, serv, servlen, flags))
HOST_FDS_LOOKUP(struct netent *, getnetbyname, NULL, (const char *name), (name))
HOST_FDS_LOOKUP(struct netent *, getnetbyaddr, NULL, (uint32_t net, int type), (net, type))
HOST_FDS_LOOKUP(int, getnetbyname_r, ENOSYS,
                (const char *name, struct netent *ne, char *buf, size_t len, struct netent **res,
                 int *herr),
                (name, ne, buf, len, res, herr))
HOST_FDS_LOOKUP(int, getnetbyaddr_r, ENOSYS,
                (uint32_t net, int type, struct netent *ne, char *buf, size_t len,
                 struct netent **res, int *herr),
                (net, type, ne, buf, len, res, herr))

HOST_EXPORT int
fclose(FILE *f)
{
    static _Atomic(void *) real_p;
    int (*real)(FILE *) = (int (*)(FILE *))host_real(&real_p, "fclose");

    if (real == NULL) {
        errno = ENOSYS;
        return EOF;
    }
    if (host_fd_is_owned(fileno(f)) && host_fds_library_call(__builtin_return_address(0))) {
        int fd = fileno(f), rc;

        host_fds_mark_lock_take();
        rc = real(f);
        host_fds_library_stream_closed(fd);
        return rc;
    }
    return real(f);
}

HOST_EXPORT DIR *
opendir(const char *path)
{
    DIR *(*real)(const char *) = HOST_FDS_REAL(DIR * (*)(const char *), opendir);
    unsigned entries = 0;
    DIR *d;
    int fd;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    if (!host_fds_library_call(__builtin_return_address(0))) {
        /* The host's: opened here as glibc's opendir does (O_NONBLOCK: a FIFO does not block), so
         * that the fd moves down as the other creators' (a DIR's fd cannot be changed after). */
        int (*open_real)(const char *, int, ...) =
                HOST_FDS_REAL(int (*)(const char *, int, ...), open);
        int library;

        if (open_real == NULL) {
            return real(path);
        }
        library = host_fds_creating(NULL, &entries);
        fd = (int)host_fds_path_result(
                AT_FDCWD, path,
                host_fds_created_by(library, entries,
                                    open_real(path, O_RDONLY | O_NONBLOCK | O_DIRECTORY |
                                                            O_CLOEXEC | O_LARGEFILE)),
                1, __builtin_return_address(0));
        if (fd < 0) {
            return NULL;
        }
        d = fdopendir(fd);
        if (d == NULL) {
            int err = errno;

            host_fds_close_real(fd);
            errno = err;
        }
        return d;
    }
    fd = host_fd_take(open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0) {
        return NULL;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        host_fd_forget(fd);
        host_fds_close_real(fd);
    }
    return d;
}

/* Each closedir (the library's and the host's) counts here: a DIR's memory and its fd number may
 * be another directory's after it (host_fds_dir_hidden's cache). */
static _Atomic unsigned host_fds_dir_closes;
/* The calling thread's closedirs of its own DIRs: a listing's since (host_fds_dir_hidden) is
 * kept across the library's closedirs, which change host_fds_dir_closes in the middle of it. */
static _Thread_local unsigned host_fds_host_closedirs;

/* 1 when an entry named name that readdir read from d is a library fd's in this process's fd or
 * fdinfo directory, or a library thread's in its task directory (a number can be both: tids are
 * small in a pid namespace). What d's directory is (a readlink) is asked once per listing, not per
 * library number: the answer is kept per thread for d and its fd until a closedir anywhere
 * (fdcost: /proc/self/fd listed 2.95x bare's with a readlink for each of the library's 10
 * entries). */
static int
host_fds_dir_hidden(DIR *d, const char *name, unsigned before, const void *ra)
{
    static _Thread_local struct {
        DIR *d;
        int fd;
        unsigned closes;
        unsigned since;          /* the listing's first readdir began there: glibc's read of it */
        unsigned host_closedirs; /* host_fds_host_closedirs when since was taken */
        int fd_dir, task_dir;    /* -1: not asked yet */
    } seen;
    unsigned closes = atomic_load_explicit(&host_fds_dir_closes, memory_order_acquire);
    int fd = dirfd(d), library_fd, library_tid;

    if (seen.d != d || seen.fd != fd || seen.host_closedirs != host_fds_host_closedirs) {
        seen.since = before;
        seen.host_closedirs = host_fds_host_closedirs;
    }
    if (seen.d != d || seen.fd != fd || seen.closes != closes) {
        seen.fd_dir = -1;
        seen.task_dir = -1;
        seen.d = d;
        seen.fd = fd;
        seen.closes = closes;
    }
    library_fd = host_fds_name_listed_library(name, seen.since);
    library_tid = host_fds_name_library_tid(name);
    if (!library_fd && !library_tid) {
        return 0;
    }
    if (library_fd && seen.fd_dir < 0) {
        seen.fd_dir = host_fds_is_fd_dir(fd);
    }
    if (library_tid && seen.task_dir < 0) {
        seen.task_dir = host_fds_is_task_dir(fd);
    }
    return ((library_fd && seen.fd_dir > 0) || (library_tid && seen.task_dir > 0)) &&
           !host_fds_library_call(ra);
}

HOST_EXPORT int
closedir(DIR *d)
{
    static _Atomic(void *) real_p;
    int (*real)(DIR *) = (int (*)(DIR *))host_real(&real_p, "closedir");

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    /* before the close: a DIR that takes d's memory or number after it is seen as new */
    atomic_fetch_add_explicit(&host_fds_dir_closes, 1, memory_order_acq_rel);
    if (host_fd_is_owned(dirfd(d)) && host_fds_library_call(__builtin_return_address(0))) {
        int fd = dirfd(d), rc;

        host_fds_mark_lock_take();
        rc = real(d);
        host_fds_library_stream_closed(fd);
        return rc;
    }
    host_fds_host_closedirs++;
    return real(d);
}

/* The host's listing of this process's fd or fdinfo directory leaves the library's numbers out
 * (host_fds_dir_hidden: an entry whose name is not a library number passes at once; glibc's
 * readdir reads through its internal getdents64, which no interposer sees). */
#define HOST_FDS_READDIR(type, name)                                                              \
    HOST_EXPORT type *name(DIR *d)                                                                \
    {                                                                                             \
        static _Atomic(void *) real_p;                                                            \
        type *(*real)(DIR *) = (type * (*)(DIR *)) host_real(&real_p, #name);                     \
        type *e;                                                                                  \
        unsigned before;                                                                          \
                                                                                                  \
        if (real == NULL) {                                                                       \
            errno = ENOSYS;                                                                       \
            return NULL;                                                                          \
        }                                                                                         \
        do {                                                                                      \
            before = host_fds_listing_begins();                                                   \
            e = real(d);                                                                          \
        } while (e != NULL &&                                                                     \
                 host_fds_dir_hidden(d, e->d_name, before, __builtin_return_address(0)));         \
        return e;                                                                                 \
    }                                                                                             \
    HOST_EXPORT int name##_r(DIR *d, type *entry, type **result)                                  \
    {                                                                                             \
        static _Atomic(void *) real_p;                                                            \
        int (*real)(DIR *, type *, type **) =                                                     \
                (int (*)(DIR *, type *, type **))host_real(&real_p, #name "_r");                  \
        int rc;                                                                                   \
        unsigned before;                                                                          \
                                                                                                  \
        if (real == NULL) {                                                                       \
            return ENOSYS;                                                                        \
        }                                                                                         \
        do {                                                                                      \
            before = host_fds_listing_begins();                                                   \
            rc = real(d, entry, result);                                                          \
        } while (rc == 0 && *result != NULL &&                                                    \
                 host_fds_dir_hidden(d, (*result)->d_name, before, __builtin_return_address(0))); \
        return rc;                                                                                \
    }

HOST_FDS_READDIR(struct dirent, readdir)
HOST_FDS_READDIR(struct dirent64, readdir64)

/*
 * scandir and scandir64 list through glibc's internal opendir and readdir, which no interposer
 * sees (Node's fs.readdirSync, through libuv's uv_fs_scandir): for a path that is this process's
 * fd, fdinfo or task directory (looked at through a raw open, only for a path under /proc/ or
 * /dev/), the host's filter is wrapped by one that drops the library's entries. The wrapper's
 * state is per thread, saved and restored around the call (a filter may list too).
 */
enum { HOST_FDS_SCAN_NONE, HOST_FDS_SCAN_FDS, HOST_FDS_SCAN_TASKS };
static _Thread_local int host_fds_scan_kind;
static _Thread_local unsigned host_fds_scan_since; /* host_fds_listing_begins() at the call */
static _Thread_local int (*host_fds_scan_filter)(const struct dirent *);
static _Thread_local int (*host_fds_scan_filter64)(const struct dirent64 *);

static int
host_fds_scan_kind_of(const char *path, const void *ra)
{
    int kind = HOST_FDS_SCAN_NONE, saved = errno;
    long fd;

    if (path == NULL || (strncmp(path, "/proc/", 6) != 0 && strncmp(path, "/dev/", 5) != 0) ||
        host_fds_library_call(ra)) {
        return kind;
    }
    fd = host_raw_syscall(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                          0, 0);
    if (fd >= 0) {
        kind = host_fds_is_fd_dir((int)fd)     ? HOST_FDS_SCAN_FDS
               : host_fds_is_task_dir((int)fd) ? HOST_FDS_SCAN_TASKS
                                               : HOST_FDS_SCAN_NONE;
        host_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    }
    errno = saved;
    return kind;
}

/* 0 when the entry named name is the library's (the listing drops it). */
static int
host_fds_scan_library(const char *name)
{
    return host_fds_scan_kind == HOST_FDS_SCAN_FDS
                   ? host_fds_name_listed_library(name, host_fds_scan_since)
                   : host_fds_name_library_tid(name);
}

/* The wrappers of the host's filters: the library's entries dropped, the host's filter asked. */
static int
host_fds_scan_keep(const struct dirent *e)
{
    return !host_fds_scan_library(e->d_name) &&
           (host_fds_scan_filter == NULL || host_fds_scan_filter(e));
}

static int
host_fds_scan_keep64(const struct dirent64 *e)
{
    return !host_fds_scan_library(e->d_name) &&
           (host_fds_scan_filter64 == NULL || host_fds_scan_filter64(e));
}

#define HOST_FDS_SCANDIR(type, name, keep, slot)                                           \
    HOST_EXPORT int name(const char *path, type ***list, int (*filter)(const type *),      \
                         int (*compar)(const type **, const type **))                      \
    {                                                                                      \
        static _Atomic(void *) real_p;                                                     \
        int (*real)(const char *, type ***, int (*)(const type *),                         \
                    int (*)(const type **, const type **)) =                               \
                (int (*)(const char *, type ***, int (*)(const type *),                    \
                         int (*)(const type **, const type **)))host_real(&real_p, #name); \
        int kind = host_fds_scan_kind_of(path, __builtin_return_address(0));               \
        int saved_kind = host_fds_scan_kind, rc;                                           \
        unsigned saved_since = host_fds_scan_since;                                        \
        int (*saved_filter)(const type *) = slot;                                          \
                                                                                           \
        if (real == NULL) {                                                                \
            errno = ENOSYS;                                                                \
            return -1;                                                                     \
        }                                                                                  \
        if (kind == HOST_FDS_SCAN_NONE) {                                                  \
            return real(path, list, filter, compar);                                       \
        }                                                                                  \
        host_fds_scan_kind = kind;                                                         \
        host_fds_scan_since = host_fds_listing_begins();                                   \
        slot = filter;                                                                     \
        rc = real(path, list, keep, compar);                                               \
        host_fds_scan_kind = saved_kind;                                                   \
        host_fds_scan_since = saved_since;                                                 \
        slot = saved_filter;                                                               \
        return rc;                                                                         \
    }

HOST_FDS_SCANDIR(struct dirent, scandir, host_fds_scan_keep, host_fds_scan_filter)
HOST_FDS_SCANDIR(struct dirent64, scandir64, host_fds_scan_keep64, host_fds_scan_filter64)

/*
 * getrlimit getrlimit64 setrlimit setrlimit64 prlimit prlimit64 getdtablesize sysconf: the host's
 * get and set of this process's RLIMIT_NOFILE (sysconf's _SC_OPEN_MAX), counted in the gate as a
 * close is, so that no move's raise of the soft limit (host_fds_move_high) is under way across
 * them: a read answers the host's soft limit, never the raised one, and a set is not undone by a
 * move's restore. One rule for all, as simple as a close's. Past the gate's bound (a library thread
 * preempted in its moment for 50 ms) a read still answers the host's soft limit (the raise's
 * sequence, host_fds_nofile_call) and a set still stays (the restore leaves a limit it did not
 * set). Other resources and other processes pass to libc. Not covered: /proc/self/limits and the
 * raw system call (syscall(SYS_prlimit64), the Go runtime) read the raised soft limit in a move's
 * few microseconds; a vfork or posix_spawn child made then inherits it (a fork child gets the
 * host's back: host_fds_nofile_forked_child).
 */

/*
 * prlimit64 of pid's res as the system call, without a lookup and without a sanitizer's
 * instrumentation: the sanitizers' runtimes call getrlimit and setrlimit (RLIMIT_CORE,
 * RLIMIT_STACK) from their initialisation, before their shadow exists (host_real there: SEGV in
 * every ASan host at its start). glibc's getrlimit, setrlimit and prlimit are this system call on
 * 64-bit targets.
 */
static HOST_FDS_MMAP_PLAIN int
host_fds_prlimit_sys(long pid, long res, const void *set, void *old)
{
    long rc;

#if defined(__x86_64__)
    register long r10 __asm__("r10") = (long)old;

    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"((long)SYS_prlimit64), "D"(pid), "S"(res), "d"(set), "r"(r10)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_prlimit64;
    register long x0 __asm__("x0") = pid;
    register long x1 __asm__("x1") = res;
    register long x2 __asm__("x2") = (long)set;
    register long x3 __asm__("x3") = (long)old;

    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    rc = x0;
#else
    rc = host_raw_syscall(SYS_prlimit64, pid, res, (long)set, (long)old, 0, 0);
    if (rc < 0) {
        return -1; /* errno set */
    }
#endif
    if (rc < 0 && rc > -4096) {
        errno = (int)-rc;
        return -1;
    }
    return 0;
}

/* RLIMIT_NOFILE got (old) or set (set) by the caller whose return address is ra. */
static int
host_fds_rlimit(const struct rlimit *set, struct rlimit *old, const void *ra)
{
    int host = !host_fds_library_call(ra), rc, err;

    if (host) {
        host_fds_gate_host_enter();
    }
    rc = host_fds_nofile_call(set, old);
    err = errno;
    if (host) {
        host_fds_gate_host_leave();
    }
    errno = err;
    return rc;
}

/* pid's res got (old) or set (set) by the caller whose return address is ra: this process's
 * RLIMIT_NOFILE by host_fds_rlimit once the constructor ran, everything else by the system call. */
static HOST_FDS_MMAP_PLAIN int
host_fds_prlimit(pid_t pid, int res, const void *set, void *old, const void *ra)
{
    unsigned seq;
    int rc;

    if (res != RLIMIT_NOFILE || (pid != 0 && pid != getpid())) {
        return host_fds_prlimit_sys(pid, res, set, old);
    }
    if (atomic_load_explicit(&host_fds_rlimit_ready, memory_order_acquire)) {
        return host_fds_rlimit(set, old, ra);
    }
    seq = atomic_load(&host_fds_nofile_seq); /* host_fds_nofile_call's check, without the gate */
    rc = host_fds_prlimit_sys(0, res, set, old);
    if (rc == 0 && old != NULL && ((seq & 1u) != 0 || atomic_load(&host_fds_nofile_seq) != seq)) {
        ((struct rlimit *)old)->rlim_cur = (rlim_t)atomic_load(&host_fds_nofile_soft);
    }
    return rc;
}

#define HOST_FDS_RLIMIT(name, type, set, old)                                        \
    HOST_EXPORT HOST_FDS_MMAP_PLAIN int name(__rlimit_resource_t res, type *rl)      \
    {                                                                                \
        return host_fds_prlimit(0, (int)res, set, old, __builtin_return_address(0)); \
    }

HOST_FDS_RLIMIT(getrlimit, struct rlimit, NULL, rl)
HOST_FDS_RLIMIT(getrlimit64, struct rlimit64, NULL, rl)
HOST_FDS_RLIMIT(setrlimit, const struct rlimit, rl, NULL)
HOST_FDS_RLIMIT(setrlimit64, const struct rlimit64, rl, NULL)

#define HOST_FDS_PRLIMIT(name, type)                                                   \
    HOST_EXPORT HOST_FDS_MMAP_PLAIN int name(pid_t pid, enum __rlimit_resource res,    \
                                             const type *set, type *old)               \
    {                                                                                  \
        return host_fds_prlimit(pid, (int)res, set, old, __builtin_return_address(0)); \
    }

HOST_FDS_PRLIMIT(prlimit, struct rlimit)
HOST_FDS_PRLIMIT(prlimit64, struct rlimit64)

/* getdtablesize and sysconf(_SC_OPEN_MAX): the soft limit, as glibc's (which read it through
 * __getrlimit, no interposer); 256, glibc's OPEN_MAX, when it cannot be read. */
static HOST_FDS_MMAP_PLAIN long
host_fds_open_max(const void *ra)
{
    struct rlimit rl;

    return host_fds_prlimit(0, RLIMIT_NOFILE, NULL, &rl, ra) == 0 ? (long)rl.rlim_cur : 256;
}

HOST_EXPORT HOST_FDS_MMAP_PLAIN int
getdtablesize(void)
{
    return (int)host_fds_open_max(__builtin_return_address(0));
}

#ifdef __GLIBC__
long __sysconf(int name); /* libc's sysconf: no lookup, as runtimes ask it before constructors */
#endif

HOST_EXPORT HOST_FDS_MMAP_PLAIN long
sysconf(int name)
{
    if (name == _SC_OPEN_MAX) {
        return host_fds_open_max(__builtin_return_address(0));
    }
#ifdef __GLIBC__
    return __sysconf(name);
#else
    static _Atomic(void *) real_p;
    long (*real)(int) = (long (*)(int))host_real(&real_p, "sysconf");

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(name);
#endif
}
