// Prints, for every event TraceEvent's runtime parsers know (the runtime, its rundown and
// private providers), one line: provider TAB id TAB TraceEvent's event name.
// The events are enumerated from the parsers' own templates, so the names are exactly the ones
// TraceEvent, PerfView and dotnet-trace show. Usage: runtime-event-names TRACE.nettrace
// (any nettrace file: TraceEvent's parsers need a source to exist, nothing is read from it).
using System;
using System.Collections.Generic;
using System.Reflection;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;

static class RuntimeEventNames
{
    static void Main(string[] args)
    {
        var source = new EventPipeEventSource(args[0]);
        var parsers = new TraceEventParser[] {
            new ClrTraceEventParser(source), new ClrRundownTraceEventParser(source),
            new ClrPrivateTraceEventParser(source),
        };
        // EnumerateTemplates is not public; it is the parsers' own list of what they decode.
        var enumerate = typeof(TraceEventParser).GetMethod("EnumerateTemplates",
            BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public);
        var names = new SortedDictionary<string, string>(StringComparer.Ordinal);
        foreach (var parser in parsers)
        {
            Action<TraceEvent> add = t =>
            {
                string key = t.ProviderName + "\t" + ((int)t.ID).ToString("D5");
                if (!names.ContainsKey(key))
                    names[key] = t.EventName;
            };
            enumerate.Invoke(parser, new object[] { null, add });
        }
        foreach (var kv in names)
        {
            string[] k = kv.Key.Split('\t');
            Console.WriteLine(k[0] + "\t" + int.Parse(k[1]) + "\t" + kv.Value);
        }
    }
}
