// tests/dotnet/mixed SECONDS [TRUTH.json] [--work UNITS] [--progress FILE] [--until FILE] [--exit STATUS]
//
// Three parts with known CPU time, each measured by the app itself with the thread CPU clock:
//   managed        ManagedSpin, managed code: 8 ms of the main thread's CPU per round;
//   pinvoke        BurnViaNative -> P/Invoke burn_native -> burn_inner (libburn.so): 7 ms per round;
//   native thread  native_thread_work on a thread libburn.so starts (the runtime never sees it),
//                  paced to a third of the main thread's CPU time (it measures its own);
// about 40/35/25 % of the three parts' CPU time. Between rounds the main thread allocates (gen0
// GCs); a background thread writes the EventSource "Pipeprof-Test-Mixed" event Tick (Count,
// MonotonicNs) every 100 ms and once a second forces a GC and jits a DynamicMethod, so that any
// recording window holds GC, JIT and Tick events.
//
// SECONDS: how long (wall clock) the main thread's rounds go on. With --work UNITS the app does a
// fixed amount of work instead (SECONDS is ignored): UNITS work units of 10000 LCG steps, 8/20 in
// ManagedSpin, 7/20 in burn_native and 5/20 on the native thread.
// TRUTH.json: written at exit, {"managed_ns", "pinvoke_ns", "native_thread_ns", "process_cpu_ns"}.
// --progress FILE: every 100 ms and at exit a line of cumulative values
//   "MONOTONIC_NS MANAGED_NS PINVOKE_NS NATIVE_THREAD_NS PROCESS_CPU_NS" (CLOCK_MONOTONIC, the
//   clock of the runtime's event timestamps), so a test can take the truth over any window.
// --until FILE: the rounds end as soon as FILE exists (checked every round), SECONDS at most; a
//   test that must find the app still running after steps of unknown length on a loaded
//   machine (a tool's start-up, a recording) creates FILE when done instead of guessing SECONDS.
// --exit STATUS: the exit status (default 0).
// stdout: the same line for the same arguments, whatever the timing; the CPU times go to stderr.
using System;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.IO;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

[EventSource(Name = "Pipeprof-Test-Mixed")]
sealed class MixedSource : EventSource
{
    public static readonly MixedSource Log = new MixedSource();

    [Event(1, Level = EventLevel.Informational)]
    public void Tick(long Count, long MonotonicNs) { WriteEvent(1, Count, MonotonicNs); }
}

public static class Program
{
    [DllImport("burn")] static extern void burn_native(ulong ns, ulong units);
    [DllImport("burn")] static extern int start_native_thread(ulong permille, ulong units);
    [DllImport("burn")] static extern ulong stop_native_thread();
    [DllImport("burn"), SuppressGCTransition] static extern ulong native_thread_cpu_ns();
    [DllImport("burn"), SuppressGCTransition] static extern ulong burn_thread_cpu_ns();
    [DllImport("burn"), SuppressGCTransition] static extern ulong burn_process_cpu_ns();
    [DllImport("burn"), SuppressGCTransition] static extern ulong burn_monotonic_ns();

    const int UnitIters = 10000; // BURN_UNIT_ITERS in burn.c
    const ulong ManagedSliceNs = 8000000, PinvokeSliceNs = 7000000;
    const ulong ManagedUnits = 8, PinvokeUnits = 7, NativeUnits = 5; // per round, of 20

    static ulong sink = 1;
    static long managedNs, pinvokeNs; // written by the main thread, read by the ticker
    static readonly object[] keep = new object[64];
    static int keepAt;
    static readonly ManualResetEventSlim stopping = new ManualResetEventSlim();
    static StreamWriter progress;

    // Burns exactly units work units, or with units == 0 until ns more of this thread's CPU time.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ManagedSpin(ulong ns, ulong units)
    {
        ulong end = burn_thread_cpu_ns() + ns, x = sink;
        for (ulong n = 0; units == 0 || n < units; n++)
        {
            for (int i = 0; i < UnitIters; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
            if (units == 0 && burn_thread_cpu_ns() >= end) break;
        }
        sink = x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void BurnViaNative(ulong ns, ulong units) { burn_native(ns, units); }

    // Garbage between rounds, a little of it kept for a while: gen0 and gen1 collections.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Churn()
    {
        for (int i = 0; i < 64; i++)
        {
            var a = new byte[4096];
            a[i] = 1;
            if ((i & 15) == 0) keep[keepAt++ & 63] = a;
        }
    }

    // A new method for the JIT every call: MethodJittingStarted and MethodLoadVerbose events.
    static long JitOne(long n)
    {
        var dm = new DynamicMethod("MixedJit" + n.ToString(CultureInfo.InvariantCulture), typeof(long),
            new[] { typeof(long) }, typeof(Program).Module);
        var il = dm.GetILGenerator();
        il.Emit(OpCodes.Ldarg_0);
        il.Emit(OpCodes.Ldc_I8, n);
        il.Emit(OpCodes.Add);
        il.Emit(OpCodes.Ret);
        return ((Func<long, long>)dm.CreateDelegate(typeof(Func<long, long>)))(1);
    }

    static void WriteProgress(ulong native)
    {
        if (progress == null) return;
        progress.WriteLine(string.Format(CultureInfo.InvariantCulture, "{0} {1} {2} {3} {4}", burn_monotonic_ns(),
            Volatile.Read(ref managedNs), Volatile.Read(ref pinvokeNs), native, burn_process_cpu_ns()));
    }

    static void Ticker()
    {
        long n = 0;
        WriteProgress(native_thread_cpu_ns());
        while (!stopping.Wait(100))
        {
            n++;
            MixedSource.Log.Tick(n, (long)burn_monotonic_ns());
            WriteProgress(native_thread_cpu_ns());
            if (n % 10 == 0)
            {
                GC.Collect();
                JitOne(n);
            }
        }
    }

    public static int Main(string[] args)
    {
        double seconds = 3;
        string truth = null, until = null;
        long work = 0;
        int status = 0, positional = 0;
        for (int i = 0; i < args.Length; i++)
        {
            string a = args[i];
            if (a == "--work" && i + 1 < args.Length) work = long.Parse(args[++i], CultureInfo.InvariantCulture);
            else if (a == "--progress" && i + 1 < args.Length) progress = new StreamWriter(args[++i]) { AutoFlush = true };
            else if (a == "--until" && i + 1 < args.Length) until = args[++i];
            else if (a == "--exit" && i + 1 < args.Length) status = int.Parse(args[++i], CultureInfo.InvariantCulture);
            else if (!a.StartsWith("--", StringComparison.Ordinal) && positional == 0)
            {
                seconds = double.Parse(a, CultureInfo.InvariantCulture);
                positional++;
            }
            else if (!a.StartsWith("--", StringComparison.Ordinal) && positional == 1)
            {
                truth = a;
                positional++;
            }
            else
            {
                Console.Error.WriteLine("usage: mixed SECONDS [TRUTH.json] [--work UNITS] [--progress FILE] [--until FILE] [--exit STATUS]");
                return 2;
            }
        }
        long rounds = work / 20;
        int err = start_native_thread(333, work > 0 ? (ulong)(rounds * (long)NativeUnits) : 0);
        if (err != 0)
        {
            Console.Error.WriteLine("mixed: start_native_thread: error " + err);
            return 1;
        }
        var ticker = new Thread(Ticker) { IsBackground = true, Name = "mixed-ticker" };
        ticker.Start();
        var sw = Stopwatch.StartNew();
        for (long r = 0; work > 0 ? r < rounds : sw.Elapsed.TotalSeconds < seconds && (until == null || !File.Exists(until)); r++)
        {
            ulong c0 = burn_thread_cpu_ns();
            ManagedSpin(ManagedSliceNs, work > 0 ? ManagedUnits : 0);
            ulong c1 = burn_thread_cpu_ns();
            Volatile.Write(ref managedNs, managedNs + (long)(c1 - c0));
            BurnViaNative(PinvokeSliceNs, work > 0 ? PinvokeUnits : 0);
            ulong c2 = burn_thread_cpu_ns();
            Volatile.Write(ref pinvokeNs, pinvokeNs + (long)(c2 - c1));
            Churn();
        }
        ulong native = stop_native_thread();
        stopping.Set();
        ticker.Join();
        WriteProgress(native);
        progress?.Dispose();
        ulong process = burn_process_cpu_ns();
        if (truth != null)
        {
            File.WriteAllText(truth, string.Format(CultureInfo.InvariantCulture,
                "{{\"managed_ns\": {0}, \"pinvoke_ns\": {1}, \"native_thread_ns\": {2}, \"process_cpu_ns\": {3}}}\n",
                managedNs, pinvokeNs, native, process));
        }
        Console.Error.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "mixed: CPU ms managed {0:F0} pinvoke {1:F0} native_thread {2:F0} process {3:F0}",
            managedNs / 1e6, pinvokeNs / 1e6, native / 1e6, process / 1e6));
        Console.WriteLine(work > 0
            ? string.Format(CultureInfo.InvariantCulture, "mixed: {0} work units in ManagedSpin, BurnViaNative and native_thread_work", rounds * 20)
            : "mixed: ManagedSpin, BurnViaNative and native_thread_work ran");
        return status;
    }
}
