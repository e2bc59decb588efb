// tests/dotnet/mixed SECONDS: the main thread alternates ManagedSpin (managed code) and
// BurnViaNative (P/Invoke into libburn.so's burn_native -> burn_inner) in equal CPU slices, and
// a native thread started by start_native_thread burns for the whole run. Prints the CPU time
// of each part as measured by the process ("managed_ms native_ms").
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

public static class Program
{
    [DllImport("burn")] static extern void burn_native(ulong ns);
    [DllImport("burn")] static extern int start_native_thread(ulong ns);

    static ulong sink = 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ManagedSpin(TimeSpan cpu)
    {
        var p = Process.GetCurrentProcess();
        var end = Stopwatch.GetTimestamp() + (long)(cpu.TotalSeconds * Stopwatch.Frequency);
        ulong x = sink;
        while (Stopwatch.GetTimestamp() < end)
        {
            for (int i = 0; i < 5000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        sink = x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void BurnViaNative(TimeSpan cpu) { burn_native((ulong)(cpu.TotalMilliseconds * 1e6)); }

    public static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], CultureInfo.InvariantCulture) : 3;
        start_native_thread((ulong)(seconds * 0.5e9));
        var slice = TimeSpan.FromMilliseconds(20);
        var sw = Stopwatch.StartNew();
        double managed = 0, native = 0;
        while (sw.Elapsed.TotalSeconds < seconds)
        {
            var t0 = sw.Elapsed; ManagedSpin(slice); managed += (sw.Elapsed - t0).TotalMilliseconds;
            var t1 = sw.Elapsed; BurnViaNative(slice); native += (sw.Elapsed - t1).TotalMilliseconds;
        }
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "{0:F0} {1:F0}", managed, native));
        return 0;
    }
}
