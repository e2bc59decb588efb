// tests/dotnet/threadtime: more busy threads than cores, for N seconds (default 10): three threads
// in Hot, two in Warm, one in Cold, each doing the same arithmetic all the time, so a thread-time
// profile (dotnet-trace's default) charges every thread its whole wall time, running or waiting
// for a core: Hot about 3/6 of the workers' time, Warm 2/6, Cold 1/6. Prints "ready" when the
// workers run, then the units each method did.
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Threading;

namespace ThreadTime
{
    public static class Program
    {
        static volatile bool stop;
        static readonly long[] units = new long[3];

        [MethodImpl(MethodImplOptions.NoInlining)]
        static ulong Unit(ulong x)
        {
            for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
            return x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Hot() { ulong s = 1; long n = 0; while (!stop) { s = Unit(s); n++; } Interlocked.Add(ref units[0], n + (long)(s & 0)); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Warm() { ulong s = 2; long n = 0; while (!stop) { s = Unit(s); n++; } Interlocked.Add(ref units[1], n + (long)(s & 0)); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Cold() { ulong s = 3; long n = 0; while (!stop) { s = Unit(s); n++; } Interlocked.Add(ref units[2], n + (long)(s & 0)); }

        public static int Main(string[] args)
        {
            double seconds = args.Length > 0 ? double.Parse(args[0], CultureInfo.InvariantCulture) : 10.0;
            ThreadStart[] work = { Hot, Hot, Hot, Warm, Warm, Cold };
            var threads = new Thread[work.Length];
            for (int i = 0; i < work.Length; i++)
            {
                threads[i] = new Thread(work[i]) { Name = "worker" + i };
                threads[i].Start();
            }
            Console.WriteLine("ready");
            Console.Out.Flush();
            Thread.Sleep(TimeSpan.FromSeconds(seconds));
            stop = true;
            foreach (var t in threads) t.Join();
            Console.WriteLine($"hot {units[0]} warm {units[1]} cold {units[2]}");
            return 0;
        }
    }
}
