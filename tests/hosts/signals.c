/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/signals.c - a host that owns SIGPROF (the profiler's default signal) after the
 * profiler started, or runs handlers on a small alternate stack; host-contract.sh compares its
 * output with a bare run. host/signals.c and host/sig-chain.c are what keep it the same.
 *
 *   signals handler   its own SIGPROF handler: raise() 5 times, then setitimer(ITIMER_PROF) at
 *                     100 Hz for 40 intervals of CPU; oldact shows its handler
 *   signals ignore    signal(SIGPROF, SIG_IGN), then raise() 5 times: it lives
 *   signals spawn     started with SIGPROF ignored (as under nohup-style parents): children by
 *                     posix_spawn, system(), popen() and fork+exec send themselves SIGPROF and
 *                     live (popen's, whose output is read back, says so)
 *   signals sleep     sleep(2) cut short by its own SIGALRM after 0.3, 1.3 and 1.7 s: what
 *                     sleep() returns (glibc: the whole seconds left, 1, 0, 0)
 *   signals altstack  SIGUSR1 and SIGSEGV-style handlers with SA_ONSTACK on a 6 KiB
 *                     sigaltstack, raised 2000 times while burning CPU
 *   signals flags     its own SIGPROF handler with SA_NODEFER (SIGPROF open inside it), with
 *                     sa_mask (SIGUSR2 blocked inside it: one raised there runs after it), with
 *                     SA_RESETHAND (SIG_DFL after one delivery, its flags and mask kept; a forked
 *                     child that raises it twice dies by SIGPROF); the flags a query reports
 *   signals onstack   its own SIGPROF handler with SA_ONSTACK on a 16 KiB sigaltstack, raised
 *                     and driven by setitimer(ITIMER_PROF): where each delivery runs, what
 *                     sigaltstack() says inside, a SA_ONSTACK SIGUSR1 raised inside it (below it
 *                     on the same stack), and an SS_AUTODISARM registration (disarmed inside)
 *   signals restart   its own SIGPROF handler with SA_RESTART, setitimer(ITIMER_PROF) driven by
 *                     a thread that burns CPU (SIGPROF blocked there) and writes a pipe the main
 *                     thread reads: no read fails with EINTR
 *   signals norestart the same without SA_RESTART: reads fail with EINTR, as the kernel says
 *   signals raises    its own SIGPROF handler (SA_SIGINFO) and 20000 sends of SIGPROF to its own
 *                     thread, by raise(), pthread_kill(pthread_self()), tgkill() and
 *                     pthread_sigqueue(pthread_self()) (with a value), each between
 *                     a few microseconds of CPU (the thread runs, so a wall sampler signals it):
 *                     how many reached the handler (bare: each one, at once) and with what
 *                     si_code, si_pid and value
 *   signals others    its own SIGPROF handler (SA_SIGINFO) and 3 x 4000 sends of SIGPROF from the
 *                     main thread to another thread that burns CPU, by pthread_kill,
 *                     pthread_sigqueue (with a value) and tgkill, then 500 by kill(getpid()), each
 *                     one sent once the handler took the one before (so the host never merges its
 *                     own sends): how many reached the handler, on which thread, with what si_code,
 *                     si_pid and value (bare: each one); then 200 raise() calls with SIGPROF
 *                     blocked after 3 ms of CPU: each runs the handler once as the mask opens
 *   signals rawsends  the same sends made by syscall(): 3 x 4000 to the other thread by SYS_tkill,
 *                     SYS_rt_tgsigqueueinfo (SI_QUEUE with a value) and SYS_tgkill, then 200 each
 *                     of SYS_tgkill and SYS_rt_tgsigqueueinfo to itself with SIGPROF blocked,
 *                     then 3 x 5000 to itself with it open, as raises does
 *   signals timer     its own POSIX timer on SIGPROF every 500 us for 1.5 s of CPU, to the thread
 *                     (SIGEV_THREAD_ID), then to the process (SIGEV_SIGNAL): its handler runs
 *                     plus their si_overrun are the expirations the time says, each with
 *                     SI_TIMER and its value, si_overrun as timer_getoverrun says
 *   signals smallstack  burns 300 ms of CPU in a coroutine on a stack of one page above a guard
 *                     page with a 32 KiB sigaltstack registered, as Go's goroutines run: the
 *                     agent's signals must go to the alternate stack (its handler SA_ONSTACK)
 *   signals offstack  burns 300 ms of CPU in a coroutine (swapcontext) whose stack is its
 *                     sigaltstack, as green-thread libraries may: the kernel reports that code
 *                     as on the alternate stack, the agent takes no sample there and says so
 *                     (host-contract.sh checks the recording's lost samples: HC_EXPECT_LOST)
 *   signals execblocked  SIGPROF blocked, 300 ms of CPU, then an exec of itself without
 *                     LD_PRELOAD (a program the agent is not in, as after a setuid exec or a
 *                     cleared environment), which opens SIGPROF and says it lives. A signal of
 *                     the agent's left pending for the blocked thread went through the exec
 *                     and ended the new program by SIGPROF (its SIG_DFL) as it opened the mask
 *   signals execwhile 20 forked children, each of which burns 30 ms of CPU with SIGPROF open
 *                     and execs the same program: the exec while the agent samples the thread
 *                     (with PIPEPROF_TEST_QUICK_STOP_MS=0 the sessions' stop before the exec gives
 *                     up at once, as one that outlasted its bound on a loaded machine); each
 *                     child's status
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "hosts.h"

extern char **environ;
static volatile sig_atomic_t got;

/*
 * Under ThreadSanitizer, what its runtime itself changes in a host's signals, bare as under the
 * agent (docs/architecture.md, "Sanitizers", shows each with a minimal program run bare): it
 * installs its own handler for the host's, with every signal in its mask, and runs the host's
 * handler from it (a signal the thread sends itself by raise, kill or pthread_kill) or later, at
 * its next interceptor (any other signal that comes outside one of its blocking calls), from its
 * own code on the thread's stack, with a copy of the context and one instance held per signal
 * and thread; a query of a disposition the kernel reset reads the kernel's record of its
 * wrapper. A probe of these prints that it is skipped there, and why, on every run alike
 * (host-contract.sh repeats each such line, loudly); the rest of the line is compared.
 */
#ifdef HOST_TSAN
static const int host_tsan = 1;
#else
static const int host_tsan = 0;
#endif

static void
on_prof(int sig)
{
    (void)sig;
    got++;
}

/* sigaction(sig) with handler, flags and an empty mask. */
static void
set_handler(int sig, void (*handler)(int), int flags)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

static int
own_handler(void)
{
    struct sigaction sa, old;
    struct itimerval it = { { 0, 10000 }, { 0, 10000 } }, off = { { 0, 0 }, { 0, 0 } };

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_prof;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, &old);
    printf("old disposition: %s\n", old.sa_handler == SIG_DFL ? "SIG_DFL" : "other");
    host_burn_us(200000);
    printf("deliveries while burning 200 ms: %d\n", (int)got);
    for (int i = 0; i < 5; i++) {
        raise(SIGPROF);
    }
    printf("deliveries after 5 raise(): %d\n", (int)got);
    got = 0;
    setitimer(ITIMER_PROF, &it, NULL);
    while (got < 40) {
        host_burn_us(1000);
    }
    setitimer(ITIMER_PROF, &off, NULL);
    printf("setitimer: 40 deliveries\n");
    sigaction(SIGPROF, NULL, &old);
    printf("current disposition: %s\n", old.sa_handler == on_prof ? "its handler" : "other");
    return 0;
}

static int
ignore(void)
{
    void (*prev)(int) = signal(SIGPROF, SIG_IGN);

    printf("signal() returned %s\n", prev == SIG_DFL ? "SIG_DFL" : "other");
    for (int i = 0; i < 5; i++) {
        raise(SIGPROF);
    }
    host_burn_us(100000);
    printf("alive after 5 raise() with SIG_IGN\n");
    printf("SIG_IGN reported: %s\n", signal(SIGPROF, SIG_IGN) == SIG_IGN ? "yes" : "no");
    return 0;
}

static const char *const child_cmd = "kill -PROF $$; echo child alive";

static void
report(const char *how, int status)
{
    if (WIFEXITED(status)) {
        printf("%s: child exited %d\n", how, WEXITSTATUS(status));
    } else {
        printf("%s: child killed by signal %d\n", how, WTERMSIG(status));
    }
}

/* popen starts its command with posix_spawn inside libc, not through the interposer: the child
 * must still start with SIGPROF ignored (host/fds.c's popen). Its output line, and how it ended. */
static void
spawn_popen(void)
{
    char line[64] = "";
    FILE *f = popen(child_cmd, "r");

    if (f == NULL) {
        perror("popen");
        return;
    }
    if (fgets(line, sizeof(line), f) == NULL) {
        strcpy(line, "(nothing)\n");
    }
    printf("popen read: %s", line);
    report("popen", pclose(f));
}

static int
spawn(char **argv)
{
    char *sh[] = { "sh", "-c", (char *)child_cmd, NULL };
    pid_t pid;
    int status;

    if (argv[2] == NULL) { /* first: become a process that starts with SIGPROF ignored */
        char *again[] = { argv[0], argv[1], "ignored", NULL };

        signal(SIGPROF, SIG_IGN);
        execv("/proc/self/exe", again);
        perror("execv");
        return 1;
    }
    host_burn_us(100000);
    fflush(stdout);
    if (posix_spawn(&pid, "/bin/sh", NULL, NULL, sh, environ) == 0 &&
        waitpid(pid, &status, 0) == pid) {
        report("posix_spawn", status);
    }
    fflush(stdout);
    status = system(child_cmd);
    report("system", status);
    fflush(stdout);
    spawn_popen();
    pid = fork();
    if (pid == 0) {
        execv("/bin/sh", sh);
        _exit(127);
    }
    if (waitpid(pid, &status, 0) == pid) {
        report("fork+exec", status);
    }
    return 0;
}

static volatile sig_atomic_t usr1;

static void
on_usr1(int sig)
{
    volatile unsigned long x = 0;

    (void)sig;
    for (int i = 0; i < 20000; i++) { /* tens of microseconds: the sampling signal comes */
        x += (unsigned long)i;
    }
    usr1++;
}

static int
altstack(void)
{
    static char stack[6 * 1024];
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack), .ss_flags = 0 };
    struct sigaction old;

    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        return 1;
    }
    set_handler(SIGUSR1, on_usr1, SA_ONSTACK | SA_RESTART);
    for (int i = 0; i < 2000; i++) {
        raise(SIGUSR1);
        host_burn_us(100);
    }
    sigaction(SIGUSR1, NULL, &old);
    printf("SIGUSR1 on a 6 KiB alternate stack: %d handled\n", (int)usr1);
    printf("its mask as reported: %s\n", sigismember(&old.sa_mask, SIGPROF) ? "SIGPROF" : "empty");
    return 0;
}

static void
on_alarm(int sig)
{
    (void)sig;
}

static int
sleep_left(void)
{
    static const long us[] = { 300000, 1300000, 1700000 };

    set_handler(SIGALRM, on_alarm, 0);
    for (int i = 0; i < 3; i++) {
        struct itimerval it = { { 0, 0 }, { us[i] / 1000000, us[i] % 1000000 } };

        setitimer(ITIMER_REAL, &it, NULL);
        printf("sleep(2) interrupted after %ld ms: returned %u\n", us[i] / 1000, sleep(2));
    }
    return 0;
}

static volatile sig_atomic_t prof_open, usr2_blocked, usr2_got, usr2_inside;

static void
on_usr2(int sig)
{
    (void)sig;
    usr2_got++;
}

static void
on_prof_mask(int sig)
{
    sigset_t now;

    (void)sig;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    prof_open = !sigismember(&now, SIGPROF);
    usr2_blocked = sigismember(&now, SIGUSR2);
    usr2_got = 0;
    raise(SIGUSR2);
    usr2_inside = usr2_got;
    got++;
}

/* Installs on_prof_mask for SIGPROF with flags and mask, raises it once, says what it saw. */
static void
raise_with(const char *what, int flags, int mask_usr2)
{
    struct sigaction sa, old;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_prof_mask;
    sigemptyset(&sa.sa_mask);
    if (mask_usr2) {
        sigaddset(&sa.sa_mask, SIGUSR2);
    }
    sa.sa_flags = flags;
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGPROF, NULL, &old);
    if (host_tsan && (flags & 0x400000)) {
        /* the kernel drops a flag it does not know; TSan's runtime answers from its own copy */
        printf("%s: flags read back %#x, the unknown flag: SKIPPED under TSan (its runtime keeps "
               "it)\n",
               what, (unsigned)old.sa_flags & ~0x400000u);
    } else {
        printf("%s: flags read back %#x\n", what, (unsigned)old.sa_flags);
    }
    got = 0;
    raise(SIGPROF);
    sigaction(SIGPROF, NULL, &old);
    if (host_tsan) {
        printf("%s: %d delivery, then %s; the masks inside it: SKIPPED under TSan (its runtime "
               "runs every handler with all signals blocked)%s\n",
               what, (int)got, old.sa_handler == SIG_DFL ? "SIG_DFL" : "its handler",
               old.sa_handler == SIG_DFL ? "; the flags and mask a query shows after the reset: "
                                           "SKIPPED under TSan (the kernel's record of its "
                                           "runtime's handler)"
                                         : "");
        return;
    }
    printf("%s: %d delivery, SIGPROF %s and SIGUSR2 %s inside (raised there: ran %s), then %s, "
           "flags %#x, SIGUSR2 %s its mask\n",
           what, (int)got, prof_open ? "open" : "blocked", usr2_blocked ? "blocked" : "open",
           usr2_inside ? "inside" : "after it",
           old.sa_handler == SIG_DFL ? "SIG_DFL" : "its handler", (unsigned)old.sa_flags,
           sigismember(&old.sa_mask, SIGUSR2) ? "in" : "not in");
}

static int
flags(void)
{
    pid_t pid;
    int status;

    signal(SIGUSR2, on_usr2);
    host_burn_us(50000);
    raise_with("no flags", 0, 0);
    raise_with("SA_NODEFER", SA_NODEFER, 0);
    raise_with("sa_mask SIGUSR2", SA_RESTART, 1);
    raise_with("SA_RESETHAND", SA_RESETHAND, 0);
    raise_with("SA_RESETHAND, sa_mask SIGUSR2, unknown flag 0x400000", SA_RESETHAND | 0x400000, 1);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        raise_with("child, SA_RESETHAND", SA_RESETHAND, 0);
        fflush(stdout);
        raise(SIGPROF); /* the default action: ends the child */
        _exit(0);
    }
    waitpid(pid, &status, 0);
    report("child raising SIGPROF twice", status);
    return 0;
}

static ucontext_t main_ctx, burn_ctx;

static void
burn_there(void)
{
    host_burn_us(300000);
}

/* Registers alt as its sigaltstack, then burns 300 ms in a coroutine on [sp, sp + size): 0, or
 * 1 with a line on stderr. */
static int
burn_on(const stack_t *alt, void *sp, size_t size)
{
    if (sigaltstack(alt, NULL) != 0 || getcontext(&burn_ctx) != 0) {
        perror("sigaltstack");
        return 1;
    }
    burn_ctx.uc_stack.ss_sp = sp;
    burn_ctx.uc_stack.ss_size = size;
    burn_ctx.uc_stack.ss_flags = 0;
    burn_ctx.uc_link = &main_ctx;
    makecontext(&burn_ctx, burn_there, 0);
    if (swapcontext(&main_ctx, &burn_ctx) != 0) {
        perror("swapcontext");
        return 1;
    }
    return 0;
}

static int
offstack(void)
{
    static char stack[256 * 1024];
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack), .ss_flags = 0 };

    if (burn_on(&ss, stack, sizeof(stack)) != 0) {
        return 1;
    }
    printf("burned 300 ms on its alternate stack\n");
    return 0;
}

/* smallstack: burns 300 ms of CPU in a coroutine on a stack of one 4 KiB page above a guard page
 * while a 32 KiB sigaltstack is registered, as the Go runtime runs goroutines (2 KiB stacks and
 * up, in its heap) on threads whose signal stack it registers, every handler with SA_ONSTACK. */
static int
smallstack(void)
{
    static char alt_stack[32 * 1024];
    stack_t ss = { .ss_sp = alt_stack, .ss_size = sizeof(alt_stack), .ss_flags = 0 };
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);

    if (m == MAP_FAILED || mprotect(m, (size_t)page, PROT_NONE) != 0) {
        perror("mmap");
        return 1;
    }
    if (burn_on(&ss, m + page, (size_t)page) != 0) {
        return 1;
    }
    printf("burned 300 ms on a stack of one page with a 32 KiB sigaltstack\n");
    return 0;
}

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif

static char alt[16 * 1024];
static volatile sig_atomic_t on_alt, off_alt, usr1_below, usr1_off, ss_onstack, ss_disabled;

static int
on_alt_stack(const void *p)
{
    return (const char *)p > alt && (const char *)p <= alt + sizeof(alt);
}

static const char *volatile prof_frame;

static void
on_usr1_nested(int sig)
{
    char here = 0;

    (void)sig;
    if (on_alt_stack(&here) && prof_frame != NULL && &here < prof_frame) {
        usr1_below++;
    } else {
        usr1_off++;
    }
}

static void
on_prof_onstack(int sig)
{
    char here = 0;
    stack_t cur;

    (void)sig;
    if (on_alt_stack(&here)) {
        on_alt++;
    } else {
        off_alt++;
    }
    if (sigaltstack(NULL, &cur) == 0) {
        ss_onstack += (cur.ss_flags & SS_ONSTACK) != 0;
        ss_disabled += (cur.ss_flags & SS_DISABLE) != 0;
    }
    prof_frame = &here;
    raise(SIGUSR1);
    prof_frame = NULL;
    got++;
}

/* Deliveries of SIGPROF by raise() and by setitimer(ITIMER_PROF): where they ran. */
static void
onstack_deliveries(const char *what)
{
    struct itimerval it = { { 0, 10000 }, { 0, 10000 } }, off = { { 0, 0 }, { 0, 0 } };

    on_alt = off_alt = usr1_below = usr1_off = ss_onstack = ss_disabled = 0;
    got = 0;
    for (int i = 0; i < 5; i++) {
        raise(SIGPROF);
    }
    setitimer(ITIMER_PROF, &it, NULL);
    while (got < 25) {
        host_burn_us(1000);
    }
    setitimer(ITIMER_PROF, &off, NULL);
    if (host_tsan) {
        printf("%s: 25 deliveries or more; where they ran and what sigaltstack() says there: "
               "SKIPPED under TSan (its runtime runs a handler from its own code, later)\n",
               what);
        return;
    }
    printf("%s: every delivery on the alternate stack: %s; sigaltstack() inside says "
           "SS_ONSTACK: %s, SS_DISABLE: %s; SIGUSR1 raised inside ran below it there: %s\n",
           what, off_alt == 0 && on_alt == got ? "yes" : "no",
           ss_onstack == got ? "always"
           : ss_onstack == 0 ? "never"
                             : "sometimes",
           ss_disabled == got ? "always"
           : ss_disabled == 0 ? "never"
                              : "sometimes",
           usr1_off == 0 && usr1_below == got ? "yes" : "no");
}

static int
onstack(void)
{
    stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt), .ss_flags = 0 };

    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        return 1;
    }
    set_handler(SIGUSR1, on_usr1_nested, SA_ONSTACK);
    set_handler(SIGPROF, on_prof_onstack, SA_ONSTACK | SA_RESTART);
    onstack_deliveries("SA_ONSTACK");
    ss.ss_flags = (int)SS_AUTODISARM;
    if (sigaltstack(&ss, NULL) != 0) {
        printf("SS_AUTODISARM: not supported\n");
        return 0;
    }
    onstack_deliveries("SA_ONSTACK, SS_AUTODISARM");
    sigaltstack(NULL, &ss);
    printf("after the handlers: %s\n", ss.ss_flags & SS_DISABLE ? "disarmed" : "armed");
    return 0;
}

static int pipe_fds[2];

static void *
burn_and_write(void *arg)
{
    sigset_t prof;

    (void)arg;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, NULL); /* the process's ITIMER_PROF goes to the reader */
    for (int i = 0; i < 40; i++) {
        host_burn_us(10000);
        if (write(pipe_fds[1], "x", 1) != 1) {
            perror("write");
        }
    }
    close(pipe_fds[1]);
    return NULL;
}

/* Reads a pipe while setitimer(ITIMER_PROF) interrupts the reads: how many fail with EINTR. */
static int
pipe_reads(int restart)
{
    struct itimerval it = { { 0, 2000 }, { 0, 2000 } }, off = { { 0, 0 }, { 0, 0 } };
    pthread_t th;
    int bytes = 0, eintr = 0, other = 0;
    char c;
    ssize_t r;

    set_handler(SIGPROF, on_prof, restart ? SA_RESTART : 0);
    if (pipe(pipe_fds) != 0 || pthread_create(&th, NULL, burn_and_write, NULL) != 0) {
        perror("pipe");
        return 1;
    }
    setitimer(ITIMER_PROF, &it, NULL);
    while ((r = read(pipe_fds[0], &c, 1)) != 0) {
        if (r > 0) {
            bytes++;
        } else if (errno == EINTR) {
            eintr++;
        } else {
            other++;
            break;
        }
    }
    setitimer(ITIMER_PROF, &off, NULL);
    pthread_join(th, NULL);
    fprintf(stderr, "%s: %d reads failed with EINTR, %d deliveries\n",
            restart ? "SA_RESTART" : "no SA_RESTART", eintr, (int)got);
    if (host_tsan && !restart) {
        /* the library ends a call the kernel restarted for its own handler (SA_RESTART) by an
         * edit of the context; TSan's runtime hands a handler a copy */
        printf("no SA_RESTART: read %d bytes, other errors %d, reads failed with EINTR: SKIPPED "
               "under TSan (a handler's edit of its context does not reach the interrupted call)\n",
               bytes, other);
        return 0;
    }
    printf("%s: read %d bytes, other errors %d, reads failed with EINTR: %s\n",
           restart ? "SA_RESTART" : "no SA_RESTART", bytes, other, eintr > 0 ? "some" : "none");
    return 0;
}

static volatile sig_atomic_t raised_tkill, raised_other, raised_code = SI_TKILL;

static void
on_prof_info(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)uctx;
    if (info->si_code == raised_code && info->si_pid == getpid() &&
        (raised_code != SI_QUEUE || info->si_value.sival_int == 42)) {
        raised_tkill++;
    } else {
        raised_other++;
    }
}

/* syscall(SYS_rt_tgsigqueueinfo) of SIGPROF to thread tid, as glibc's pthread_sigqueue makes it */
static long
others_raw_queue(pid_t tid, int value)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info)); /* as glibc's pthread_sigqueue fills it */
    info.si_signo = SIGPROF;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = value;
    return syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SIGPROF, &info);
}

/* Standard signals do not queue: a send that finds one of the same signal pending for the thread
 * is dropped. Bare, none of the host's own is pending at a send here (each one ran its handler
 * before the call returned), so every send runs the handler. */
static int
raises(int raw)
{
    const char *how[] = { "raise", "pthread_kill", "tgkill", "pthread_sigqueue" };
    const char *how_raw[] = { "syscall(SYS_tkill)", "syscall(SYS_tgkill)",
                              "syscall(SYS_rt_tgsigqueueinfo)" };
    struct sigaction sa;
    int k, i, missed, n = 20000 / 4;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_prof_info;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    for (k = 0; k < (raw ? 3 : 4); k++) {
        missed = 0;
        raised_code = k == 3 || (raw && k == 2) ? SI_QUEUE : SI_TKILL;
        raised_tkill = 0;
        raised_other = 0;
        for (i = 0; i < n; i++) {
            int before = (int)raised_tkill;

            host_burn_us(20);
            if (raw && k == 0) {
                syscall(SYS_tkill, gettid(), SIGPROF);
            } else if (raw && k == 1) {
                syscall(SYS_tgkill, getpid(), gettid(), SIGPROF);
            } else if (raw) {
                others_raw_queue(gettid(), 42);
            } else if (k == 0) {
                raise(SIGPROF);
            } else if (k == 1) {
                pthread_kill(pthread_self(), SIGPROF);
            } else if (k == 2) {
                tgkill(getpid(), gettid(), SIGPROF);
            } else {
                pthread_sigqueue(pthread_self(), SIGPROF, (union sigval){ .sival_int = 42 });
            }
            missed += (int)raised_tkill != before + 1;
        }
        fprintf(stderr, "%s: %d of %d sends ran the handler at once, %d other deliveries\n",
                raw ? how_raw[k] : how[k], n - missed, n, (int)raised_other);
        if (host_tsan && (raw || k >= 2)) {
            /* TSan's runtime runs at once only the sends it sees as to the thread itself */
            printf("%s: every send ran the handler before the call returned: SKIPPED under TSan "
                   "(its runtime holds a signal it did not see sent until its next "
                   "interceptor); %s from itself: %d of %d\n",
                   raw ? how_raw[k] : how[k],
                   raised_code == SI_QUEUE ? "SI_QUEUE with its value" : "SI_TKILL",
                   (int)raised_tkill, n);
            continue;
        }
        printf("%s: every send ran the handler before the call returned: %s; %s from "
               "itself: %d of %d\n",
               raw ? how_raw[k] : how[k], missed == 0 ? "yes" : "no",
               raised_code == SI_QUEUE ? "SI_QUEUE with its value" : "SI_TKILL", (int)raised_tkill,
               n);
    }
    return 0;
}

static _Atomic int others_seen, others_wrong, others_other_thread, others_code = SI_TKILL;
static _Atomic int others_stop;
static _Atomic pid_t others_tid;
static pthread_t others_target;

static void
on_prof_other(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)uctx;
    if (info->si_code != others_code || info->si_pid != getpid() ||
        (others_code == SI_QUEUE && info->si_value.sival_int != 43)) {
        others_wrong++;
    } else if (others_code != SI_USER && !pthread_equal(pthread_self(), others_target)) {
        others_other_thread++;
    }
    others_seen++;
}

static void *
others_burn(void *arg)
{
    (void)arg;
    others_tid = gettid();
    while (!others_stop) {
        host_burn_us(50);
    }
    return NULL;
}

/* The host's send of SIGPROF to another of its threads, while the agent samples that thread (it
 * runs): one of the agent's instances pending there when the host's comes would take it in
 * (standard signals do not queue). Each send waits for the handler to take the one before, up to
 * 2 s (a send the kernel merged never comes); bare, every one comes. */
static int
others(int raw)
{
    const char *how[] = { "pthread_kill", "pthread_sigqueue", "tgkill", "kill" };
    const char *how_raw[] = { "syscall(SYS_tkill)", "syscall(SYS_rt_tgsigqueueinfo)",
                              "syscall(SYS_tgkill)" };
    struct sigaction sa;
    pthread_t th;
    sigset_t prof;
    int k, i, n, swallowed;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_prof_other;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    if (pthread_create(&th, NULL, others_burn, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    others_target = th;
    while (others_tid == 0) {
        host_burn_us(10);
    }
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    for (k = 0; k < (raw ? 3 : 4); k++) {
        n = k == 3 ? 500 : 4000;
        swallowed = 0;
        others_code = k == 1 ? SI_QUEUE : k == 3 ? SI_USER : SI_TKILL;
        others_seen = 0;
        others_wrong = 0;
        others_other_thread = 0;
        if (k == 3) {
            /* kill() is the process's: the main thread keeps it blocked, so the burner takes it */
            pthread_sigmask(SIG_BLOCK, &prof, NULL);
        }
        for (i = 0; i < n; i++) {
            int before = others_seen, spins;

            if (raw && k == 0) {
                syscall(SYS_tkill, others_tid, SIGPROF);
            } else if (raw && k == 1) {
                others_raw_queue(others_tid, 43);
            } else if (raw) {
                syscall(SYS_tgkill, getpid(), others_tid, SIGPROF);
            } else if (k == 0) {
                pthread_kill(th, SIGPROF);
            } else if (k == 1) {
                pthread_sigqueue(th, SIGPROF, (union sigval){ .sival_int = 43 });
            } else if (k == 2) {
                tgkill(getpid(), others_tid, SIGPROF);
            } else {
                kill(getpid(), SIGPROF);
            }
            for (spins = 0; others_seen == before && spins < 200000; spins++) {
                usleep(10); /* up to 2 s on a loaded machine */
            }
            swallowed += others_seen == before;
            if (swallowed != 0) {
                break; /* one tells, and each costs the 2 s wait */
            }
        }
        if (k == 3) {
            pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
        }
        fprintf(stderr, "%s: %d of %d sends to the other thread ran its handler, %d swallowed\n",
                raw ? how_raw[k] : how[k], (int)others_seen, n, swallowed);
        if (host_tsan && k == 3) {
            /* the kernel keeps a process's instance apart from the thread's; TSan's runtime holds
             * one instance of a signal per thread until its next interceptor */
            printf("kill: every send to the other thread ran the handler: SKIPPED under TSan (its "
                   "runtime drops an instance that comes while it holds one of the same signal "
                   "for that thread)\n");
            continue;
        }
        printf("%s: every send to the other thread ran the handler: %s; %s from itself on that "
               "thread: %d of %d, other deliveries %d\n",
               raw ? how_raw[k] : how[k], swallowed == 0 && others_seen == n ? "yes" : "no",
               k == 1   ? "SI_QUEUE with its value"
               : k == 3 ? "SI_USER"
                        : "SI_TKILL",
               (int)(others_seen - others_wrong - others_other_thread), n,
               (int)(others_wrong + others_other_thread));
    }
    others_stop = 1;
    pthread_join(th, NULL);
    /* raise() with SIGPROF blocked, after 3 ms of CPU (one of the agent's instances pending by
     * then, most of the time): the send pends, and runs the handler once as the mask opens; raw:
     * syscall(SYS_tgkill) of its own tid, then rt_tgsigqueueinfo with a value */
    others_target = pthread_self();
    for (k = 0; k < (raw ? 2 : 1); k++) {
        others_code = k == 1 ? SI_QUEUE : SI_TKILL;
        others_seen = 0;
        others_wrong = 0;
        others_other_thread = 0;
        swallowed = 0;
        n = 200;
        for (i = 0; i < n; i++) {
            int before = others_seen;

            pthread_sigmask(SIG_BLOCK, &prof, NULL);
            host_burn_us(3000);
            if (k == 1) {
                others_raw_queue(gettid(), 43);
            } else if (raw) {
                syscall(SYS_tgkill, getpid(), gettid(), SIGPROF);
            } else {
                raise(SIGPROF);
            }
            pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
            swallowed += others_seen != before + 1;
        }
        fprintf(stderr, "%s blocked: %d of %d sends ran the handler as the mask opened\n",
                raw ? how_raw[2 - k] : "raise", (int)others_seen, n);
        printf("%s with SIGPROF blocked: every send ran the handler once as the mask opened: %s; "
               "%s from itself: %d of %d, other deliveries %d\n",
               raw ? how_raw[2 - k] : "raise", swallowed == 0 ? "yes" : "no",
               k == 1 ? "SI_QUEUE with its value" : "SI_TKILL",
               (int)(others_seen - others_wrong - others_other_thread), n,
               (int)(others_wrong + others_other_thread));
    }
    return 0;
}

/* The host's own POSIX timer on SIGPROF, to the thread (SIGEV_THREAD_ID) or to the process
 * (SIGEV_SIGNAL), every 500 us for 1.5 s while the thread burns CPU. Each delivery counts
 * 1 + si_overrun expirations and reads the clock; the kernel computes si_overrun as it takes the
 * signal, so by the last delivery the count is the expirations since the arming, to one (one may
 * fall between the kernel's take and the clock read). */
static timer_t timer_id;
static struct timespec timer_armed, timer_last;
static _Atomic long timer_runs, timer_overruns, timer_wrong, timer_overrun_differs;

#define TIMER_PERIOD_NS 500000L
#define TIMER_SIVAL     0x54494d52

static void
on_prof_timer(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)uctx;
    if (info->si_code != SI_TIMER || info->si_value.sival_int != TIMER_SIVAL) {
        timer_wrong++;
        return;
    }
    if (info->si_overrun != timer_getoverrun(timer_id)) {
        timer_overrun_differs++;
    }
    timer_runs++;
    timer_overruns += info->si_overrun;
    clock_gettime(CLOCK_MONOTONIC, &timer_last);
}

static int
own_timer(void)
{
    const char *how[] = { "SIGEV_THREAD_ID", "SIGEV_SIGNAL" };
    struct itimerspec its = { .it_interval = { 0, TIMER_PERIOD_NS },
                              .it_value = { 0, TIMER_PERIOD_NS } };
    struct sigaction sa;
    struct sigevent sev;
    sigset_t prof;
    int k;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_prof_timer;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    for (k = 0; k < 2; k++) {
        long expirations, counted;

        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = k == 0 ? SIGEV_THREAD_ID : SIGEV_SIGNAL;
        sev.sigev_signo = SIGPROF;
        sev.sigev_value.sival_int = TIMER_SIVAL;
        sev._sigev_un._tid = gettid(); /* glibc < 2.35 names no sigev_notify_thread_id */
        timer_runs = timer_overruns = timer_wrong = timer_overrun_differs = 0;
        if (timer_create(CLOCK_MONOTONIC, &sev, &timer_id) != 0) {
            perror("timer_create");
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &timer_armed);
        timer_last = timer_armed;
        timer_settime(timer_id, 0, &its, NULL);
        host_burn_us(1500000);
        /* a signal pending now is the timer's no more: the count stops at the last delivery */
        pthread_sigmask(SIG_BLOCK, &prof, NULL);
        timer_delete(timer_id);
        pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
        expirations = ((timer_last.tv_sec - timer_armed.tv_sec) * 1000000000L +
                       (timer_last.tv_nsec - timer_armed.tv_nsec)) /
                      TIMER_PERIOD_NS;
        counted = timer_runs + timer_overruns;
        fprintf(stderr,
                "%s timer: %ld handler runs + %ld overruns = %ld of %ld expirations by the last "
                "run; %ld wrong, %ld si_overrun unlike timer_getoverrun\n",
                how[k], (long)timer_runs, (long)timer_overruns, counted, expirations,
                (long)timer_wrong, (long)timer_overrun_differs);
        printf("%s timer at 2000 Hz: handler runs plus overruns are its expirations: %s; "
               "SI_TIMER with its value: %s; si_overrun as timer_getoverrun: %s\n",
               how[k],
               expirations >= 1000 && counted >= expirations - 1 && counted <= expirations + 1
                       ? "yes"
                       : "no",
               timer_wrong == 0 && timer_runs > 0 ? "yes" : "no",
               timer_overrun_differs == 0 ? "yes" : "no");
    }
    return 0;
}

/* ms of this thread's CPU, then an exec of this program as `signals execblocked-then`,
 * LD_PRELOAD left out of its environment. */
static int
exec_unprofiled(char **argv, int blocked, long ms)
{
    char *args[] = { argv[0], "execblocked-then", NULL };
    char *env[512];
    sigset_t prof;
    size_t n = 0;

    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    if (blocked) {
        sigprocmask(SIG_BLOCK, &prof, NULL);
    }
    host_burn_us(ms * 1000);
    for (char **e = environ; *e != NULL && n < sizeof(env) / sizeof(env[0]) - 1; e++) {
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0) {
            env[n++] = *e;
        }
    }
    env[n] = NULL;
    if (blocked) {
        printf("%s: exec with SIGPROF blocked\n", argv[1]);
    }
    execve(argv[0], args, env);
    perror("execve");
    return 1;
}

/* execwhile: 20 children that exec as exec_unprofiled() does, one at a time. */
static int
exec_children(char **argv)
{
    for (int i = 0; i < 20; i++) {
        pid_t p;
        int st;

        fflush(stdout);
        p = fork();
        if (p == 0) {
            _exit(exec_unprofiled(argv, 0, 30));
        }
        st = host_wait_child(p);
        printf("child %d: %s %d\n", i, st >= 0 && WIFSIGNALED(st) ? "killed by signal" : "status",
               st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st)
               : st >= 0                  ? WEXITSTATUS(st)
                                          : st);
    }
    return 0;
}

/* The exec'd program: opens SIGPROF (a signal pending through the exec is taken now). */
static int
exec_unprofiled_then(void)
{
    sigset_t prof, old;

    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    sigprocmask(SIG_UNBLOCK, &prof, &old);
    printf("exec'd: SIGPROF was %s; opened, alive\n",
           sigismember(&old, SIGPROF) ? "blocked" : "open");
    return 0;
}

int
main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "handler";

    setvbuf(stdout, NULL, _IOLBF, 0);
    host_wait_go();
    if (strcmp(how, "handler") == 0) {
        return own_handler();
    }
    if (strcmp(how, "ignore") == 0) {
        return ignore();
    }
    if (strcmp(how, "spawn") == 0) {
        return spawn(argv);
    }
    if (strcmp(how, "sleep") == 0) {
        return sleep_left();
    }
    if (strcmp(how, "altstack") == 0) {
        return altstack();
    }
    if (strcmp(how, "flags") == 0) {
        return flags();
    }
    if (strcmp(how, "offstack") == 0) {
        return offstack();
    }
    if (strcmp(how, "onstack") == 0) {
        return onstack();
    }
    if (strcmp(how, "smallstack") == 0) {
        return smallstack();
    }
    if (strcmp(how, "raises") == 0) {
        return raises(0);
    }
    if (strcmp(how, "timer") == 0) {
        return own_timer();
    }
    if (strcmp(how, "others") == 0) {
        return others(0);
    }
    if (strcmp(how, "rawsends") == 0) {
        int rc = others(1);

        return rc != 0 ? rc : raises(1);
    }
    if (strcmp(how, "execblocked") == 0) {
        return exec_unprofiled(argv, 1, 300);
    }
    if (strcmp(how, "execwhile") == 0) {
        return exec_children(argv);
    }
    if (strcmp(how, "execblocked-then") == 0) {
        return exec_unprofiled_then();
    }
    if (strcmp(how, "restart") == 0 || strcmp(how, "norestart") == 0) {
        return pipe_reads(strcmp(how, "restart") == 0);
    }
    fprintf(stderr,
            "usage: signals handler|ignore|spawn|sleep|altstack|flags|offstack|onstack|smallstack|"
            "raises|others|rawsends|timer|restart|norestart|execblocked|execwhile\n");
    return 2;
}
