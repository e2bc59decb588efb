// tests/dotnet/mixed-check IN.nettrace OUT.json ETLX: reads a trace of the mixed test app
// (tests/dotnet/mixed) with TraceEvent, as PerfView and dotnet-trace do (TraceLog, its .etlx
// written to ETLX, a path the caller names), and writes what TraceEvent makes of it as JSON:
//   samples      Microsoft-DotNETCore-SampleProfiler ThreadSample events by payload type: 2 is
//                running; the others (1: not running, CPU mode's stackless "stopped running"
//                markers among them) are counted apart and never as samples;
//   parts        running samples by part, the first that matches a frame: native_thread
//                (native_thread_work, native_thread_main), managed (ManagedSpin), pinvoke
//                (burn_native, burn_inner, BurnViaNative), other;
//   pinvoke      running samples with burn_native/burn_inner outside the native thread: on the
//                main thread (thread id = process id), and of those the ones with the managed
//                caller BurnViaNative in the same stack; the ones without that caller (any
//                thread); BurnViaNative without a native frame below it;
//   window_ns    the first and last running sample's timestamp (raw QPC in ns);
//   names        the frame names (module!method, as TraceEvent names them) of the parts'
//                functions, with the running samples that hold each;
//   examples     each part's most frequent whole stacks (root first, ';' between frames);
//   unnamed      frames of running samples that TraceEvent could not name, and all frames;
//   thread_time  TraceEvent's thread-time view (SampleProfilerThreadTimeComputer, the one
//                dotnet-trace convert and PerfView use): ms per leaf pseudo-frame (CPU_TIME...)
//                and CPU_TIME by part;
//   events       every event in the stream by "provider/name" (read with EventPipeEventSource:
//                TraceLog keeps the rundown's method events to itself);
//   ticks        the app's Pipeprof-Test-Mixed/Tick events: count, first and last Count, and
//                timestamp minus payload MonotonicNs (min, median, max): how the trace's clock
//                maps to CLOCK_MONOTONIC;
//   threads      running and other samples per thread id (the 16 with most samples).
// Exit status 0 whenever the trace could be read: the caller judges.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Text.Json;
using System.Text.RegularExpressions;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.EventPipe;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;
using Microsoft.Diagnostics.Tracing.Stacks;

// TimeStampQPC is "discouraged": the raw timestamps are what a test maps to CLOCK_MONOTONIC.
#pragma warning disable CS0618

public static class Program
{
    static Regex Fn(string alternatives) =>
        new Regex(@"(?<![A-Za-z0-9_])(" + alternatives + @")(?![A-Za-z0-9_])", RegexOptions.Compiled);

    static readonly Regex NativeThread = Fn("native_thread_work|native_thread_main");
    static readonly Regex Managed = Fn("ManagedSpin");
    static readonly Regex Burn = Fn("burn_native|burn_inner");
    static readonly Regex Caller = Fn("BurnViaNative");
    static readonly string[] PartNames = { "managed", "pinvoke", "native_thread", "other" };

    static void Add<K>(Dictionary<K, long> d, K key) => d[key] = d.TryGetValue(key, out var v) ? v + 1 : 1;

    static List<Dictionary<string, object>> Top(Dictionary<string, long> d, int n, string key) =>
        d.OrderByDescending(kv => kv.Value).ThenBy(kv => kv.Key, StringComparer.Ordinal).Take(n)
            .Select(kv => new Dictionary<string, object> { [key] = kv.Key, ["samples"] = kv.Value }).ToList();

    struct Marks { public bool Native, Managed, Burn, Caller; }

    // Which of the parts' functions a stack (frame names) holds.
    static Marks Mark(List<string> frames)
    {
        var m = new Marks();
        foreach (var f in frames)
        {
            m.Native |= NativeThread.IsMatch(f);
            m.Managed |= Managed.IsMatch(f);
            m.Burn |= Burn.IsMatch(f);
            m.Caller |= Caller.IsMatch(f);
        }
        return m;
    }

    static string Part(Marks m) =>
        m.Native ? "native_thread" : m.Managed ? "managed" : m.Burn || m.Caller ? "pinvoke" : "other";

    // Every event in the stream by provider/name.
    static Dictionary<string, long> CountEvents(string path)
    {
        var events = new Dictionary<string, long>();
        using var source = new EventPipeEventSource(path);
        // A parser with a callback registers its templates, so that events have names.
        source.Clr.All += _ => { };
        new ClrRundownTraceEventParser(source).All += _ => { };
        new SampleProfilerTraceEventParser(source).All += _ => { };
        source.Dynamic.All += _ => { };
        source.AllEvents += e => Add(events, e.ProviderName + "/" + e.EventName);
        source.Process();
        return events;
    }

    static Dictionary<string, object> ThreadTime(TraceLog log)
    {
        var source = new MutableTraceEventStackSource(log);
        using (var symbols = new SymbolReader(TextWriter.Null, "", null))
            new SampleProfilerThreadTimeComputer(log, symbols).GenerateThreadTimeStacks(source, log.Events);
        var leaves = new Dictionary<string, double>();
        var parts = PartNames.ToDictionary(p => p, p => 0.0);
        var frames = new List<string>();
        source.ForEach(sample =>
        {
            frames.Clear();
            for (var i = sample.StackIndex; i != StackSourceCallStackIndex.Invalid; i = source.GetCallerIndex(i))
                frames.Add(source.GetFrameName(source.GetFrameIndex(i), false));
            string leaf = frames.Count > 0 ? frames[0] : "";
            leaves[leaf] = (leaves.TryGetValue(leaf, out var ms) ? ms : 0) + sample.Metric;
            if (leaf == "CPU_TIME") parts[Part(Mark(frames))] += sample.Metric;
        });
        return new Dictionary<string, object>
        {
            ["leaf_ms"] = leaves.OrderByDescending(kv => kv.Value).Take(8).ToDictionary(kv => kv.Key, kv => Math.Round(kv.Value, 3)),
            ["cpu_ms"] = parts.ToDictionary(kv => kv.Key, kv => Math.Round(kv.Value, 3)),
        };
    }

    public static int Main(string[] args)
    {
        if (args.Length != 3) { Console.Error.WriteLine("usage: mixed-check IN.nettrace OUT.json ETLX"); return 2; }
        var events = CountEvents(args[0]);
        string etlx = TraceLog.CreateFromEventPipeDataFile(args[0], args[2]);
        using var log = new TraceLog(etlx);

        // TraceEvent keeps the raw QPC timestamps but not (publicly) their frequency: it follows
        // from the first and last event, whose relative times TraceEvent computes with it.
        long qpc0 = 0, qpc1 = 0;
        double ms0 = 0, ms1 = 0;
        foreach (TraceEvent e in log.Events)
        {
            if (qpc0 == 0) { qpc0 = e.TimeStampQPC; ms0 = e.TimeStampRelativeMSec; }
            qpc1 = e.TimeStampQPC;
            ms1 = e.TimeStampRelativeMSec;
        }
        double nsPerQpc = qpc1 > qpc0 ? (ms1 - ms0) * 1e6 / (qpc1 - qpc0) : 1;

        var otherTypes = new Dictionary<string, long>();
        var parts = PartNames.ToDictionary(p => p, p => 0L);
        var pinvoke = new Dictionary<string, long>
        {
            ["burn_main"] = 0, ["burn_main_with_caller"] = 0, ["burn_without_caller"] = 0, ["caller_without_burn"] = 0,
        };
        var names = new Dictionary<string, long>();
        var stacks = PartNames.ToDictionary(p => p, p => new Dictionary<string, long>());
        var threads = new Dictionary<int, long[]>();
        var tickOffsets = new List<double>();
        long running = 0, runningStackless = 0, otherWithStack = 0, frameCount = 0, unnamed = 0;
        long tickFirst = -1, tickLast = -1;
        double first = double.NaN, last = double.NaN;
        var frames = new List<string>();

        foreach (TraceEvent e in log.Events)
        {
            if (e.ProviderName == "Pipeprof-Test-Mixed" && e.EventName == "Tick")
            {
                long count = Convert.ToInt64(e.PayloadByName("Count"), CultureInfo.InvariantCulture);
                long mono = Convert.ToInt64(e.PayloadByName("MonotonicNs"), CultureInfo.InvariantCulture);
                if (tickFirst < 0) tickFirst = count;
                tickLast = count;
                tickOffsets.Add(e.TimeStampQPC * nsPerQpc - mono);
                continue;
            }
            if (e.ProviderName != "Microsoft-DotNETCore-SampleProfiler" || (int)e.ID != 0) continue;
            byte[] payload = e.EventData();
            int type = payload.Length >= 4 ? BitConverter.ToInt32(payload, 0) : -1;
            var cs = e.CallStack();
            if (!threads.TryGetValue(e.ThreadID, out var perThread)) threads[e.ThreadID] = perThread = new long[2];
            if (type != 2)
            {
                Add(otherTypes, type.ToString(CultureInfo.InvariantCulture));
                if (cs != null) otherWithStack++;
                perThread[1]++;
                continue;
            }
            running++;
            perThread[0]++;
            double t = e.TimeStampQPC * nsPerQpc;
            if (double.IsNaN(first)) first = t;
            last = t;
            if (cs == null) { runningStackless++; continue; }

            frames.Clear();
            for (; cs != null; cs = cs.Caller)
            {
                string method = cs.CodeAddress.FullMethodName ?? "";
                frameCount++;
                if (method.Length == 0 || method.StartsWith("?", StringComparison.Ordinal)) unnamed++;
                frames.Add(cs.CodeAddress.ModuleName + "!" + method);
            }
            var m = Mark(frames);
            string part = Part(m);
            parts[part]++;
            foreach (var f in frames.Distinct())
                if (NativeThread.IsMatch(f) || Managed.IsMatch(f) || Burn.IsMatch(f) || Caller.IsMatch(f)) Add(names, f);
            if (m.Burn && !m.Native)
            {
                if (e.ThreadID == e.ProcessID)
                {
                    pinvoke["burn_main"]++;
                    if (m.Caller) pinvoke["burn_main_with_caller"]++;
                }
                if (!m.Caller) pinvoke["burn_without_caller"]++;
            }
            if (m.Caller && !m.Burn) pinvoke["caller_without_burn"]++;
            frames.Reverse();
            string stack = string.Join(";", frames.Take(48)) + (frames.Count > 48 ? ";..." : "");
            Add(stacks[part], stack);
        }

        tickOffsets.Sort();
        var doc = new Dictionary<string, object>
        {
            ["trace"] = Path.GetFileName(args[0]),
            ["qpc_freq"] = Math.Round(1e9 / nsPerQpc),
            ["samples"] = new Dictionary<string, object>
            {
                ["running"] = running, ["running_stackless"] = runningStackless,
                ["other_types"] = otherTypes, ["other_with_stack"] = otherWithStack,
            },
            ["parts"] = parts,
            ["pinvoke"] = pinvoke,
            ["window_ns"] = double.IsNaN(first) ? null : new[] { first, last },
            ["names"] = Top(names, 40, "name"),
            ["examples"] = stacks.ToDictionary(kv => kv.Key, kv => Top(kv.Value, 3, "stack")),
            ["unnamed"] = new Dictionary<string, long> { ["frames"] = frameCount, ["unnamed"] = unnamed },
            ["thread_time"] = ThreadTime(log),
            ["events"] = events,
            ["ticks"] = new Dictionary<string, object>
            {
                ["count"] = tickOffsets.Count, ["first"] = tickFirst, ["last"] = tickLast,
                ["offset_ns"] = tickOffsets.Count == 0 ? null
                    : new[] { tickOffsets[0], tickOffsets[tickOffsets.Count / 2], tickOffsets[tickOffsets.Count - 1] },
            },
            ["threads"] = threads.OrderByDescending(kv => kv.Value[0] + kv.Value[1]).Take(16)
                .ToDictionary(kv => kv.Key.ToString(CultureInfo.InvariantCulture),
                    kv => new Dictionary<string, long> { ["running"] = kv.Value[0], ["other"] = kv.Value[1] }),
        };
        File.WriteAllText(args[1], JsonSerializer.Serialize(doc, new JsonSerializerOptions { WriteIndented = true }));
        return 0;
    }
}
