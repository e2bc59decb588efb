// tests/dotnet/hotmethods: for N seconds (default 2) the main thread does work units, three of
// every four in Hot75 and one in Cold25 (all units cost the same), so a sampling profiler
// should charge them about 75% and 25% of the main thread's CPU. Prints the units done.
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace HotMethods
{
    public static class Program
    {
        static ulong state = 1;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static ulong Unit(ulong x)
        {
            for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
            return x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Hot75() { state = Unit(state); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Cold25() { state = Unit(state ^ 0x5555); }

        public static int Main(string[] args)
        {
            double seconds = args.Length > 0 ? double.Parse(args[0], CultureInfo.InvariantCulture) : 2.0;
            var sw = Stopwatch.StartNew();
            long hot = 0, cold = 0;
            while (sw.Elapsed.TotalSeconds < seconds)
            {
                for (int i = 0; i < 4; i++)
                {
                    if (i < 3) { Hot75(); hot++; } else { Cold25(); cold++; }
                }
            }
            Console.WriteLine($"hot {hot} cold {cold} state {(state == 0 ? 0 : 1)}");
            return 0;
        }
    }
}
