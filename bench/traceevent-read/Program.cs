// bench/traceevent-read: reads a nettrace file with TraceEvent's EventPipeEventSource (every
// event dispatched, no per-event work) from memory, N times per sample, and prints the median of
// 5 samples in the same form as build/bench/bench-reader, after 2 warm-up reads for the JIT.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using Microsoft.Diagnostics.Tracing;

public static class Program
{
    static long ReadOnce(byte[] bytes)
    {
        long events = 0;
        using var source = new EventPipeEventSource(new MemoryStream(bytes, false));
        source.AllEvents += e => events++;
        source.Process();
        return events;
    }

    public static int Main(string[] args)
    {
        if (args.Length != 1) { Console.Error.WriteLine("usage: traceevent-read FILE"); return 2; }
        byte[] bytes = File.ReadAllBytes(args[0]);
        long events = ReadOnce(bytes);
        ReadOnce(bytes);
        int reads = Math.Max(1, (int)(200_000_000 / Math.Max(bytes.Length, 1)));
        var mbs = new List<double>();
        for (int s = 0; s < 5; s++)
        {
            var sw = Stopwatch.StartNew();
            for (int i = 0; i < reads; i++) ReadOnce(bytes);
            double seconds = sw.Elapsed.TotalSeconds;
            mbs.Add(bytes.Length * (double)reads / seconds / 1e6);
        }
        mbs.Sort();
        double median = mbs[2];
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "traceevent: {0} events per read, {1} reads per sample\nmedian of 5: {2:F1} MB/s, {3:F2} M events/s",
            events, reads, median, median * 1e6 / bytes.Length * events / 1e6));
        return 0;
    }
}
