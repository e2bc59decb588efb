// tests/dotnet/traceevent-samples IN.nettrace OUT.json: reads a trace with TraceEvent's TraceLog
// (as PerfView and dotnet-trace do) and writes what it makes of the SampleProfiler's samples:
// their number, per leaf method (module!method, as TraceEvent names the frame) the samples that
// had it as the leaf, and per method the samples that had it anywhere on the stack, highest
// first. tests/dotnet-report-parity.sh compares this with
// `pipeprof report`.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.Json;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;

public static class Program
{
    public static int Main(string[] args)
    {
        if (args.Length != 2) { Console.Error.WriteLine("usage: traceevent-samples IN.nettrace OUT.json"); return 2; }
        string etlx = TraceLog.CreateFromEventPipeDataFile(args[0], Path.ChangeExtension(args[1], ".etlx"));
        using var log = new TraceLog(etlx);
        long samples = 0;
        var self = new Dictionary<string, long>();
        var total = new Dictionary<string, long>();
        var seen = new HashSet<string>();
        foreach (TraceEvent e in log.Events)
        {
            if (e.ProviderName != "Microsoft-DotNETCore-SampleProfiler" || (int)e.ID != 0) continue;
            samples++;
            var cs = e.CallStack();
            if (cs == null) continue;
            var ca = cs.CodeAddress;
            string name = ca.ModuleName + "!" + ca.FullMethodName;
            self[name] = self.TryGetValue(name, out var n) ? n + 1 : 1;
            seen.Clear();
            for (; cs != null; cs = cs.Caller)
            {
                string f = cs.CodeAddress.ModuleName + "!" + cs.CodeAddress.FullMethodName;
                if (seen.Add(f)) total[f] = total.TryGetValue(f, out var t) ? t + 1 : 1;
            }
        }
        var top = self.OrderByDescending(kv => kv.Value).ThenBy(kv => kv.Key, StringComparer.Ordinal).Take(20)
            .Select(kv => new Dictionary<string, object> { ["function"] = kv.Key, ["self"] = kv.Value }).ToList();
        var topTotal = total.OrderByDescending(kv => kv.Value).ThenBy(kv => kv.Key, StringComparer.Ordinal).Take(1000)
            .Select(kv => new Dictionary<string, object> { ["function"] = kv.Key, ["total"] = kv.Value }).ToList();
        var doc = new Dictionary<string, object> { ["samples"] = samples, ["top_self"] = top, ["top_total"] = topTotal };
        File.WriteAllText(args[1], JsonSerializer.Serialize(doc));
        return 0;
    }
}
