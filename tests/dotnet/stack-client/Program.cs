// tests/dotnet/stack-client PID OUT.json: what dotnet-stack does (its ReportCommand), with the
// same libraries: a session of Microsoft-DotNETCore-SampleProfiler alone at Informational with
// rundown, stopped after 10 ms; TraceLog and SampleProfilerThreadTimeComputer with
// OnlyManagedCodeStacks; then the first stack of every thread, root last, as dotnet-stack prints
// it ("UNMANAGED_CODE_TIME" is its "[Native Frames]"). Writes {"TID": ["leaf", ..., "root"]}.
using System;
using System.Collections.Generic;
using System.Diagnostics.Tracing;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading.Tasks;
using Microsoft.Diagnostics.NETCore.Client;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Stacks;

public static class Program
{
    static string Json(string s)
    {
        var sb = new StringBuilder("\"");
        foreach (char c in s)
        {
            if (c == '"' || c == '\\') sb.Append('\\').Append(c);
            else if (c < ' ') sb.AppendFormat("\\u{0:x4}", (int)c);
            else sb.Append(c);
        }
        return sb.Append('"').ToString();
    }

    public static int Main(string[] args)
    {
        int pid = int.Parse(args[0]);
        string dir = Path.GetDirectoryName(Path.GetFullPath(args[1]));
        string trace = Path.Combine(dir, "stack-client.nettrace");
        var client = new DiagnosticsClient(pid);
        var providers = new List<EventPipeProvider> {
            new EventPipeProvider("Microsoft-DotNETCore-SampleProfiler", EventLevel.Informational),
        };
        using (EventPipeSession session = client.StartEventPipeSession(providers, true))
        using (FileStream fs = File.OpenWrite(trace))
        {
            Task copy = session.EventStream.CopyToAsync(fs);
            Task.Delay(10).Wait();
            session.Stop();
            copy.Wait(TimeSpan.FromSeconds(30));
        }
        string etlx = TraceLog.CreateFromEventPipeDataFile(trace, Path.Combine(dir, "stack-client.etlx"));
        var threads = new SortedDictionary<int, List<string>>();
        using (var symbols = new SymbolReader(TextWriter.Null))
        using (var log = new TraceLog(etlx))
        {
            var source = new MutableTraceEventStackSource(log) { OnlyManagedCodeStacks = true };
            new SampleProfilerThreadTimeComputer(log, symbols).GenerateThreadTimeStacks(source);
            source.ForEach(sample =>
            {
                var frames = new List<string>();
                StackSourceCallStackIndex i = sample.StackIndex;
                string name;
                while (!(name = source.GetFrameName(source.GetFrameIndex(i), false)).StartsWith("Thread ("))
                {
                    frames.Add(name);
                    i = source.GetCallerIndex(i);
                }
                int close = name.IndexOf(')');
                int tid = int.Parse(name.Substring(8, close - 8));
                if (!threads.ContainsKey(tid)) threads[tid] = frames;
            });
        }
        File.WriteAllText(args[1], "{" + string.Join(",\n", threads.Select(t =>
            Json(t.Key.ToString()) + ": [" + string.Join(", ", t.Value.Select(Json)) + "]")) + "}\n");
        Console.WriteLine("stack-client: " + threads.Count + " threads");
        return 0;
    }
}
