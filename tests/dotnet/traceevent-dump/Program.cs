// tests/dotnet/traceevent-dump: reads a nettrace file with TraceEvent's TraceLog, the way
// PerfView and dotnet-trace do, and prints one JSON object per event: provider, id, name,
// thread, payload fields (names and values), the call stack (addresses, leaf first) and the
// timestamp in the trace's own ticks (TimeStampQPC); and on standard output "EventsLost N", the
// events TraceEvent counts lost (sequence gaps).
// tests/dotnet-traceevent.sh compares that with what pipeprof's writer was asked to write.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text.Json;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;

public static class Program
{
    static object Value(object v)
    {
        switch (v)
        {
            case Guid g: return g.ToString("D");
            case Array a:
                var list = new List<object>();
                foreach (var x in a) list.Add(Value(x));
                return list;
            default: return v;
        }
    }

    public static int Main(string[] args)
    {
        if (args.Length != 2) { Console.Error.WriteLine("usage: traceevent-dump IN.nettrace OUT.jsonl"); return 2; }
        string etlx = TraceLog.CreateFromEventPipeDataFile(args[0], Path.ChangeExtension(args[1], ".etlx"));
        using var log = new TraceLog(etlx);
        using var output = new StreamWriter(args[1]);
        foreach (TraceEvent e in log.Events)
        {
            var fields = new Dictionary<string, object>();
            var names = e.PayloadNames ?? new string[0];
            for (int i = 0; i < names.Length; i++) fields[names[i]] = Value(e.PayloadValue(i));
            var stack = new List<string>();
            for (var cs = e.CallStack(); cs != null; cs = cs.Caller)
                stack.Add("0x" + cs.CodeAddress.Address.ToString("x", CultureInfo.InvariantCulture));
            var row = new Dictionary<string, object>
            {
                ["provider"] = e.ProviderName,
                ["id"] = (int)e.ID,
                ["name"] = e.EventName,
                ["thread"] = e.ThreadID,
                ["fields"] = fields,
                ["stack"] = stack,
                ["ts"] = e.TimeStampQPC,
            };
            output.WriteLine(JsonSerializer.Serialize(row));
        }
        Console.WriteLine("EventsLost " + log.EventsLost.ToString(CultureInfo.InvariantCulture));
        return 0;
    }
}
