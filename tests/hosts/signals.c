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
 *                     posix_spawn, system() and fork+exec send themselves SIGPROF and live
 *   signals sleep     sleep(2) cut short by its own SIGALRM after 0.3, 1.3 and 1.7 s: what
 *                     sleep() returns (glibc: the whole seconds left, 1, 0, 0)
 *   signals altstack  SIGUSR1 and SIGSEGV-style handlers with SA_ONSTACK on a 6 KiB
 *                     sigaltstack, raised 2000 times while burning CPU
 *   signals flags     its own SIGPROF handler with SA_NODEFER (SIGPROF open inside it), with
 *                     sa_mask (SIGUSR2 blocked inside it), with SA_RESETHAND (SIG_DFL after one
 *                     delivery; a forked child that raises it twice dies by SIGPROF)
 *   signals offstack  burns 300 ms of CPU in a coroutine (swapcontext) whose stack is its
 *                     sigaltstack, as green-thread libraries may: the kernel reports that code
 *                     as on the alternate stack, the agent takes no sample there and says so
 *                     (host-contract.sh checks the recording's lost samples: HC_EXPECT_LOST)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "hosts.h"

extern char **environ;
static volatile sig_atomic_t got;

static void
on_prof(int sig)
{
    (void)sig;
    got++;
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
    struct sigaction sa, old;

    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        return 1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
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
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    for (int i = 0; i < 3; i++) {
        struct itimerval it = { { 0, 0 }, { us[i] / 1000000, us[i] % 1000000 } };

        setitimer(ITIMER_REAL, &it, NULL);
        printf("sleep(2) interrupted after %ld ms: returned %u\n", us[i] / 1000, sleep(2));
    }
    return 0;
}

static volatile sig_atomic_t prof_open, usr2_blocked;

static void
on_prof_mask(int sig)
{
    sigset_t now;

    (void)sig;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    prof_open = !sigismember(&now, SIGPROF);
    usr2_blocked = sigismember(&now, SIGUSR2);
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
    got = 0;
    raise(SIGPROF);
    sigaction(SIGPROF, NULL, &old);
    printf("%s: %d delivery, SIGPROF %s and SIGUSR2 %s inside, then %s\n", what, (int)got,
           prof_open ? "open" : "blocked", usr2_blocked ? "blocked" : "open",
           old.sa_handler == SIG_DFL ? "SIG_DFL" : "its handler");
}

static int
flags(void)
{
    pid_t pid;
    int status;

    host_burn_us(50000);
    raise_with("no flags", 0, 0);
    raise_with("SA_NODEFER", SA_NODEFER, 0);
    raise_with("sa_mask SIGUSR2", SA_RESTART, 1);
    raise_with("SA_RESETHAND", SA_RESETHAND, 0);
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

static int
offstack(void)
{
    static char stack[256 * 1024];
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack), .ss_flags = 0 };

    if (sigaltstack(&ss, NULL) != 0 || getcontext(&burn_ctx) != 0) {
        perror("sigaltstack");
        return 1;
    }
    burn_ctx.uc_stack = ss;
    burn_ctx.uc_link = &main_ctx;
    makecontext(&burn_ctx, burn_there, 0);
    if (swapcontext(&main_ctx, &burn_ctx) != 0) {
        perror("swapcontext");
        return 1;
    }
    printf("burned 300 ms on its alternate stack\n");
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
    fprintf(stderr, "usage: signals handler|ignore|spawn|sleep|altstack|flags|offstack\n");
    return 2;
}
